/**
 * While containerd starts, the preload finds out it cannot answer from its socket's absence, and
 * with a socket there from containerd's API, without running ctr (a Go process start: seconds of
 * CPU on a booting node); ctr asks only where the API answered in a way the client cannot use.
 */
import { createServer, type Server } from 'node:net';
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { containerdProblem, listImages, warnEachApiFallback } from '../../../agent/preload/containerd.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { testTempDir } from '../temp-dir.js';
import { failWith, fakeContainerdApi, replyWith } from './fake-containerd-api.js';

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

  it('does not start ctr when the socket is there but nothing speaks on it (ctr would not reach it either)', async () => {
    const dir = await testTempDir('hv-ctr-socket-');
    const { ctr, calls } = await loggingCtr(dir);
    const t = { ctr, socket: path.join(dir, 'containerd.sock'), namespace: 'k8s.io' };
    const server = createServer((c) => c.destroy());
    servers.push(server);
    await new Promise<void>((r) => server.listen(t.socket, r));
    expect(await containerdProblem(t)).toBe(
      `containerd at ${t.socket} does not answer: containerd's API at ${t.socket} (/containerd.services.version.v1.Version/Version): the connection closed before a reply`,
    );
    await expect(listImages(t)).rejects.toThrow(`containerd's API at ${t.socket} (/containerd.services.images.v1.Images/List): the connection closed before a reply`);
    expect(await calls()).toEqual([]);
  });
});

/** The stand-in API on the socket: `answer` gives a call's reply message, or none for UNIMPLEMENTED. */
async function apiServer(socket: string, answer: (path: string) => Buffer | undefined): Promise<void> {
  await fakeContainerdApi(socket, (stream, p) => {
    const message = answer(p);
    (message ? replyWith(message) : failWith(12, 'unknown service'))(stream, p);
  });
}

/** Images/List's reply naming `names` (ListImagesResponse.images = 1, Image.name = 1), written by hand. */
function listReply(names: string[]): Buffer {
  return Buffer.concat(
    names.map((n) => {
      const name = Buffer.concat([Buffer.from([0x0a, n.length]), Buffer.from(n)]);
      return Buffer.concat([Buffer.from([0x0a, name.length]), name]);
    }),
  );
}

/** A ctr that records its arguments, answers `images ls -q` with `lines` and `version` with a version. */
async function answeringCtr(dir: string, lines: string[]): Promise<{ ctr: string; calls: () => Promise<string[]> }> {
  const ctr = path.join(dir, 'ctr');
  const log = path.join(dir, 'ctr-calls');
  await writeFile(
    ctr,
    `#!/bin/sh\necho "$*" >> '${log}'\ncase "$*" in *'images ls -q') printf '%s\\n' ${lines.map((l) => `'${l}'`).join(' ')} ;; *version) echo 'Server: v1.6.20' ;; esac\n`,
    { mode: 0o755 },
  );
  return { ctr, calls: async () => (await readFile(log, 'utf8').catch(() => '')).split('\n').filter(Boolean) };
}

