import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import http from 'node:http';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { mkdtemp, open, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { streamFileRange } from '../../../pxe/file-stream.js';
import { BODY_RANGES, BODY_SIZE } from './body-ranges.js';

// fs.read counted while in flight: streamFileRange must not resolve (its caller then closes the
// descriptor, whose number the next open may reuse) while a read on it is still running.
const reads = vi.hoisted(() => ({ inFlight: 0 }));
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  const read = (...args: unknown[]): void => {
    const cb = args.pop() as (...r: unknown[]) => void;
    reads.inFlight++;
    (fs.read as (...a: unknown[]) => void)(...args, (...r: unknown[]) => {
      reads.inFlight--;
      cb(...r);
    });
  };
  return { ...fs, default: { ...fs, read }, read };
});

// A server whose one route sends the range in the query with streamFileRange, in chunks of 7 bytes
// (so a range spans many chunks and ends inside one); `shrink` truncates the file once it is open.
const DATA = randomBytes(BODY_SIZE);
let dir: string;
let file: string;
let server: http.Server;
let base: string;
const results: Promise<{ sent: number; readsInFlight: number }>[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-file-stream-'));
  file = path.join(dir, 'f');
  server = http.createServer((req, res) => {
    const q = new URL(req.url!, 'http://x').searchParams;
    const [start, end] = [Number(q.get('start')), Number(q.get('end'))];
    results.push(
      (async () => {
        const fh = await open(file, 'r');
        if (q.has('shrink')) await truncate(file, Number(q.get('shrink')));
        res.writeHead(200, { 'Content-Length': String(end - start + 1) });
        const sent = await streamFileRange(fh, res, start, end, 7);
        const readsInFlight = reads.inFlight;
        await fh.close();
        return { sent, readsInFlight };
      })(),
    );
  });
  await once(server.listen(0, '127.0.0.1'), 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  const closed = once(server.close(), 'close');
  server.closeAllConnections();
  await Promise.all([closed, rm(dir, { recursive: true, force: true })]);
});

/** GET; resolves to the body received and whether the response completed. */
function get(query: string, abortAfter?: number): Promise<{ body: Buffer; complete: boolean }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const req = http.get(`${base}/?${query}`, { agent: false }, (res) => {
      res.on('data', (c: Buffer) => {
        chunks.push(c);
        size += c.length;
        if (abortAfter !== undefined && size >= abortAfter) req.destroy();
      });
      res.on('end', () => resolve({ body: Buffer.concat(chunks), complete: res.complete }));
      res.on('close', () => resolve({ body: Buffer.concat(chunks), complete: res.complete }));
    });
    req.on('error', () => resolve({ body: Buffer.concat(chunks), complete: false }));
  });
}

describe('streamFileRange', () => {
  it('sends exactly bytes [start, end], across many chunks and ending inside one', async () => {
    await writeFile(file, DATA);
    for (const [start, end] of BODY_RANGES) {
      const r = await get(`start=${start}&end=${end}`);
      expect(r.complete).toBe(true);
      expect(r.body.equals(DATA.subarray(start, end + 1))).toBe(true);
      expect(await results.at(-1)).toEqual({ sent: end - start + 1, readsInFlight: 0 });
    }
  });

  it('a file that shrank under it: the client gets a short body and a broken connection, not a hang', async () => {
    await writeFile(file, DATA);
    const r = await get(`start=0&end=${DATA.length - 1}&shrink=100`);
    expect(r.complete).toBe(false);
    expect(r.body.equals(DATA.subarray(0, 100))).toBe(true);
    expect(await results.at(-1)).toEqual({ sent: 100, readsInFlight: 0 });
  });

  it('a client that goes away mid-download ends it, with no read left in flight', async () => {
    // 20 MB: more than loopback's socket buffers can hold, so the server cannot have sent it all
    await writeFile(file, Buffer.concat(Array.from({ length: 2000 }, () => DATA)));
    const r = await get(`start=0&end=${2000 * DATA.length - 1}`, 1000);
    expect(r.complete).toBe(false);
    const { sent, readsInFlight } = await results.at(-1)!;
    expect(readsInFlight).toBe(0);
    expect(sent).toBeGreaterThanOrEqual(1000);
    expect(sent).toBeLessThan(2000 * DATA.length);
  });

  it('a range past the end of the file (it shrank to nothing): nothing sent, connection broken', async () => {
    await writeFile(file, DATA);
    const r = await get('start=50&end=60&shrink=0');
    expect(r.complete).toBe(false);
    expect(r.body.length).toBe(0);
    expect(await results.at(-1)).toEqual({ sent: 0, readsInFlight: 0 });
  });
});
