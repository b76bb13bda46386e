/**
 * While containerd starts, the preload finds out it cannot answer from its socket's absence, without
 * running ctr (a Go process start: seconds of CPU on a booting node); with a socket there, ctr asks.
 */
import { createServer, type Server } from 'node:net';
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { containerdProblem, listImages } from '../../../agent/preload/containerd.js';
import { testTempDir } from '../temp-dir.js';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

/** A ctr that records its arguments and answers like one that reached a containerd refusing it. */
async function loggingCtr(dir: string): Promise<{ ctr: string; calls: () => Promise<string[]> }> {
  const ctr = path.join(dir, 'ctr');
  const log = path.join(dir, 'ctr-calls');
  await writeFile(ctr, `#!/bin/sh\necho "$*" >> '${log}'\necho 'ctr: rpc error: code = Unavailable' >&2\nexit 1\n`, { mode: 0o755 });
  return { ctr, calls: async () => (await readFile(log, 'utf8').catch(() => '')).split('\n').filter(Boolean) };
}

describe('containerd before its socket exists', () => {
  it('says there is no socket yet, and runs no ctr', async () => {
    const dir = await testTempDir('hv-ctr-socket-');
    const { ctr, calls } = await loggingCtr(dir);
    const t = { ctr, socket: path.join(dir, 'containerd.sock'), namespace: 'k8s.io' };
    expect(await containerdProblem(t)).toBe(`containerd at ${t.socket} does not answer: no socket there yet`);
    await expect(listImages(t)).rejects.toThrow(`cannot list the images: containerd at ${t.socket} does not answer: no socket there yet`);
    expect(await calls()).toEqual([]);
  });

  it('names a file that is not a socket', async () => {
    const dir = await testTempDir('hv-ctr-socket-');
    const { ctr, calls } = await loggingCtr(dir);
    const t = { ctr, socket: path.join(dir, 'containerd.sock'), namespace: 'k8s.io' };
    await writeFile(t.socket, '');
    expect(await containerdProblem(t)).toBe(`containerd at ${t.socket} does not answer: it is not a socket`);
    expect(await calls()).toEqual([]);
    await rm(t.socket);
  });

  it('asks ctr once a socket is there, and reports what ctr said', async () => {
    const dir = await testTempDir('hv-ctr-socket-');
    const { ctr, calls } = await loggingCtr(dir);
    const t = { ctr, socket: path.join(dir, 'containerd.sock'), namespace: 'k8s.io' };
    const server = createServer();
    servers.push(server);
    await new Promise<void>((r) => server.listen(t.socket, r));
    expect(await containerdProblem(t)).toBe(`containerd at ${t.socket} does not answer: ctr: rpc error: code = Unavailable`);
    expect(await calls()).toEqual([`-a ${t.socket} --connect-timeout 2s version`]);
  });
});