describe('containerd through its API, with ctr behind it', () => {
  const digest = 'sha256:' + 'e'.repeat(64);

  it('lists over the API, leaves digest-only names out as `ctr images ls -q` readers did, and starts no ctr', async () => {
    const dir = await testTempDir('hv-ctr-socket-');
    const { ctr, calls } = await loggingCtr(dir);
    const t = { ctr, socket: path.join(dir, 'containerd.sock'), namespace: 'k8s.io' };
    await apiServer(t.socket, (p) => (p.endsWith('.Images/List') ? listReply(['docker.io/rancher/harvester:v1.8.0', digest]) : Buffer.from([0x0a, 4, ...Buffer.from('v1.7')])));
    expect([...(await listImages(t))]).toEqual(['docker.io/rancher/harvester:v1.8.0']);
    expect(await containerdProblem(t)).toBeNull();
    expect(await calls()).toEqual([]);
  });

  it('asks ctr when the API answered but not as containerd does, takes ctr\'s answer and says why once per reason', async () => {
    const dir = await testTempDir('hv-ctr-socket-');
    const { ctr, calls } = await answeringCtr(dir, ['docker.io/rancher/rke2-runtime:v1.31.4', digest]);
    const sink = new MemorySink();
    const t = { ctr, socket: path.join(dir, 'containerd.sock'), namespace: 'k8s.io', onApiFallback: warnEachApiFallback(new Logger(sink)) };
    await apiServer(t.socket, () => undefined);
    expect([...(await listImages(t))]).toEqual(['docker.io/rancher/rke2-runtime:v1.31.4']);
    expect([...(await listImages(t))]).toEqual(['docker.io/rancher/rke2-runtime:v1.31.4']);
    expect(await containerdProblem(t)).toBeNull();
    expect(await calls()).toEqual([
      `-a ${t.socket} --connect-timeout 5s -n k8s.io images ls -q`,
      `-a ${t.socket} --connect-timeout 5s -n k8s.io images ls -q`,
      `-a ${t.socket} --connect-timeout 2s version`,
    ]);
    // Two reasons (the list's and the version's), each logged once though the list was asked twice.
    const warned = sink.lines.map((l) => JSON.parse(l) as { level: string; msg: string; why: string });
    expect(warned.map((w) => [w.level, w.msg])).toEqual([
      ['warn', "containerd's API could not be used for this: ctr was asked instead"],
      ['warn', "containerd's API could not be used for this: ctr was asked instead"],
    ]);
    expect(warned.map((w) => w.why)).toEqual([
      `containerd's API at ${t.socket} (/containerd.services.images.v1.Images/List): gRPC status 12: unknown service`,
      `containerd's API at ${t.socket} (/containerd.services.version.v1.Version/Version): gRPC status 12: unknown service`,
    ]);
  });

  it('says nothing of a fallback when the API answers, or when nothing answers at all', async () => {
    const dir = await testTempDir('hv-ctr-socket-');
    const { ctr } = await loggingCtr(dir);
    const told: string[] = [];
    const t = { ctr, socket: path.join(dir, 'containerd.sock'), namespace: 'k8s.io', onApiFallback: (why: string) => told.push(why) };
    await apiServer(t.socket, (p) => (p.endsWith('.Images/List') ? listReply([]) : Buffer.from([0x0a, 4, ...Buffer.from('v1.7')])));
    expect([...(await listImages(t))]).toEqual([]);
    expect(await containerdProblem(t)).toBeNull();
    const closing = { ...t, socket: path.join(dir, 'closing.sock') };
    const server = createServer((c) => c.destroy());
    servers.push(server);
    await new Promise<void>((r) => server.listen(closing.socket, r));
    expect(await containerdProblem(closing)).toMatch(/the connection closed before a reply$/);
    await expect(listImages(closing)).rejects.toThrow(/the connection closed before a reply$/);
    expect(told).toEqual([]);
  });

  it('when ctr fails too, says what ctr said and why it was asked', async () => {
    const dir = await testTempDir('hv-ctr-socket-');
    const { ctr, calls } = await loggingCtr(dir);
    const t = { ctr, socket: path.join(dir, 'containerd.sock'), namespace: 'k8s.io' };
    await apiServer(t.socket, () => undefined);
    expect(await containerdProblem(t)).toBe(
      `containerd at ${t.socket} does not answer: ctr: rpc error: code = Unavailable (ctr asked because its version over the API failed: containerd's API at ${t.socket} (/containerd.services.version.v1.Version/Version): gRPC status 12: unknown service)`,
    );
    await expect(listImages(t)).rejects.toThrow(/^exited with status 1: .*ctr -a .* images ls -q\n\s+ctr: rpc error: code = Unavailable \(ctr asked because the image list over the API failed: .*gRPC status 12: unknown service\)$/);
    expect(await calls()).toHaveLength(2);
  });
});
