/**
 * A small etcd v3 client over etcd's JSON gateway (the gRPC API as JSON over HTTP, served on every
 * member's client URL since etcd 3.3: /v3/kv/range, /v3/kv/txn, /v3/watch, /v3/lease/grant…;
 * etcd-io/etcd Documentation/dev-guide/api_grpc_gateway.md), through undici, which hvpxe already
 * depends on. docs/fleet.md says why this and not the npm etcd3 package (measured: the same
 * requests per second, 50 MiB less RSS, no gRPC stack in the installer's node_modules).
 *
 * Every request has a deadline and goes to the member that answered last, then to the next ones,
 * round after round while the deadline allows: a killed member costs one refused connection; a cluster without
 * quorum answers nothing within the deadline, which the caller takes as "the store is unavailable".
 * Keys and values are base64 in the JSON, int64 fields are decimal strings.
 */
import { readFileSync } from 'node:fs';
import { Agent, request, type Dispatcher } from 'undici';
import { sleep } from '../lib/wait.js';

export interface EtcdOptions {
  endpoints: string[];
  /** PEM files for a cluster with TLS (--etcd-ca, --etcd-cert, --etcd-key). */
  tls?: { ca?: string; cert?: string; key?: string };
  /** Deadline of one request, across the endpoints it tries. */
  requestTimeoutMs?: number;
}

export interface KeyValue {
  key: string;
  value: string;
  modRevision: number;
  createRevision: number;
  lease: string;
}

export type Compare = { key: string; target: 'MOD'; result: 'EQUAL'; mod_revision: string } | { key: string; target: 'VERSION'; result: 'EQUAL'; version: string };
export type RequestOp =
  | { request_put: { key: string; value: string; lease?: string } }
  | { request_delete_range: { key: string; range_end?: string } }
  | { request_range: { key: string; range_end?: string } };

export interface TxnResult {
  succeeded: boolean;
  revision: number;
  /** The range responses of the branch taken, in order (puts and deletes give none). */
  ranges: KeyValue[][];
}

export interface WatchEvent {
  type: 'PUT' | 'DELETE';
  kv: KeyValue;
}

/** An error etcd answered with (not a connection problem). */
export class EtcdError extends Error {
  constructor(
    message: string,
    readonly code: number | undefined,
  ) {
    super(message);
    this.name = 'EtcdError';
  }
}

/**
 * A request's deadline: long enough for what follows a killed leader (a write it had not committed
 * waits for etcd's own request timeout, 5 s plus two election timeouts, before a member answers),
 * short enough for a booting machine.
 */
export const ETCD_REQUEST_TIMEOUT_MS = 9_000;

/** A write whose outcome is unknown: it was sent, and no answer came (it may have been applied). */
export class EtcdAmbiguous extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EtcdAmbiguous';
  }
}

/** Whether a failed request surely never reached etcd (so a write may go to another member). */
function neverSent(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === 'ECONNREFUSED' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'EHOSTUNREACH';
}

/** The pause after the n-th round in which no member answered: 100 ms, doubling, at most 1 s. */
function roundPauseMs(round: number): number {
  return Math.min(100 * 2 ** (round - 1), 1_000);
}

export const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
export const unb64 = (s: string | undefined): string => Buffer.from(s ?? '', 'base64').toString('utf8');

/**
 * The end of the range holding every key that starts with `prefix` (etcd's prefix convention: the
 * last byte plus one). hvpxe's prefixes are non-empty UTF-8, whose bytes are never 0xff, so the
 * last byte never overflows.
 */
export function prefixEnd(prefix: string): string {
  const end = Buffer.from(prefix);
  end[end.length - 1]++;
  return end.toString('base64');
}

interface RawKv {
  key?: string;
  value?: string;
  mod_revision?: string;
  create_revision?: string;
  lease?: string;
}

function kvOf(raw: RawKv): KeyValue {
  return { key: unb64(raw.key), value: unb64(raw.value), modRevision: Number(raw.mod_revision ?? 0), createRevision: Number(raw.create_revision ?? 0), lease: raw.lease ?? '0' };
}

