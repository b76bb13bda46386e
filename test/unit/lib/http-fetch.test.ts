/**
 * lib/http-fetch against real servers on 127.0.0.1 (ephemeral ports): retries, timeouts, status
 * classes, size cap, checksum, custom CA, proxy environment. DNS failure uses a test double for the
 * resolver (named as such) so no query leaves the machine.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { Agent } from 'undici';
import { fetchBytes, FetchError } from '../../../lib/http-fetch.js';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;
let handler: Handler = (_req, res) => res.end('ok');
let hits = 0;
const server = http.createServer((req, res) => {
  hits++;
  handler(req, res);
});
let base = '';
const sockets = new Set<net.Socket>();
server.on('connection', (s) => {
  sockets.add(s);
  s.on('close', () => sockets.delete(s));
});
const tmp = mkdtempSync('/tmp/hv-http-fetch-');

beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(() => {
  hits = 0;
  handler = (_req, res) => res.end('ok');
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(tmp, { recursive: true, force: true });
});

async function failure(p: Promise<unknown>): Promise<FetchError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(FetchError);
    return err as FetchError;
  }
  throw new Error('expected a FetchError');
}

const fast = { retryDelayMs: 5, maxRetryDelayMs: 20 };

describe('fetchBytes: credentials in the URL', () => {
  it('user:pass@ is sent as Basic credentials, and no message carries the password', async () => {
    const seen: Array<string | undefined> = [];
    handler = (req, res) => {
      seen.push(req.headers.authorization);
      if (req.url === '/ok') return void res.end('config');
      res.statusCode = 404;
      res.end();
    };
    const withCreds = base.replace('http://', 'http://ops:p%40ss-Secret9@');
    const ok = await fetchBytes(`${withCreds}/ok`);
    expect(ok.body.toString()).toBe('config');
    expect(seen[0]).toBe(`Basic ${Buffer.from('ops:p@ss-Secret9').toString('base64')}`);
    const e = await failure(fetchBytes(`${withCreds}/missing`, fast));
    expect(`${e.message} ${e.url} ${e.hint}`).not.toMatch(/Secret9|p%40ss/);
    expect(e.message).toBe(`HTTP 404 from ${base}/missing`);
  });
});

describe('fetchBytes', () => {
  it('returns body, status, content type and the final URL after redirects', async () => {
    handler = (req, res) => {
      if (req.url === '/old') {
        res.writeHead(302, { location: '/new' });
        res.end();
      } else {
        res.writeHead(200, { 'content-type': 'application/yaml' });
        res.end('scheme_version: 1\n');
      }
    };
    const r = await fetchBytes(`${base}/old`, fast);
    expect(r.body.toString()).toBe('scheme_version: 1\n');
    expect(r.status).toBe(200);
    expect(r.contentType).toBe('application/yaml');
    expect(r.finalUrl).toBe(`${base}/new`);
    expect(r.attempts).toBe(1);
  });

  it('does not retry a 404 and says so', async () => {
    handler = (_req, res) => {
      res.statusCode = 404;
      res.end('nope');
    };
    const e = await failure(fetchBytes(`${base}/missing.yaml`, { ...fast, attempts: 4 }));
    expect(e.kind).toBe('http-client');
    expect(e.status).toBe(404);
    expect(e.message).toBe(`HTTP 404 from ${base}/missing.yaml`);
    expect(e.hint).toContain('check the path');
    expect(hits).toBe(1);
  });

  it('retries a 500 up to the attempt limit', async () => {
    handler = (_req, res) => {
      res.statusCode = 500;
      res.end();
    };
    const retries: number[] = [];
    const e = await failure(fetchBytes(`${base}/c.yaml`, { ...fast, attempts: 3, onRetry: (i) => retries.push(i.delayMs) }));
    expect(e.kind).toBe('http-server');
    expect(e.message).toBe(`HTTP 500 from ${base}/c.yaml (after 3 attempts)`);
    expect(e.attempts).toBe(3);
    expect(hits).toBe(3);
    expect(retries).toEqual([5, 10]);
  });

  it('succeeds when a retry does', async () => {
    handler = (_req, res) => {
      res.statusCode = hits < 2 ? 503 : 200;
      res.end('fine');
    };
    const r = await fetchBytes(`${base}/c.yaml`, { ...fast, attempts: 3 });
    expect(r.body.toString()).toBe('fine');
    expect(r.attempts).toBe(2);
  });

  it('times out each attempt', async () => {
    handler = () => {
      // never answers
    };
    const e = await failure(fetchBytes(`${base}/slow`, { ...fast, timeoutMs: 150, attempts: 2 }));
    expect(e.kind).toBe('timeout');
    expect(e.message).toBe(`timed out after 150 ms fetching ${base}/slow (after 2 attempts)`);
    expect(hits).toBe(2);
  });

  it('reports a refused connection', async () => {
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const e = await failure(fetchBytes(`http://127.0.0.1:${port}/x`, { ...fast, attempts: 2 }));
    expect(e.kind).toBe('refused');
    expect(e.message).toBe(`connection refused by 127.0.0.1:${port} (after 2 attempts)`);
  });

  it('reports a DNS failure (resolver test double)', async () => {
    const failingResolver = new Agent({
      connect: {
        lookup: ((host: string, _o: unknown, cb: (err: Error) => void) =>
          cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' }))) as never,
      },
    });
    try {
      const e = await failure(fetchBytes('http://config.example.test/c.yaml', { ...fast, attempts: 1, dispatcher: failingResolver }));
      expect(e.kind).toBe('dns');
      expect(e.message).toBe('cannot resolve host config.example.test (ENOTFOUND)');
    } finally {
      await failingResolver.close();
    }
  });

  it('caps the body size, by content-length and while streaming', async () => {
    handler = (_req, res) => res.end('x'.repeat(100));
    expect((await failure(fetchBytes(`${base}/big`, { ...fast, maxBytes: 10 }))).kind).toBe('too-large');
    handler = (_req, res) => {
      res.writeHead(200, { 'transfer-encoding': 'chunked' });
      res.write('x'.repeat(60));
      res.end('y'.repeat(60));
    };
    const e = await failure(fetchBytes(`${base}/chunked`, { ...fast, maxBytes: 100 }));
    expect(e.kind).toBe('too-large');
    expect(e.message).toBe(`${base}/chunked is larger than the limit of 100 bytes`);
  });

  it('verifies an expected sha256', async () => {
    handler = (_req, res) => res.end('payload');
    const sum = createHash('sha256').update('payload').digest('hex');
    expect((await fetchBytes(`${base}/p`, { sha256: `sha256:${sum}` })).body.toString()).toBe('payload');
    const e = await failure(fetchBytes(`${base}/p`, { ...fast, sha256: '0'.repeat(64), attempts: 3 }));
    expect(e.kind).toBe('checksum');
    expect(e.message).toBe(`sha256 mismatch for ${base}/p: expected ${'0'.repeat(64)}, got ${sum}`);
    expect(hits).toBe(2);
  });

  it('rejects non-http URLs and garbage', async () => {
    expect((await failure(fetchBytes('ftp://x/y'))).kind).toBe('bad-url');
    expect((await failure(fetchBytes('not a url'))).message).toBe('not a URL: "not a url"');
  });

  it('goes through HTTP_PROXY from the environment', async () => {
    const seen: string[] = [];
    const proxy = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.end('via proxy');
    });
    proxy.on('connect', (req, client: net.Socket) => {
      seen.push(`CONNECT ${req.url}`);
      const upstream = net.connect((server.address() as AddressInfo).port, '127.0.0.1', () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        upstream.pipe(client);
        client.pipe(upstream);
      });
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const saved = { HTTP_PROXY: process.env.HTTP_PROXY, http_proxy: process.env.http_proxy, NO_PROXY: process.env.NO_PROXY, no_proxy: process.env.no_proxy };
    process.env.HTTP_PROXY = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    delete process.env.http_proxy;
    process.env.NO_PROXY = '';
    delete process.env.no_proxy;
    handler = (_req, res) => res.end('origin');
    try {
      const r = await fetchBytes('http://config.example.test:8080/c.yaml', { ...fast, attempts: 1 });
      expect(['origin', 'via proxy']).toContain(r.body.toString());
      expect(seen.length).toBe(1);
      expect(seen[0]).toMatch(/config\.example\.test:8080/);
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      proxy.closeAllConnections();
      await new Promise<void>((r) => proxy.close(() => r()));
    }
  });

  it('trusts an extra CA file for https, and says what to do without it', async () => {
    const key = `${tmp}/key.pem`;
    const cert = `${tmp}/cert.pem`;
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    const tlsServer = https.createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (_req, res) => res.end('secure'));
    await new Promise<void>((r) => tlsServer.listen(0, '127.0.0.1', r));
    const url = `https://127.0.0.1:${(tlsServer.address() as AddressInfo).port}/c.yaml`;
    try {
      const e = await failure(fetchBytes(url, { ...fast, attempts: 1 }));
      expect(e.kind).toBe('tls');
      expect(e.hint).toContain('--ca-file');
      expect((await fetchBytes(url, { caFile: cert })).body.toString()).toBe('secure');
      const bad = `${tmp}/not-a-ca.pem`;
      writeFileSync(bad, 'hello');
      expect((await failure(fetchBytes(url, { caFile: bad }))).message).toBe(`CA file ${bad} holds no PEM certificate`);
      const absent = await failure(fetchBytes(url, { caFile: `${tmp}/absent.pem` }));
      expect(absent.kind).toBe('ca-file');
      expect(absent.url).toBe(url);
      expect(absent.message).toMatch(new RegExp(`^cannot read CA file ${tmp}/absent.pem: ENOENT`));
    } finally {
      tlsServer.closeAllConnections();
      await new Promise<void>((r) => tlsServer.close(() => r()));
    }
  });
});

describe('fetchBytes through a proxy', () => {
  const saved = { ...process.env };
  afterEach(() => {
    for (const k of ['http_proxy', 'HTTP_PROXY', 'https_proxy', 'HTTPS_PROXY', 'no_proxy', 'NO_PROXY']) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  });

  it('a proxy that does not resolve is named as the proxy, not as the target', async () => {
    for (const k of ['http_proxy', 'no_proxy', 'NO_PROXY']) delete process.env[k];
    process.env.HTTP_PROXY = 'http://user:proxy-pass@no-such-proxy.invalid:3128';
    const e = await failure(fetchBytes(`${base}/x`, { ...fast, attempts: 1 }));
    expect(e.kind).toBe('dns');
    expect(e.message).toBe(`cannot resolve the proxy no-such-proxy.invalid:3128 (HTTP_PROXY) (ENOTFOUND) to fetch ${base}/x`);
    expect(e.message + e.hint).not.toContain('proxy-pass');
    expect(e.hint).toContain('add 127.0.0.1 to no_proxy');
    // The target in no_proxy: fetched directly, the proxy never asked.
    process.env.NO_PROXY = 'localhost,127.0.0.1';
    expect((await fetchBytes(`${base}/x`, fast)).body.toString()).toBe('ok');
  });
});
