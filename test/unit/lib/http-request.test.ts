/**
 * httpRequest (lib/http-request.ts), hvagent's HTTP(S) client, against real servers on loopback:
 * the server certificate checked against the given CA, a client certificate presented (mutual TLS,
 * as RKE2's /readyz wants), the deadline over a server that never answers or stops mid-body (ending
 * as a timeout lib/net-error.ts recognises), a signal ending a request at once (as an abort, not a
 * timeout), the body kept up to its limit, the request body sent with its length, and a kept-alive
 * agent reused; requests that name the same CA and client certificate share one TLS context and
 * their connections, and never a connection made with other TLS material.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { execFileSync } from 'node:child_process';
import { getEventListeners } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { httpRequest } from '../../../lib/http-request.js';
import { classifyNetworkError } from '../../../lib/net-error.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'hv-http-request-'));
const read = (f: string): string => readFileSync(path.join(dir, f), 'utf8');
let tlsServer: https.Server;
let plainServer: http.Server;
let tlsUrl = '';
let plainUrl = '';
const clientCerts: Array<string | undefined> = [];
const sockets = new Set<unknown>();
/** Requests the plain server received, with when their connection closed. */
const arrived: Array<{ url: string; closed: Promise<void> }> = [];
let plainConnections = 0;

