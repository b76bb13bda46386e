/**
 * downloadFile in a directory others can write to (`hvinstall fetch iso --output /tmp/x.iso`): a
 * symlink or hard link planted at the partial file is never written through, and a `.part.json`
 * that is not JSON is ignored rather than fatal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash } from 'node:crypto';
import { link, lstat, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { downloadFile } from '../../../installer/remote/iso.js';

const body = Buffer.from('the ISO bytes '.repeat(1000));
const sha = createHash('sha256').update(body).digest('hex');
let base = '';
let dir = '';
const server = http.createServer((req, res) => {
  const m = /^bytes=(\d+)-$/.exec(String(req.headers.range ?? ''));
  if (m) {
    const from = Number(m[1]);
    res.writeHead(206, { 'content-range': `bytes ${from}-${body.length - 1}/${body.length}`, 'content-length': body.length - from });
    return void res.end(body.subarray(from));
  }
  res.writeHead(200, { 'content-length': body.length }).end(body);
});

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'hv-dl-safety-'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await rm(dir, { recursive: true, force: true });
});

describe('downloadFile and files someone else put there', () => {
  it('a symlink at the partial file is removed, never written through', async () => {
    const victim = path.join(dir, 'victim');
    await writeFile(victim, 'precious');
    const dest = path.join(dir, 'a.iso');
    await symlink(victim, `${dest}.part`);
    await writeFile(`${dest}.part.json`, JSON.stringify({ url: `${base}/a.iso` }));
    const r = await downloadFile(`${base}/a.iso`, dest, { sha256: sha, attempts: 1 });
    expect(r.sha256).toBe(sha);
    expect(await readFile(victim, 'utf8')).toBe('precious');
    expect((await lstat(dest)).isFile()).toBe(true);
    expect(await readFile(dest)).toEqual(body);
  });

  it('a hard link at the partial file is not resumed into', async () => {
    const victim = path.join(dir, 'victim2');
    await writeFile(victim, 'the ISO bytes ');
    const dest = path.join(dir, 'b.iso');
    await link(victim, `${dest}.part`);
    await writeFile(`${dest}.part.json`, JSON.stringify({ url: `${base}/b.iso` }));
    await downloadFile(`${base}/b.iso`, dest, { sha256: sha, attempts: 1 });
    expect(await readFile(victim, 'utf8')).toBe('the ISO bytes ');
    expect(await readFile(dest)).toEqual(body);
  });

  it('a .part.json that is not JSON (or not ours) is ignored, the download starts over', async () => {
    const dest = path.join(dir, 'c.iso');
    await writeFile(`${dest}.part`, 'garbage that is not the ISO');
    await writeFile(`${dest}.part.json`, '{not json');
    const r = await downloadFile(`${base}/c.iso`, dest, { sha256: sha, attempts: 1 });
    expect(r.resumed).toBe(false);
    expect(await readFile(dest)).toEqual(body);
  });
});
