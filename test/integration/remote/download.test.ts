import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile, mkdir, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { downloadFile, type DownloadProgress } from '../../../installer/remote/iso.js';
import { openIsoMedia } from '../../../installer/remote/media.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { tunnelTo } from '../../unit/remote/connect-tunnel.js';

const BODY = randomBytes(3 * 1024 * 1024 + 123);
const SHA = createHash('sha256').update(BODY).digest('hex');
let dir: string;
const servers: http.Server[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-remote-dl-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

type Handler = (i: number, req: http.IncomingMessage, res: http.ServerResponse) => void;

/** Serves BODY with Range support; `fault` can take over any request. */
async function server(fault?: Handler, port = 0): Promise<{ url: string; hits: Array<{ range?: string; ifRange?: string }> }> {
  const hits: Array<{ range?: string; ifRange?: string }> = [];
  const s = http.createServer((req, res) => {
    const i = hits.length;
    hits.push({ range: req.headers.range, ifRange: req.headers['if-range'] as string | undefined });
    if (fault) {
      let handled = true;
      const res2 = res as http.ServerResponse & { passThrough?: boolean };
      fault(i, req, Object.assign(res2, { pass: () => (handled = false) }));
      if (handled) return;
    }
    serveBody(req, res);
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(port, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}/harvester.iso`, hits };
}

function serveBody(req: http.IncomingMessage, res: http.ServerResponse): void {
  const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
  res.setHeader('ETag', '"v1"');
  if (m && (!req.headers['if-range'] || req.headers['if-range'] === '"v1"')) {
    const start = Number(m[1]);
    if (start >= BODY.length) {
      res.writeHead(416, { 'Content-Range': `bytes */${BODY.length}` });
      return void res.end();
    }
    res.writeHead(206, { 'Content-Range': `bytes ${start}-${BODY.length - 1}/${BODY.length}`, 'Content-Length': BODY.length - start });
    return void res.end(BODY.subarray(start));
  }
  res.writeHead(200, { 'Content-Length': BODY.length });
  res.end(BODY);
}

const pass = (res: http.ServerResponse): void => (res as unknown as { pass: () => void }).pass();

function log() {
  const sink = new MemorySink();
  return { sink, log: new Logger(sink) };
}

describe('downloadFile', () => {
  it('downloads, reports progress and verifies the sha256', async () => {
    const s = await server();
    const progress: DownloadProgress[] = [];
    const dest = path.join(dir, 'ok.iso');
    const r = await downloadFile(s.url, dest, { sha256: SHA, onProgress: (p) => progress.push(p), progressIntervalMs: 0 });
    expect(r).toMatchObject({ bytes: BODY.length, sha256: SHA, resumed: false, attempts: 1 });
    expect((await readFile(dest)).equals(BODY)).toBe(true);
    expect(progress.at(-1)).toMatchObject({ bytes: BODY.length, total: BODY.length });
    expect(await readdir(dir)).not.toContain('ok.iso.part');
  });

  it('retries while the server is down, then succeeds when it comes up', async () => {
    const probe = await server();
    const port = Number(new URL(probe.url).port);
    servers.pop()!.close();
    const { log: l, sink } = log();
    setTimeout(() => void server(undefined, port), 700);
    const dest = path.join(dir, 'late.iso');
    const r = await downloadFile(`http://127.0.0.1:${port}/harvester.iso`, dest, { sha256: SHA, attempts: 20, retryDelayMs: 200, maxRetryDelayMs: 200, log: l });
    expect(r.attempts).toBeGreaterThan(1);
    expect(sink.lines.join('')).toMatch(/connection to 127\.0\.0\.1:\d+ refused; is the server running/);
  });

  it('retries a 500 and then gets the 200', async () => {
    const s = await server((i, _req, res) => {
      if (i === 0) {
        res.statusCode = 500;
        return void res.end('boom');
      }
      pass(res);
    });
    const r = await downloadFile(s.url, path.join(dir, 'after500.iso'), { sha256: SHA, retryDelayMs: 50 });
    expect(r.attempts).toBe(2);
  });

  it('does not retry a 404 and says so', async () => {
    const s = await server((_i, _req, res) => {
      res.statusCode = 404;
      res.end();
    });
    await expect(downloadFile(s.url, path.join(dir, 'nf.iso'), { retryDelayMs: 10 })).rejects.toThrow(/answered HTTP 404; check the URL/);
    expect(s.hits).toHaveLength(1);
  });

  it('a stalled body times out and the next attempt resumes with Range and If-Range', async () => {
    const s = await server((i, _req, res) => {
      if (i === 0) {
        // Half the body, then silence: the stall timeout must fire.
        res.writeHead(200, { 'Content-Length': BODY.length, ETag: '"v1"' });
        res.write(BODY.subarray(0, 1024 * 1024));
        return;
      }
      pass(res);
    });
    const dest = path.join(dir, 'stall.iso');
    const r = await downloadFile(s.url, dest, { sha256: SHA, stallTimeoutMs: 500, retryDelayMs: 50 });
    expect(r).toMatchObject({ resumed: true, attempts: 2 });
    expect(s.hits[1]).toEqual({ range: 'bytes=1048576-', ifRange: '"v1"' });
    expect((await readFile(dest)).equals(BODY)).toBe(true);
  });

  it('restarts from zero when the file changed (If-Range mismatch gives a 200)', async () => {
    const dest = path.join(dir, 'changed.iso');
    await writeFile(`${dest}.part`, Buffer.from('stale bytes from an older file'));
    const s = await server();
    await writeFile(`${dest}.part.json`, JSON.stringify({ url: s.url, validator: '"old"' }));
    const r = await downloadFile(s.url, dest, { sha256: SHA });
    expect(r.resumed).toBe(false);
    expect((await readFile(dest)).equals(BODY)).toBe(true);
  });

  it('a wrong sha256 stops with both checksums and leaves no file behind', async () => {
    const s = await server();
    const dest = path.join(dir, 'bad.iso');
    const wrong = 'f'.repeat(64);
    await expect(downloadFile(s.url, dest, { sha256: wrong })).rejects.toThrow(`checksum mismatch for ${s.url}: expected sha256 ${wrong}, got ${SHA}`);
    const left = (await readdir(dir)).filter((f) => f.startsWith('bad.iso'));
    expect(left).toEqual([]);
  });

  it('gives up after the attempts with the last reason, keeping the partial file for a resume', async () => {
    const s = await server((_i, _req, res) => {
      res.writeHead(200, { 'Content-Length': BODY.length, ETag: '"v1"' });
      res.end(BODY.subarray(0, 1000)); // short body every time
    });
    const dest = path.join(dir, 'short.iso');
    await expect(downloadFile(s.url, dest, { attempts: 2, retryDelayMs: 10, stallTimeoutMs: 500 })).rejects.toThrow(/downloading .* failed after 2 attempts/);
    expect((await stat(`${dest}.part`)).size).toBeGreaterThan(0);
  });
});