beforeAll(async () => {
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  run(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=test CA']);
  writeFileSync(path.join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  run(['req', ...ec, '-keyout', 'srv.key', '-out', 'srv.csr', '-subj', '/CN=127.0.0.1']);
  run(['x509', '-req', '-in', 'srv.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'srv.pem', '-days', '1', '-extfile', 'san.ext']);
  run(['req', ...ec, '-keyout', 'client.key', '-out', 'client.csr', '-subj', '/CN=system:admin']);
  run(['x509', '-req', '-in', 'client.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'client.pem', '-days', '1']);
  run(['req', '-x509', ...ec, '-keyout', 'other-ca.key', '-out', 'other-ca.pem', '-days', '1', '-subj', '/CN=another CA']);

  tlsServer = https.createServer({ key: read('srv.key'), cert: read('srv.pem'), ca: read('ca.pem'), requestCert: true, rejectUnauthorized: false }, (req, res) => {
    const peer = (req.socket as import('node:tls').TLSSocket).getPeerCertificate();
    clientCerts.push(peer && Object.keys(peer).length ? String(peer.subject?.CN) : undefined);
    // /close: one request a connection, as probes seconds apart get (a kept-alive connection idles out in 5 s)
    if (req.url === '/close') res.setHeader('connection', 'close');
    res.end('ok');
  });
  tlsServer.on('connection', (s) => sockets.add(s));
  await new Promise<void>((r) => tlsServer.listen(0, '127.0.0.1', r));
  tlsUrl = `https://127.0.0.1:${(tlsServer.address() as AddressInfo).port}`;

  plainServer = http.createServer((req, res) => {
    arrived.push({ url: req.url ?? '', closed: new Promise((r) => req.socket.once('close', () => r())) });
    if (req.url === '/silent') return; // never answers
    if (req.url === '/stall') {
      res.writeHead(200, { 'content-length': '100' });
      res.write('only part');
      return;
    }
    if (req.url === '/big') return res.end('x'.repeat(3000));
    if (req.url === '/date') return res.writeHead(200, { date: 'Sat, 05 Dec 2026 03:00:00 GMT' }).end('y'.repeat(10000));
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => res.end(JSON.stringify({ method: req.method, length: req.headers['content-length'], type: req.headers['content-type'], body, remote: req.socket.remotePort })));
  });
  plainServer.on('connection', () => plainConnections++);
  await new Promise<void>((r) => plainServer.listen(0, '127.0.0.1', r));
  plainUrl = `http://127.0.0.1:${(plainServer.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const s of [tlsServer, plainServer]) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  rmSync(dir, { recursive: true, force: true });
});

describe('httpRequest over TLS', () => {
  it('verifies the server against the given CA and presents the client certificate', async () => {
    const before = clientCerts.length;
    const res = await httpRequest(`${tlsUrl}/readyz`, { timeoutMs: 5_000, tls: { ca: read('ca.pem'), cert: read('client.pem'), key: read('client.key') } });
    expect(res).toMatchObject({ statusCode: 200, body: 'ok' });
    expect(clientCerts.slice(before)).toEqual(['system:admin']);
  });

  it('refuses a server its CA did not sign, before sending anything, with a TLS code', async () => {
    const before = clientCerts.length;
    const err = await httpRequest(`${tlsUrl}/readyz`, { timeoutMs: 5_000 }).then(() => undefined, (e: unknown) => e);
    expect(classifyNetworkError(err).kind).toBe('tls');
    expect(clientCerts.length).toBe(before);
  });

  it('asks without verifying only when told to', async () => {
    const res = await httpRequest(`${tlsUrl}/readyz`, { timeoutMs: 5_000, tls: { rejectUnauthorized: false } });
    expect(res.statusCode).toBe(200);
  });

  it('uses the TLS options of a kept-alive agent, one connection for several requests', async () => {
    const agent = new https.Agent({ keepAlive: true, ca: read('ca.pem'), cert: read('client.pem'), key: read('client.key') });
    const opened = sockets.size;
    try {
      for (let i = 0; i < 3; i++) expect((await httpRequest(`${tlsUrl}/x`, { timeoutMs: 5_000, agent })).body).toBe('ok');
    } finally {
      agent.destroy();
    }
    expect(sockets.size - opened).toBe(1);
  });
});

describe('httpRequest TLS material reused', () => {
  it('makes the TLS context of a CA and client certificate once, for every connection', async () => {
    // Material of this test's own (the CA text with a trailing comment line), so no earlier test made its context.
    const material = { ca: `${read('ca.pem')}\n# reuse test\n`, cert: read('client.pem'), key: read('client.key') };
    const made = vi.spyOn(tls, 'createSecureContext');
    const opened = sockets.size;
    const before = clientCerts.length;
    try {
      for (let i = 0; i < 3; i++) expect((await httpRequest(`${tlsUrl}/close`, { timeoutMs: 5_000, tls: material })).body).toBe('ok');
      expect(made).toHaveBeenCalledTimes(1);
    } finally {
      made.mockRestore();
    }
    expect(sockets.size - opened).toBe(3);
    expect(clientCerts.slice(before)).toEqual(['system:admin', 'system:admin', 'system:admin']);
  });

  it('keeps a connection alive for the next request with the same material', async () => {
    const material = { ca: `${read('ca.pem')}\n# keep-alive test\n`, cert: read('client.pem'), key: read('client.key') };
    const opened = sockets.size;
    for (let i = 0; i < 3; i++) expect((await httpRequest(`${tlsUrl}/readyz`, { timeoutMs: 5_000, tls: material })).body).toBe('ok');
    expect(sockets.size - opened).toBe(1);
  });

  it('never sends a request over a connection made with other TLS material', async () => {
    const ca = read('ca.pem');
    const before = clientCerts.length;
    await httpRequest(`${tlsUrl}/readyz`, { timeoutMs: 5_000, tls: { ca, cert: read('client.pem'), key: read('client.key') } });
    const opened = sockets.size;
    // Same server, same CA, no client certificate: a connection of its own, which shows no certificate.
    await httpRequest(`${tlsUrl}/readyz`, { timeoutMs: 5_000, tls: { ca } });
    expect(clientCerts.slice(before)).toEqual(['system:admin', undefined]);
    expect(sockets.size - opened).toBe(1);
    // A CA that did not sign the server is refused, though a connection verified with the right one is open.
    const err = await httpRequest(`${tlsUrl}/readyz`, { timeoutMs: 5_000, tls: { ca: read('other-ca.pem'), cert: read('client.pem'), key: read('client.key') } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(classifyNetworkError(err).kind).toBe('tls');
    // Unverified after verified, to the same server: its own pool too, and it still gets its answer.
    expect((await httpRequest(`${tlsUrl}/readyz`, { timeoutMs: 5_000, tls: { rejectUnauthorized: false } })).statusCode).toBe(200);
  });

  it('turns a CA that is not a certificate into the request failing, not a throw', async () => {
    const err = await httpRequest(`${tlsUrl}/readyz`, { timeoutMs: 5_000, tls: { ca: 'not a certificate' } }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
  });
});

describe('httpRequest deadlines and bodies', () => {
  it('ends a request the server never answers at its deadline, as a timeout', async () => {
    const started = Date.now();
    const err = await httpRequest(`${plainUrl}/silent`, { timeoutMs: 300 }).then(() => undefined, (e: unknown) => e as Error);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(err?.message).toContain(`${plainUrl}/silent: no complete answer within 300 ms`);
    expect(classifyNetworkError(err)).toEqual({ kind: 'timeout', code: 'ETIMEDOUT' });
  });

  it('ends a body that stops half way at the deadline too', async () => {
    const err = await httpRequest(`${plainUrl}/stall`, { timeoutMs: 300 }).then(() => undefined, (e: unknown) => e);
    expect(classifyNetworkError(err).kind).toBe('timeout');
  });

  it('keeps the body up to its limit', async () => {
    const res = await httpRequest(`${plainUrl}/big`, { timeoutMs: 5_000, maxBodyBytes: 1000 });
    expect(res.body).toBe('x'.repeat(1000));
    expect((await httpRequest(`${plainUrl}/big`, { timeoutMs: 5_000 })).body).toBe('x'.repeat(3000));
  });

  it('can leave the body unread and give the status and headers', async () => {
    const res = await httpRequest(`${plainUrl}/date`, { timeoutMs: 5_000, readBody: false });
    expect(res).toEqual({ statusCode: 200, headers: expect.objectContaining({ date: 'Sat, 05 Dec 2026 03:00:00 GMT' }), body: '' });
  });

  it('sends a body with its length, method and headers', async () => {
    const res = await httpRequest(`${plainUrl}/post`, { method: 'POST', body: '{"é":1}', headers: { 'content-type': 'application/json' }, timeoutMs: 5_000 });
    expect(JSON.parse(res.body)).toMatchObject({ method: 'POST', length: '8', type: 'application/json', body: '{"é":1}' });
  });

  it('refuses what is not http or https', async () => {
    await expect(httpRequest('ftp://127.0.0.1/x', { timeoutMs: 1_000 })).rejects.toThrow('ftp://127.0.0.1/x: only http and https URLs are supported');
  });

  it('a refused connection keeps its code', async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const err = await httpRequest(`http://127.0.0.1:${port}/`, { timeoutMs: 5_000 }).then(() => undefined, (e: unknown) => e);
    expect(classifyNetworkError(err).kind).toBe('refused');
  });
});

/** Resolves once the plain server has received a request for URL (from the index FROM on). */
async function requestArrived(url: string, from: number): Promise<{ closed: Promise<void> }> {
  for (;;) {
    const hit = arrived.slice(from).find((a) => a.url === url);
    if (hit) return hit;
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('httpRequest and its signal', () => {
  // The deadlines are far beyond the test's own timeout: only the signal can end these requests in time.
  it('ends a request the server never answers when the signal aborts, as an abort, and closes its connection', async () => {
    const stop = new AbortController();
    const from = arrived.length;
    const pending = httpRequest(`${plainUrl}/silent`, { timeoutMs: 600_000, signal: stop.signal }).then(() => undefined, (e: unknown) => e as Error & { code?: string });
    const req = await requestArrived('/silent', from);
    stop.abort(new Error('stopped by SIGTERM'));
    const err = await pending;
    expect(err).toMatchObject({ name: 'AbortError', code: 'ABORT_ERR', message: `${plainUrl}/silent: request abandoned: stopped by SIGTERM` });
    // An abort is not a timeout: the caller knows it asked for it.
    expect(classifyNetworkError(err).kind).toBe('other');
    await req.closed;
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
  });

  it('ends a body that stops half way when the signal aborts', async () => {
    const stop = new AbortController();
    const from = arrived.length;
    const pending = httpRequest(`${plainUrl}/stall`, { timeoutMs: 600_000, signal: stop.signal }).then(() => undefined, (e: unknown) => e);
    await requestArrived('/stall', from);
    stop.abort();
    expect(await pending).toMatchObject({ name: 'AbortError', message: expect.stringContaining('/stall: request abandoned') });
  });

  it('does not connect at all when the signal has already aborted', async () => {
    const stop = new AbortController();
    stop.abort(new Error('stopped by SIGTERM'));
    const before = plainConnections;
    await expect(httpRequest(`${plainUrl}/post`, { method: 'POST', body: 'x', timeoutMs: 5_000, signal: stop.signal })).rejects.toMatchObject({ name: 'AbortError', code: 'ABORT_ERR' });
    await new Promise((r) => setTimeout(r, 100));
    expect(plainConnections).toBe(before);
  });

  it('an answer that came leaves nothing on the signal, and a later abort changes nothing', async () => {
    const stop = new AbortController();
    const res = await httpRequest(`${plainUrl}/big`, { timeoutMs: 5_000, signal: stop.signal });
    expect(res.body).toBe('x'.repeat(3000));
    const headOnly = await httpRequest(`${plainUrl}/date`, { timeoutMs: 5_000, readBody: false, signal: stop.signal });
    expect(headOnly.statusCode).toBe(200);
    const refused = await httpRequest('ftp://127.0.0.1/x', { timeoutMs: 1_000, signal: stop.signal }).catch((e: Error) => e.message);
    expect(refused).toContain('only http and https');
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
    stop.abort();
  });
});