export class EtcdClient {
  private readonly agent: Agent;
  private readonly endpoints: string[];
  private current = 0;
  private readonly timeoutMs: number;

  constructor(opts: EtcdOptions) {
    if (opts.endpoints.length === 0) throw new Error('no etcd endpoints');
    this.endpoints = opts.endpoints.map((e) => e.replace(/\/+$/, ''));
    this.timeoutMs = opts.requestTimeoutMs ?? ETCD_REQUEST_TIMEOUT_MS;
    const t = opts.tls;
    const connect = t ? { ca: t.ca ? readFileSync(t.ca) : undefined, cert: t.cert ? readFileSync(t.cert) : undefined, key: t.key ? readFileSync(t.key) : undefined } : undefined;
    this.agent = new Agent({ connections: 32, keepAliveTimeout: 30_000, connect: { timeout: 1_000, ...connect } });
  }

  get where(): string {
    return this.endpoints.join(',');
  }

  /**
   * One JSON call, to the member that answered last and then the others, round after round until
   * the deadline (an election after a killed leader answers "unavailable" at once from every
   * survivor for a second or more). A read is tried again anywhere; a write only where it surely was
   * not sent: one sent without an answer throws EtcdAmbiguous (the caller reads back what happened).
   */
  async call<T>(path: string, body: unknown, opts: { timeoutMs?: number; write?: boolean } = {}): Promise<T> {
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    const deadline = Date.now() + timeoutMs;
    let lastError: Error | undefined;
    for (let tried = 0; ; tried++) {
      if (tried > 0 && tried % this.endpoints.length === 0) await sleep(Math.min(roundPauseMs(tried / this.endpoints.length), deadline - Date.now()));
      const left = deadline - Date.now();
      if (left <= 0) break;
      const i = (this.current + tried) % this.endpoints.length;
      try {
        const r = await this.once<T>(this.endpoints[i], path, body, left);
        this.current = i;
        return r;
      } catch (err) {
        if (err instanceof EtcdError && err.code !== 14) throw err; // 14: unavailable, another member may answer
        if (opts.write && !neverSent(err)) throw new EtcdAmbiguous(`${this.endpoints[i]}${path}: no answer to a write (${(err as Error).message}); it may have been applied`);
        // An attempt the deadline cut short says less than what a member answered before it.
        if (!(lastError && (err as Error).name === 'TimeoutError')) lastError = err as Error;
      }
    }
    throw new Error(`etcd (${this.where}) did not answer ${path} within ${timeoutMs} ms: ${lastError?.message ?? 'deadline passed'}`);
  }