describe('downloadFile through a proxy', () => {
  it('honours HTTP_PROXY (the host behind it need not resolve here)', async () => {
    // A proxy test double: it tunnels every CONNECT (what undici's proxy agent sends) to a local
    // server holding the ISO, and answers absolute-URI requests itself.
    const origin = await server();
    const originPort = Number(new URL(origin.url).port);
    const seen: string[] = [];
    const proxy = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      serveBody(req, res);
    });
    proxy.on('connect', (req: http.IncomingMessage, client: import('node:net').Socket, head: Buffer) => {
      seen.push(`CONNECT ${req.url}`);
      tunnelTo(client, head, originPort);
    });
    servers.push(proxy);
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const saved = { http_proxy: process.env.http_proxy, HTTP_PROXY: process.env.HTTP_PROXY, no_proxy: process.env.no_proxy, NO_PROXY: process.env.NO_PROXY };
    process.env.http_proxy = process.env.HTTP_PROXY = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    delete process.env.no_proxy;
    delete process.env.NO_PROXY;
    try {
      const r = await downloadFile('http://pxe.example.invalid/harvester.iso', path.join(dir, 'proxied.iso'), { sha256: SHA, attempts: 1, stallTimeoutMs: 10_000 });
      expect(r.sha256).toBe(SHA);
      expect(seen[0]).toMatch(/^(CONNECT pxe\.example\.invalid:80|GET http:\/\/pxe\.example\.invalid\/harvester\.iso)$/);
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});

describe('openIsoMedia', () => {
  it('extracts the rootfs and bundle from a real ISO (xorriso where the kernel cannot mount iso9660)', async () => {
    const src = path.join(dir, 'isosrc');
    await mkdir(path.join(src, 'bundle', 'harvester', 'images'), { recursive: true });
    await writeFile(path.join(src, 'rootfs.squashfs'), 'squash');
    await writeFile(path.join(src, 'bundle', 'harvester', 'images', 'a.tar.zst'), 'img');
    await writeFile(path.join(src, 'harvester-release.yaml'), 'harvester: v1.8.1\n');
    const iso = path.join(dir, 'test.iso');
    await execa('xorriso', ['-as', 'mkisofs', '-quiet', '-R', '-V', 'COS_LIVE', '-o', iso, src]);
    const work = path.join(dir, 'work');
    const m = await openIsoMedia(iso, work);
    try {
      expect(m.found).toEqual(['/rootfs.squashfs', '/bundle', '/harvester-release.yaml']);
      expect(await readFile(path.join(m.root, 'harvester-release.yaml'), 'utf8')).toBe('harvester: v1.8.1\n');
      expect(await readFile(path.join(m.root, 'rootfs.squashfs'), 'utf8')).toBe('squash');
      expect(await readFile(path.join(m.root, 'bundle/harvester/images/a.tar.zst'), 'utf8')).toBe('img');
    } finally {
      await m.close();
    }
    const notIso = path.join(dir, 'not.iso');
    await writeFile(notIso, randomBytes(4096));
    await expect(openIsoMedia(notIso, work, { preferMount: false })).rejects.toThrow(/extracting \/rootfs\.squashfs from .*not\.iso failed|contains none of/);
  });
});
