/**
 * --artifacts-origin: an origin (a plain node HTTP server here, standing in for the origin hvpxe or
 * nginx, with Range like theirs) serves the bytes; the cache must hold exactly the declared bytes,
 * fetch once however many ask, resume a cut download, refuse other bytes and stay in its bound.
 */
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ArtifactOrigin, evictionsFor } from '../../../pxe/artifact-origin.js';
import { Logger, MemorySink } from '../../../lib/logger.js';

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

let dir: string;
let origin: http.Server;
let url: string;
const files = new Map<string, Buffer>();
const requests: Array<{ path: string; range?: string }> = [];
let cutAfter: number | undefined;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-origin-'));
  requests.length = 0;
  cutAfter = undefined;
  origin = http.createServer((req, res) => {
    requests.push({ path: req.url!, range: req.headers.range });
    const body = files.get(decodeURIComponent(req.url!.slice(1)));
    if (!body) return void res.writeHead(404).end();
    const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const start = m ? Number(m[1]) : 0;
    const part = body.subarray(start);
    res.writeHead(m ? 206 : 200, { 'Content-Length': String(part.length), ...(m ? { 'Content-Range': `bytes ${start}-${body.length - 1}/${body.length}` } : {}) });
    if (cutAfter !== undefined) {
      res.write(part.subarray(0, cutAfter));
      setTimeout(() => res.destroy(), 20);
      return;
    }
    res.end(part);
  });
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', () => r()));
  url = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
});

afterEach(async () => {
  origin.closeAllConnections();
  await new Promise((r) => origin.close(r));
  await rm(dir, { recursive: true, force: true });
});

function cache(maxBytes = 1 << 30): { o: ArtifactOrigin; log: MemorySink } {
  const log = new MemorySink();
  return { o: new ArtifactOrigin({ url, dir: path.join(dir, 'cache'), maxBytes, log: new Logger(log) }), log };
}

async function bytesOf(o: ArtifactOrigin, rel: string, digest: string): Promise<Buffer | undefined> {
  const f = await o.open(rel, digest);
  if (!f) return undefined;
  try {
    return await readFile(f.fh);
  } finally {
    await f.fh.close();
  }
}

describe('ArtifactOrigin', () => {
  it('fetches once for twenty machines asking at once, and serves the declared bytes from <cache>/<sha256>', async () => {
    const iso = randomBytes(3 << 20);
    files.set('iso/harvester.iso', iso);
    const { o } = cache();
    const got = await Promise.all(Array.from({ length: 20 }, () => bytesOf(o, 'iso/harvester.iso', sha(iso))));
    expect(got.every((b) => b?.equals(iso))).toBe(true);
    expect(requests).toEqual([{ path: '/iso/harvester.iso', range: undefined }]);
    expect(await readdir(path.join(dir, 'cache'))).toEqual([sha(iso)]);
    expect((await bytesOf(o, 'iso/harvester.iso', sha(iso)))!.equals(iso)).toBe(true);
    expect(requests).toHaveLength(1);
  });

  it('refuses other bytes than profiles.yaml declares, keeps nothing of them, and tries again on the next request', async () => {
    files.set('k', randomBytes(1000));
    const { o, log } = cache();
    const declared = sha(Buffer.from('what profiles.yaml says'));
    expect(await o.open('k', declared)).toBeUndefined();
    expect(await readdir(path.join(dir, 'cache'))).toEqual([]);
    expect(log.lines.map((l) => (JSON.parse(l) as { msg: string }).msg)).toContain('artifact not fetched from the origin');
    expect(await o.open('k', declared)).toBeUndefined();
    expect(requests).toHaveLength(2);
  });

  it('resumes a cut download with a Range request and ends with the whole file', async () => {
    const body = randomBytes(1 << 20);
    files.set('rootfs.squashfs', body);
    const { o } = cache();
    cutAfter = 300_000;
    expect(await o.open('rootfs.squashfs', sha(body))).toBeUndefined();
    const part = await stat(path.join(dir, 'cache', `${sha(body)}.part`));
    expect(part.size).toBeGreaterThan(0);
    cutAfter = undefined;
    expect((await bytesOf(o, 'rootfs.squashfs', sha(body)))!.equals(body)).toBe(true);
    expect(requests.at(-1)).toEqual({ path: '/rootfs.squashfs', range: `bytes=${part.size}-` });
    expect(o.stats).toMatchObject({ downloads: 1, resumed: 1 });
  });

  it('stays in its bound: the least recently served file goes first, one that cannot fit is refused', async () => {
    const [a, b, c] = [randomBytes(400), randomBytes(400), randomBytes(400)];
    files.set('a', a).set('b', b).set('c', c);
    const { o } = cache(1000);
    await bytesOf(o, 'a', sha(a));
    await bytesOf(o, 'b', sha(b));
    // a served again later than b: b is the least recently served.
    const old = new Date(Date.now() - 60_000);
    await utimes(path.join(dir, 'cache', sha(b)), old, old);
    await bytesOf(o, 'c', sha(c));
    expect((await readdir(path.join(dir, 'cache'))).sort()).toEqual([sha(a), sha(c)].sort());
    const big = randomBytes(1001);
    files.set('big', big);
    expect(await o.open('big', sha(big))).toBeUndefined();
  });

  it('does not ask for what is not a sha256, and prefetches only what is missing', async () => {
    const k = randomBytes(10);
    files.set('k', k);
    const { o } = cache();
    expect(await o.open('k', 'not-a-sha')).toBeUndefined();
    expect(requests).toEqual([]);
    await writeFile(path.join(dir, 'x'), '');
    await o.prefetch([{ path: 'k', sha256: sha(k) }]);
    await o.prefetch([{ path: 'k', sha256: sha(k) }]);
    expect(requests).toHaveLength(1);
  });
});

describe('evictionsFor', () => {
  const f = (name: string, size: number, usedMs: number): { name: string; size: number; usedMs: number } => ({ name, size, usedMs });
  it('evicts nothing when the new file fits, and exactly enough otherwise, oldest use first', () => {
    expect(evictionsFor([f('a', 300, 1), f('b', 300, 2)], 400, 1000)).toEqual([]);
    expect(evictionsFor([f('a', 300, 1), f('b', 300, 2)], 401, 1000)).toEqual(['a']);
    expect(evictionsFor([f('b', 300, 2), f('a', 300, 1)], 700, 1000)).toEqual(['a']);
    expect(evictionsFor([f('b', 300, 2), f('a', 300, 1)], 701, 1000)).toEqual(['a', 'b']);
    expect(evictionsFor([f('b', 300, 1), f('a', 300, 1)], 401, 1000)).toEqual(['a']);
  });
  it('refuses a file larger than the bound', () => {
    expect(evictionsFor([], 1001, 1000)).toBeUndefined();
    expect(evictionsFor([f('a', 300, 1)], 1001, 1000)).toBeUndefined();
    expect(evictionsFor([], 1000, 1000)).toEqual([]);
  });
});
