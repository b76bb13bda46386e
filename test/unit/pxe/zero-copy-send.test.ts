import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { once } from 'node:events';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, open, readdir, rm, truncate, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { ArtifactSendVia } from '../../../pxe/http.js';
import { artifactSendMode, loadZeroCopySender, sendFileBody, type SenderLoad, type ZeroCopySender } from '../../../pxe/zero-copy-send.js';
import { BODY_RANGES, BODY_SIZE } from './body-ranges.js';

// The real addon, built by `make build` (make test builds first): these tests are about it.
const built = loadZeroCopySender();
if (!('sender' in built)) throw new Error(`zero-copy-send tests need the addon: ${built.unavailable}`);
const addon = built.sender;

/** The real addon, counting the transfers it was given: a response streamed instead leaves it at 0. */
function counting(): { load: SenderLoad; sends: () => number } {
  let n = 0;
  const sender: ZeroCopySender = {
    send: (...a) => {
      n++;
      return addon.send(...a);
    },
    cancel: (h) => addon.cancel(h),
  };
  return { load: { sender }, sends: () => n };
}

const DATA = randomBytes(BODY_SIZE);
const BIG = Buffer.concat(Array.from({ length: 2000 }, (_, i) => (i % 2 ? DATA : DATA.subarray().reverse()))); // 20 MB, more than loopback buffers hold
let dir: string;

interface Served {
  sent: number;
  /** How sendFileBody said the body went. */
  via?: string;
}

/**
 * A server whose one route sends ?file=&start=&end= with sendFileBody; `shrink` truncates the file
 * once it is open, `destroyAfter` destroys the response that many ms into the body. Each response's
 * result is pushed to `results`.
 */
function serve(load: () => SenderLoad, opts: { stallMs?: number; maxThreads?: number; socketTimeout?: number; tls?: { key: Buffer; cert: Buffer } } = {}) {
  const results: Promise<Served>[] = [];
  const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const q = new URL(req.url!, 'http://x').searchParams;
    const [start, end] = [Number(q.get('start')), Number(q.get('end'))];
    results.push(
      (async () => {
        const fh = await open(path.join(dir, q.get('file')!), 'r');
        if (q.has('shrink')) await truncate(path.join(dir, q.get('file')!), Number(q.get('shrink')));
        if (opts.socketTimeout) res.socket?.setTimeout(opts.socketTimeout);
        if (q.has('destroyAfter')) setTimeout(() => res.destroy(), Number(q.get('destroyAfter')));
        res.writeHead(200, { 'Content-Length': String(end - start + 1) });
        const report: { via?: ArtifactSendVia } = {};
        const sent = await sendFileBody(load(), fh, res, start, end, { chunk: 4096, stallMs: opts.stallMs ?? 30_000, maxThreads: opts.maxThreads ?? 64 }, report);
        await fh.close();
        return { sent, via: report.via };
      })(),
    );
  };
  const server = opts.tls ? https.createServer(opts.tls, handler) : http.createServer(handler);
  return { server, results };
}

