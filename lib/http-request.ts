/**
 * One HTTP(S) request on node:http/https, for hvagent: its few requests (the kube API, RKE2's
 * /readyz, a server's Date header, the word to hvpxe) do not need undici, which was half of the
 * bundled agent: without it the shipped binary reaches `hvagent starting` in 120 ms instead of 148
 * on the development host, 1.5 s instead of 2.0 under emulation, and at first boot the agent's start
 * is on the way to the node's readiness (docs/performance.md). The installer keeps undici
 * (lib/http-fetch.ts: proxies, retries, streamed downloads).
 *
 * Errors keep node's codes (ECONNREFUSED, the TLS verification codes) for lib/net-error.ts; the
 * deadline covers connecting, the answer and its body, and ends the request as a TimeoutError.
 * A signal ends it at once as an AbortError: a stopping agent does not wait out a probe's deadline
 * (connecting to a VIP nobody holds takes the kernel's ARP timeout, seconds).
 */
import { createHash } from 'node:crypto';
import http, { type IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import tls from 'node:tls';

export interface HttpRequestOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Connect, answer and body, together. */
  timeoutMs: number;
  /** https: the CA to verify against (default: the system's), a client certificate and key, and whether to verify at all (default: yes). */
  tls?: { ca?: string | Buffer; cert?: string | Buffer; key?: string | Buffer; rejectUnauthorized?: boolean };
  /** A keep-alive agent shared by a client's requests (its TLS options then come from it). */
  agent?: http.Agent;
  /** false: the body is not read, only the status and headers are wanted (default: read). */
  readBody?: boolean;
  /** The most of the body kept (default 1 MiB); the rest is read and dropped. */
  maxBodyBytes?: number;
  /** Ends the request (connecting, the answer or its body) when it aborts. */
  signal?: AbortSignal;
}

export interface HttpResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  /** The body as text ('' when not read). */
  body: string;
}

type TlsMaterial = NonNullable<HttpRequestOptions['tls']>;

/**
 * One https agent per CA, certificate, key and verification, its TLS context made at the first
 * request: without it node makes a new context for every connection, loading the CA (or, without
 * one, its whole root store) each time, and the agent's probes connect every few seconds (on the
 * emulated first boot that was a sixth of hvagent's busy time). Each keeps its connections alive
 * as node's global agent does, in a pool of its own: a connection made with one CA or client
 * certificate is never reused for a request that names another. A few, so rotated certificates
 * do not pile up.
 */
const agents = new Map<string, https.Agent>();
const MAX_AGENTS = 8;

function agentFor(m: TlsMaterial): https.Agent {
  const h = createHash('sha256').update(m.rejectUnauthorized === false ? 'unverified' : 'verified');
  for (const part of [m.ca, m.cert, m.key]) h.update(part === undefined ? '-' : `${Buffer.byteLength(part)}:`).update(part ?? '');
  const key = h.digest('hex');
  let agent = agents.get(key);
  if (agent) agents.delete(key);
  else {
    const secureContext = tls.createSecureContext({ ca: m.ca, cert: m.cert, key: m.key });
    agent = new https.Agent({ keepAlive: true, scheduling: 'lifo', timeout: 5_000, secureContext, rejectUnauthorized: m.rejectUnauthorized !== false });
  }
  agents.set(key, agent);
  if (agents.size > MAX_AGENTS) {
    const oldest = agents.keys().next().value!;
    agents.get(oldest)!.destroy();
    agents.delete(oldest);
  }
  return agent;
}

/** The error a request's deadline ends it with: a TimeoutError with code ETIMEDOUT. */
function deadlineError(url: string, ms: number): Error {
  return Object.assign(new Error(`${url}: no complete answer within ${ms} ms`), { name: 'TimeoutError', code: 'ETIMEDOUT' });
}

/** The error an aborted signal ends a request with: an AbortError with code ABORT_ERR. */
function abortError(url: string, signal: AbortSignal): Error {
  const why = signal.reason instanceof Error ? signal.reason.message : String(signal.reason ?? 'aborted');
  return Object.assign(new Error(`${url}: request abandoned: ${why}`), { name: 'AbortError', code: 'ABORT_ERR' });
}

export function httpRequest(url: string, opts: HttpRequestOptions): Promise<HttpResponse> {
  const target = new URL(url);
  const secure = target.protocol === 'https:';
  if (!secure && target.protocol !== 'http:') return Promise.reject(new Error(`${url}: only http and https URLs are supported`));
  const limit = opts.maxBodyBytes ?? 1024 * 1024;
  const signal = opts.signal;
  if (signal?.aborted) return Promise.reject(abortError(url, signal));
  return new Promise<HttpResponse>((resolve, reject) => {
    const headers = { ...opts.headers, ...(opts.body !== undefined ? { 'content-length': String(Buffer.byteLength(opts.body)) } : {}) };
    const base = { method: opts.method ?? 'GET', headers, agent: opts.agent };
    const req = secure ? https.request(target, { ...base, agent: opts.agent ?? (opts.tls ? agentFor(opts.tls) : undefined) }) : http.request(target, base);
    const timer = setTimeout(() => req.destroy(deadlineError(url, opts.timeoutMs)), opts.timeoutMs);
    const onAbort = (): void => void req.destroy(abortError(url, signal!));
    signal?.addEventListener('abort', onAbort, { once: true });
    const settled = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const fail = (err: Error): void => {
      settled();
      reject(err);
    };
    req.on('error', fail);
    req.on('response', (res) => {
      res.on('error', fail);
      const statusCode = res.statusCode ?? 0;
      if (opts.readBody === false) {
        settled();
        res.destroy();
        return resolve({ statusCode, headers: res.headers, body: '' });
      }
      const chunks: Buffer[] = [];
      let kept = 0;
      res.on('data', (c: Buffer) => {
        if (kept >= limit) return;
        chunks.push(c.subarray(0, limit - kept));
        kept += Math.min(c.length, limit - kept);
      });
      res.on('end', () => {
        settled();
        resolve({ statusCode, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') });
      });
    });
    req.end(opts.body);
  });
}