  private async once<T>(endpoint: string, path: string, body: unknown, timeoutMs: number): Promise<T> {
    const res = await request(`${endpoint}${path}`, {
      method: 'POST',
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
      dispatcher: this.agent as Dispatcher,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.body.text();
    let json: Record<string, unknown>;
    try {
      json = JSON.parse(text) as Record<string, unknown>;
    } catch {
      throw new Error(`${endpoint}${path}: HTTP ${res.statusCode}, not JSON: ${text.slice(0, 120)}`);
    }
    if (res.statusCode !== 200 || json.error) throw new EtcdError(`${endpoint}${path}: ${String(json.message ?? json.error ?? `HTTP ${res.statusCode}`)}`, typeof json.code === 'number' ? json.code : undefined);
    return json as T;
  }

  /** Keys from `key` (with `prefix`: every key under it), at most `limit`, from `revision` (0: now). */
  async range(key: string, opts: { prefix?: boolean; limit?: number; revision?: number; fromKey?: string; timeoutMs?: number } = {}): Promise<{ kvs: KeyValue[]; more: boolean; revision: number }> {
    const start = opts.fromKey ?? key;
    const r = await this.call<{ kvs?: RawKv[]; more?: boolean; header?: { revision?: string } }>('/v3/kv/range', {
      key: b64(start),
      ...(opts.prefix ? { range_end: prefixEnd(key) } : {}),
      ...(opts.limit ? { limit: String(opts.limit) } : {}),
      ...(opts.revision ? { revision: String(opts.revision) } : {}),
    }, { timeoutMs: opts.timeoutMs });
    return { kvs: (r.kvs ?? []).map(kvOf), more: !!r.more, revision: Number(r.header?.revision ?? 0) };
  }

  async txn(compare: Compare[], success: RequestOp[], failure: RequestOp[] = []): Promise<TxnResult> {
    const r = await this.call<{ succeeded?: boolean; header?: { revision?: string }; responses?: Array<{ response_range?: { kvs?: RawKv[] } }> }>('/v3/kv/txn', { compare, success, failure }, { write: success.some((op) => !('request_range' in op)) });
    return {
      succeeded: !!r.succeeded,
      revision: Number(r.header?.revision ?? 0),
      ranges: (r.responses ?? []).filter((x) => x.response_range).map((x) => (x.response_range!.kvs ?? []).map(kvOf)),
    };
  }

  async put(key: string, value: string, lease?: string): Promise<void> {
    await this.call('/v3/kv/put', { key: b64(key), value: b64(value), ...(lease ? { lease } : {}) }, { write: true });
  }

  async leaseGrant(ttlSeconds: number): Promise<string> {
    const r = await this.call<{ ID?: string; TTL?: string }>('/v3/lease/grant', { TTL: String(ttlSeconds) });
    if (!r.ID || Number(r.TTL ?? 0) <= 0) throw new Error('etcd granted no lease');
    return r.ID;
  }

  /** Renews a lease once; false when it no longer exists (expired). */
  async leaseKeepAlive(id: string): Promise<boolean> {
    const r = await this.call<{ result?: { TTL?: string } }>('/v3/lease/keepalive', { ID: id });
    return Number(r.result?.TTL ?? 0) > 0;
  }

  async leaseRevoke(id: string): Promise<void> {
    await this.call('/v3/lease/revoke', { ID: id });
  }

  /**
   * Watches every key under `prefix` from `startRevision`; `onEvents` gets each batch in order.
   * Resolves when the stream ends (a member went away, the revision was compacted: the caller
   * reads again and watches anew); `stop()` ends it.
   */
  watch(prefix: string, startRevision: number, onEvents: (events: WatchEvent[], revision: number) => void): { done: Promise<string>; stop: () => void } {
    const abort = new AbortController();
    const endpoint = this.endpoints[this.current];
    const body = { create_request: { key: b64(prefix), range_end: prefixEnd(prefix), start_revision: String(startRevision) } };
    const done = (async (): Promise<string> => {
      const res = await request(`${endpoint}/v3/watch`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' }, dispatcher: this.agent as Dispatcher, signal: abort.signal, bodyTimeout: 0, headersTimeout: this.timeoutMs });
      if (res.statusCode !== 200) return `${endpoint}: HTTP ${res.statusCode}`;
      let buf = '';
      for await (const chunk of res.body) {
        buf += String(chunk);
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (!line) continue;
          const why = this.watchMessage(line, onEvents);
          if (why) return why;
        }
      }
      return `${endpoint}: the watch stream ended`;
    })().catch((err: Error) => `${endpoint}: ${err.message}`);
    return { done, stop: () => abort.abort() };
  }

  /** One message of the watch stream; a reason when the watch is over. */
  private watchMessage(line: string, onEvents: (events: WatchEvent[], revision: number) => void): string | undefined {
    const msg = JSON.parse(line) as { result?: { header?: { revision?: string }; events?: Array<{ type?: string; kv?: RawKv }>; canceled?: boolean; compact_revision?: string; cancel_reason?: string }; error?: { message?: string } };
    if (msg.error) return msg.error.message ?? 'watch error';
    const r = msg.result;
    if (!r) return undefined;
    if (r.canceled || Number(r.compact_revision ?? 0) > 0) return `watch cancelled: ${r.cancel_reason ?? `compacted at ${r.compact_revision}`}`;
    if (r.events?.length) onEvents(r.events.map((e) => ({ type: e.type === 'DELETE' ? 'DELETE' : 'PUT', kv: kvOf(e.kv ?? {}) })), Number(r.header?.revision ?? 0));
    return undefined;
  }

  async close(): Promise<void> {
    await this.agent.close().catch(() => undefined);
  }
}