async function listen(server: http.Server): Promise<string> {
  await once(server.listen(0, '127.0.0.1'), 'listening');
  return `${server instanceof https.Server ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function close(server: http.Server): Promise<void> {
  const closed = once(server.close(), 'close');
  server.closeAllConnections();
  await closed;
}

/** Runs `body` against a listening serve() whose sender is the real addon, counted (or `load`), then closes it. */
async function withServer(
  opts: Parameters<typeof serve>[1] & { load?: () => SenderLoad },
  body: (s: { base: string; results: Promise<Served>[]; sends: () => number }) => Promise<void>,
): Promise<void> {
  const c = counting();
  const { server, results } = serve(opts.load ?? (() => c.load), opts);
  const base = await listen(server);
  try {
    await body({ base, results, sends: c.sends });
  } finally {
    await close(server);
  }
}

/** The result of the index-th response once its request has arrived. */
async function resultOf(results: Promise<Served>[], index: number): Promise<Served> {
  while (results.length <= index) await new Promise((r) => setTimeout(r, 10));
  return results[index]!;
}

/**
 * GET; `pauseMs` stops reading after the first bytes for that long (pushing 'client resumed' to
 * `order` when it reads again); `abortAfter` goes away after that many bytes.
 */
function get(url: string, o: { abortAfter?: number; pauseMs?: number; order?: string[]; agent?: http.Agent; ca?: Buffer } = {}): Promise<{ body: Buffer; complete: boolean }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let paused = false;
    const mod = url.startsWith('https') ? https : http;
    const req = mod.get(url, { agent: o.agent ?? false, ca: o.ca }, (res) => {
      res.on('data', (c: Buffer) => {
        chunks.push(c);
        size += c.length;
        if (o.abortAfter !== undefined && size >= o.abortAfter) req.destroy();
        if (o.pauseMs && !paused) {
          paused = true;
          res.pause();
          setTimeout(() => {
            o.order?.push('client resumed');
            res.resume();
          }, o.pauseMs);
        }
      });
      res.on('end', () => resolve({ body: Buffer.concat(chunks), complete: res.complete }));
      res.on('close', () => resolve({ body: Buffer.concat(chunks), complete: res.complete }));
    });
    req.on('error', () => resolve({ body: Buffer.concat(chunks), complete: false }));
  });
}

/** The first `n` HTTP/1.1 responses (framed by Content-Length) in `all`; undefined until all have arrived. */
function parseResponses(all: Buffer, n: number): { head: string; body: Buffer }[] | undefined {
  const out: { head: string; body: Buffer }[] = [];
  let at = 0;
  while (out.length < n) {
    const headEnd = all.indexOf('\r\n\r\n', at);
    if (headEnd < 0) return undefined;
    const head = all.subarray(at, headEnd + 4).toString('latin1');
    const length = Number(/\r\ncontent-length: (\d+)\r\n/i.exec(head)?.[1]);
    if (all.length < headEnd + 4 + length) return undefined;
    out.push({ head, body: all.subarray(headEnd + 4, headEnd + 4 + length) });
    at = headEnd + 4 + length;
  }
  return out;
}

const openFds = async (): Promise<number> => (await readdir('/proc/self/fd')).length;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-zero-copy-'));
  await writeFile(path.join(dir, 'big'), BIG);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('sendFileBody with the sendfile addon', () => {
  it('sends exactly bytes [start, end] through sendfile, on one kept-alive connection', async () => {
    await writeFile(path.join(dir, 'small'), DATA);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    await withServer({}, async ({ base, results, sends }) => {
      for (const [start, end] of BODY_RANGES) {
        const r = await get(`${base}/?file=small&start=${start}&end=${end}`, { agent });
        expect(r.complete).toBe(true);
        expect(r.body.equals(DATA.subarray(start, end + 1))).toBe(true);
        expect(await results.at(-1)).toEqual({ sent: end - start + 1, via: 'sendfile' });
      }
      expect(sends()).toBe(4);
    }).finally(() => agent.destroy());
  });

  it('a reader that stops for a while (the socket buffer full) gets every byte once it reads again', async () => {
    await withServer({}, async ({ base, results, sends }) => {
      const r = await get(`${base}/?file=big&start=0&end=${BIG.length - 1}`, { pauseMs: 600 });
      expect(r.complete).toBe(true);
      expect(r.body.equals(BIG)).toBe(true);
      expect((await results.at(-1))!.sent).toBe(BIG.length);
      expect(sends()).toBe(1);
    });
  });

  it("the socket's idle timeout does not cut a download the thread is sending (the stall deadline stands in)", async () => {
    await withServer({ socketTimeout: 200 }, async ({ base, results }) => {
      const r = await get(`${base}/?file=big&start=0&end=${BIG.length - 1}`, { pauseMs: 1_000 });
      expect(r.complete).toBe(true);
      expect(r.body.equals(BIG)).toBe(true);
      expect((await results.at(-1))!.sent).toBe(BIG.length);
    });
  });

  it('reads at offsets past 4 GiB (64-bit offsets through to sendfile)', async () => {
    const sparse = path.join(dir, 'sparse');
    const at = 5 * 1024 ** 3 + 12_345;
    const fh = await open(sparse, 'w');
    await fh.write(DATA.subarray(0, 100), 0, 100, at);
    await fh.close();
    await withServer({}, async ({ base }) => {
      const r = await get(`${base}/?file=sparse&start=${at - 10}&end=${at + 99}`);
      expect(r.complete).toBe(true);
      expect(r.body.equals(Buffer.concat([Buffer.alloc(10), DATA.subarray(0, 100)]))).toBe(true);
    }).finally(() => rm(sparse));
  });

  it('a file that shrank under it: the client gets a short body and a broken connection, not a hang', async () => {
    await writeFile(path.join(dir, 'shrinks'), DATA);
    await withServer({}, async ({ base, results, sends }) => {
      const r = await get(`${base}/?file=shrinks&start=0&end=${DATA.length - 1}&shrink=100`);
      expect(r.complete).toBe(false);
      expect(r.body.equals(DATA.subarray(0, 100))).toBe(true);
      expect((await results.at(-1))!.sent).toBe(100);
      expect(sends()).toBe(1);
    });
  });

  it('a client that goes away mid-download ends the transfer, and no descriptor is left open', async () => {
    await withServer({}, async ({ base, results, sends }) => {
      const before = await openFds();
      for (let i = 0; i < 5; i++) {
        const r = await get(`${base}/?file=big&start=0&end=${BIG.length - 1}`, { abortAfter: 1000 });
        expect(r.complete).toBe(false);
        const { sent } = (await results.at(-1))!;
        expect(sent).toBeGreaterThanOrEqual(1000);
        expect(sent).toBeLessThan(BIG.length);
      }
      expect(sends()).toBe(5);
      // The thread's duplicates are closed before its callback: nothing is left once all resolved.
      expect(await openFds()).toBeLessThanOrEqual(before);
    });
  });

  it('a response the server destroys while the client does not read ends at once (cancel), not at the stall deadline', async () => {
    await withServer({ stallMs: 600_000 }, async ({ base, results }) => {
      // The client reads the first bytes, then nothing for 2 s; the server destroys the response at 300 ms.
      const order: string[] = [];
      const client = get(`${base}/?file=big&start=0&end=${BIG.length - 1}&destroyAfter=300`, { pauseMs: 2_000, order });
      const { sent } = await resultOf(results, 0);
      order.push('server done');
      expect(order).toEqual(['server done']);
      expect(sent).toBeLessThan(BIG.length);
      // Our duplicate of the socket is closed too: the client, reading again, finds the connection ended.
      expect((await client).complete).toBe(false);
      expect(order).toEqual(['server done', 'client resumed']);
    });
  });

  it('a client that stops reading is cut off after stallMs without a byte accepted', async () => {
    await withServer({ stallMs: 400 }, async ({ base, results }) => {
      const order: string[] = [];
      const client = get(`${base}/?file=big&start=0&end=${BIG.length - 1}`, { pauseMs: 2_000, order });
      const { sent } = await resultOf(results, 0);
      order.push('server done');
      expect(sent).toBeGreaterThan(0);
      expect(sent).toBeLessThan(BIG.length);
      const r = await client;
      expect(r.complete).toBe(false);
      expect(r.body.equals(BIG.subarray(0, r.body.length))).toBe(true);
      expect(order).toEqual(['server done', 'client resumed']);
    });
  });

  it('with maxThreads transfers sending, the next download is streamed; once one ends, sendfile again', async () => {
    await withServer({ maxThreads: 1 }, async ({ base, results, sends }) => {
      const url = `${base}/?file=big&start=0&end=${BIG.length - 1}`;
      // The first holds the one thread (its client stops reading for a while); the second comes meanwhile.
      const first = get(url, { pauseMs: 1_000 });
      while (sends() < 1) await new Promise((r) => setTimeout(r, 10));
      const second = await get(url);
      expect(second.complete).toBe(true);
      expect(second.body.equals(BIG)).toBe(true);
      expect(sends()).toBe(1); // streamed
      const one = await first;
      expect(one.complete).toBe(true);
      expect(one.body.equals(BIG)).toBe(true);
      // Both transfers over on the server's side (the first's thread slot given back with it).
      await Promise.all([resultOf(results, 0), resultOf(results, 1)]);
      const third = await get(url);
      expect(third.body.equals(BIG)).toBe(true);
      expect(sends()).toBe(2); // the slot was given back
      expect(await Promise.all(results)).toEqual([
        { sent: BIG.length, via: 'sendfile' },
        { sent: BIG.length, via: 'streamed' },
        { sent: BIG.length, via: 'sendfile' },
      ]);
    });
  });

  it('pipelined requests: the response queued behind another is streamed, and both bodies arrive whole and in order', async () => {
    await writeFile(path.join(dir, 'small'), DATA);
    await withServer({}, async ({ base, sends }) => {
      const port = new URL(base).port;
      const sock = net.connect(Number(port), '127.0.0.1');
      await once(sock, 'connect');
      const chunks: Buffer[] = [];
      sock.on('data', (d: Buffer) => chunks.push(d));
      const reqs = [`/?file=big&start=0&end=${BIG.length - 1}`, `/?file=small&start=0&end=${DATA.length - 1}`];
      // Both requests in one write (not ended: a half-closed client has its pending responses dropped).
      sock.write(reqs.map((p) => `GET ${p} HTTP/1.1\r\nHost: x\r\n\r\n`).join(''));
      let responses: { head: string; body: Buffer }[] | undefined;
      while (!(responses = parseResponses(Buffer.concat(chunks), 2))) await once(sock, 'data');
      await new Promise((r) => setTimeout(r, 100)); // nothing may follow the two
      sock.destroy();
      expect(Buffer.concat(chunks).length).toBe(responses.reduce((a, r) => a + r.head.length + r.body.length, 0));
      expect(responses[0]!.head).toMatch(/^HTTP\/1.1 200 OK\r\n/);
      expect(responses[0]!.body.equals(BIG)).toBe(true);
      expect(responses[1]!.head).toMatch(/^HTTP\/1.1 200 OK\r\n/);
      expect(responses[1]!.body.equals(DATA)).toBe(true);
      expect(sends()).toBe(1);
    });
  });
});

describe('sendFileBody without sendfile', () => {
  it('an addon that is not built: loading says so and what to do, and bodies are streamed whole', async () => {
    const load = loadZeroCopySender(['./no-such-addon.node'], import.meta.url);
    expect(load).toEqual({ unavailable: expect.stringMatching(/no-such-addon\.node: not built.*run 'make build'/) });
    expect(artifactSendMode(false, load)).toMatch(/^streamed \(the sendfile addon could not be loaded/);
    expect(artifactSendMode(false, built)).toBe('sendfile');
    await withServer({ load: () => load }, async ({ base, results }) => {
      const r = await get(`${base}/?file=big&start=7&end=${BIG.length - 2}`);
      expect(r.complete).toBe(true);
      expect(r.body.equals(BIG.subarray(7, BIG.length - 1))).toBe(true);
      expect(await results.at(-1)).toEqual({ sent: BIG.length - 8, via: 'streamed' });
    });
  });

  it('a file system sendfile refuses (EINVAL before any byte): that response is streamed instead', async () => {
    await writeFile(path.join(dir, 'small'), DATA);
    let refused = 0;
    const sender: ZeroCopySender = {
      send: (_s, _f, _o, _l, _t, done) => {
        refused++;
        setImmediate(() => done('EINVAL', 0));
        return {};
      },
      cancel: () => undefined,
    };
    await withServer({ load: () => ({ sender }) }, async ({ base, results }) => {
      const r = await get(`${base}/?file=small&start=10&end=5009`);
      expect(refused).toBe(1);
      expect(r.complete).toBe(true);
      expect(r.body.equals(DATA.subarray(10, 5010))).toBe(true);
      expect(await results.at(-1)).toEqual({ sent: 5000, via: 'streamed' });
    });
  });

  it('over TLS the bytes are encrypted in user space: streamed, never handed to sendfile', async () => {
    const key = path.join(dir, 'key.pem');
    const cert = path.join(dir, 'cert.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    const tls = { key: readFileSync(key), cert: readFileSync(cert) };
    expect(artifactSendMode(true, built)).toMatch(/^streamed \(TLS/);
    await withServer({ tls }, async ({ base, results, sends }) => {
      const r = await get(`${base}/?file=big&start=0&end=99999`, { ca: tls.cert });
      expect(r.complete).toBe(true);
      expect(r.body.equals(BIG.subarray(0, 100_000))).toBe(true);
      expect(await results.at(-1)).toEqual({ sent: 100_000, via: 'streamed' });
      expect(sends()).toBe(0);
    });
  });
});

describe('the addon refuses what it cannot send', () => {
  it('a descriptor that is not a socket, a negative range, a missing callback', async () => {
    const fh = await open(path.join(dir, 'big'), 'r');
    try {
      expect(() => addon.send(fh.fd, fh.fd, 0, 10, 1000, () => undefined)).toThrow(/not a socket/);
      expect(() => addon.send(fh.fd, fh.fd, -1, 10, 1000, () => undefined)).toThrow(/must not be negative/);
      expect(() => (addon.send as (...a: unknown[]) => unknown)(fh.fd, fh.fd, 0, 10, 1000)).toThrow(/six arguments/);
      expect(() => addon.cancel(42)).toThrow(/handle/);
    } finally {
      await fh.close();
    }
  });
});
