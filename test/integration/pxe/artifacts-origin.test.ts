/**
 * --artifacts-origin through a real `hvpxe serve` (a rack server) in front of an origin (a node
 * HTTP server here, counting what it is asked): the artifacts missing under the rack's --root are
 * fetched once however many machines ask at once, served with Range and ETag like local files,
 * refused (503, nothing cached) when the origin sends other bytes than profiles.yaml declares, and
 * still served from the cache when the origin is gone.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { makeTree, profilesYaml, startHvpxe, stopHvpxe, type Running, type Tree } from './harness.js';

let dir: string;
let tree: Tree;
let origin: http.Server;
let originUrl: string;
let rack: Running | undefined;
/** What the origin was asked: path and Range header. */
const asked: Array<{ path: string; range?: string }> = [];
/** Paths for which the origin sends other bytes than the file's. */
const corrupt = new Set<string>();

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-pxe-origin-'));
  tree = await makeTree(dir);
  await writeFile(path.join(dir, 'profiles.yaml'), profilesYaml(tree));
  origin = http.createServer((req, res) => {
    const rel = decodeURIComponent((req.url ?? '').replace(/^\/artifacts\//, ''));
    asked.push({ path: rel, ...(req.headers.range ? { range: req.headers.range } : {}) });
    const file = tree.files[rel];
    if (!file) return void res.writeHead(404).end();
    const body = corrupt.has(rel) ? Buffer.alloc(file.length, 7) : file;
    const from = Number(/^bytes=(\d+)-$/.exec(req.headers.range ?? '')?.[1] ?? 0);
    res.writeHead(from ? 206 : 200, { 'content-length': body.length - from, ...(from ? { 'content-range': `bytes ${from}-${body.length - 1}/${body.length}` } : {}) });
    res.end(body.subarray(from));
  });
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  originUrl = `http://127.0.0.1:${(origin.address() as net.AddressInfo).port}/artifacts`;
  // The rack has the kernel and the rootfs; the initrd and the ISO come from the origin.
  const rackRoot = path.join(dir, 'rack-root');
  await mkdir(path.join(rackRoot, 'k'), { recursive: true });
  await copyFile(path.join(tree.root, 'k/vmlinuz'), path.join(rackRoot, 'k/vmlinuz'));
  await copyFile(path.join(tree.root, 'rootfs.squashfs'), path.join(rackRoot, 'rootfs.squashfs'));
  corrupt.add('k/initrd.img');
  rack = await startHvpxe(['serve', '--root', rackRoot, '--profiles', path.join(dir, 'profiles.yaml'), '--listen', '127.0.0.1:0', '--state-dir', path.join(dir, 'state'), '--artifacts-origin', originUrl, '--artifacts-cache', path.join(dir, 'cache')]);
}, 120_000);

afterAll(async () => {
  await stopHvpxe(rack);
  origin.closeAllConnections();
  await new Promise((r) => origin.close(r));
  await rm(dir, { recursive: true, force: true });
});

describe('hvpxe serve --artifacts-origin', () => {
  it('fetches the ISO once for twenty machines asking at once, and serves the declared bytes with Range and ETag', async () => {
    const iso = tree.files['harvester.iso']!;
    const all = await Promise.all(Array.from({ length: 20 }, () => fetch(`${rack!.url}/artifacts/harvester.iso`).then(async (r) => ({ status: r.status, body: Buffer.from(await r.arrayBuffer()), etag: r.headers.get('etag') }))));
    expect(all.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(all.every((r) => r.body.equals(iso))).toBe(true);
    expect(asked.filter((a) => a.path === 'harvester.iso')).toEqual([{ path: 'harvester.iso' }]);
    expect(await readdir(path.join(dir, 'cache'))).toContain(sha(iso));

    const ranged = await fetch(`${rack!.url}/artifacts/harvester.iso`, { headers: { Range: 'bytes=1000-1999' } });
    expect(ranged.status).toBe(206);
    expect(ranged.headers.get('content-range')).toBe(`bytes 1000-1999/${iso.length}`);
    expect(Buffer.from(await ranged.arrayBuffer()).equals(iso.subarray(1000, 2000))).toBe(true);
    const etag = all[0]!.etag!;
    expect(etag).toMatch(/^"/);
    // The same ETag however often it is served (the cache's LRU touches the file): a client resumes with If-Range.
    expect((await fetch(`${rack!.url}/artifacts/harvester.iso`, { headers: { 'If-None-Match': etag } })).status).toBe(304);
    const resumed = await fetch(`${rack!.url}/artifacts/harvester.iso`, { headers: { Range: 'bytes=2000000-', 'If-Range': etag } });
    expect(resumed.status).toBe(206);
    expect(Buffer.from(await resumed.arrayBuffer()).equals(iso.subarray(2000000))).toBe(true);
    expect(asked.filter((a) => a.path === 'harvester.iso')).toHaveLength(1);
  });

  it('never asks the origin for what is under --root', async () => {
    expect((await fetch(`${rack!.url}/artifacts/k/vmlinuz`)).status).toBe(200);
    expect(asked.map((a) => a.path)).not.toContain('k/vmlinuz');
    expect(asked.map((a) => a.path)).not.toContain('rootfs.squashfs');
  });

  it('refuses other bytes than profiles.yaml declares (503, nothing cached), and serves the right ones once the origin has them', async () => {
    const initrd = tree.files['k/initrd.img']!;
    const bad = await fetch(`${rack!.url}/artifacts/k/initrd.img`);
    expect(bad.status).toBe(503);
    expect(bad.headers.get('retry-after')).toBe('30');
    expect(await bad.text()).toContain('artifacts origin');
    expect((await readdir(path.join(dir, 'cache'))).filter((f) => f.startsWith(sha(initrd)))).toEqual([]);
    corrupt.delete('k/initrd.img');
    const good = await fetch(`${rack!.url}/artifacts/k/initrd.img`);
    expect(good.status).toBe(200);
    expect(Buffer.from(await good.arrayBuffer()).equals(initrd)).toBe(true);
  });

  it('keeps serving what it cached when the origin is gone', async () => {
    origin.closeAllConnections();
    await new Promise((r) => origin.close(r));
    const r = await fetch(`${rack!.url}/artifacts/harvester.iso`, { headers: { Range: 'bytes=0-9' } });
    expect(r.status).toBe(206);
    expect(Buffer.from(await r.arrayBuffer()).equals(tree.files['harvester.iso']!.subarray(0, 10))).toBe(true);
  });
});
