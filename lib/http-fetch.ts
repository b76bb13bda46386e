/**
 * Fetch one URL into memory, the way an installer must on a half-configured network: a timeout per
 * attempt, a bounded number of attempts with exponential backoff, the proxy environment
 * (HTTP_PROXY/HTTPS_PROXY/NO_PROXY through undici's EnvHttpProxyAgent), an extra CA bundle, an
 * optional expected sha256 and a cap on the body size. Failures are FetchErrors whose `kind` says
 * what went wrong and whose message says what to do. Used for `install.config_url` and
 * `hvinstall validate https://...`.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { rootCertificates } from 'node:tls';
import { EnvHttpProxyAgent, interceptors, request, type Dispatcher } from 'undici';
import { classifyNetworkError } from './net-error.js';
import { redactUrl, withoutUserinfo } from './url-secrets.js';
import { proxyFor, type ProxyChoice } from './proxy-env.js';

export type FetchErrorKind =
  | 'bad-url'
  | 'ca-file'
  | 'dns'
  | 'refused'
  | 'timeout'
  | 'tls'
  | 'network'
  | 'http-client'
  | 'http-server'
  | 'too-large'
  | 'checksum';

export class FetchError extends Error {
  readonly kind: FetchErrorKind;
  readonly url: string;
  readonly status?: number;
  /** Attempts made before giving up. */
  readonly attempts: number;
  readonly hint?: string;

  constructor(kind: FetchErrorKind, url: string, message: string, opts: { status?: number; attempts?: number; hint?: string; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'FetchError';
    this.kind = kind;
    this.url = url;
    this.status = opts.status;
    this.attempts = opts.attempts ?? 1;
    this.hint = opts.hint;
  }
}

export interface FetchOptions {
  /** Per attempt, covering connect, headers and body. Default 15 000 ms (Harvester's HTTP timeout). */
  timeoutMs?: number;
  /** Total attempts (>= 1). Default 3. */
  attempts?: number;
  /** Delay before the second attempt; doubles each time, capped at maxRetryDelayMs. Default 1000 ms. */
  retryDelayMs?: number;
  maxRetryDelayMs?: number;
  /** PEM file with extra CA certificates, trusted in addition to the system ones. */
  caFile?: string;
  /** Expected sha256 of the body (hex, optionally prefixed `sha256:`). */
  sha256?: string;
  /** Largest body accepted. Default 16 MiB. */
  maxBytes?: number;
  maxRedirections?: number;
  headers?: Record<string, string>;
  /** Called before each retry (for progress output). */
  onRetry?: (info: { attempt: number; delayMs: number; error: FetchError }) => void;
  /** Test seam: replaces the dispatcher (proxy environment and CA are then the caller's business). */
  dispatcher?: Dispatcher;
}

export interface FetchResult {
  body: Buffer;
  status: number;
  contentType?: string;
  finalUrl: string;
  attempts: number;
}

const RETRYABLE: ReadonlySet<FetchErrorKind> = new Set(['dns', 'refused', 'timeout', 'network', 'http-server']);

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function classify(err: unknown, url: URL, timeoutMs: number, attempt: number): FetchError {
  if (err instanceof FetchError) return err;
  const { kind, code = '' } = classifyNetworkError(err);
  // Through a proxy, DNS, refusal and reset are the proxy's (the proxy resolves and reaches the target).
  const via = proxyFor(url);
  if (via && (kind === 'dns' || kind === 'refused' || kind === 'reset' || kind === 'unreachable')) return proxyFailure(kind, code, url, via, attempt, err);
  const name = (err as { name?: string }).name ?? '';
  const detail = (err as Error).message ?? String(err);
  const host = url.host;
  if (kind === 'timeout' || name === 'AbortError') {
    return new FetchError('timeout', url.href, `timed out after ${timeoutMs} ms fetching ${url.href}`, {
      attempts: attempt,
      hint: 'check that the server answers and the network (route, proxy) reaches it',
      cause: err,
    });
  }
  if (kind === 'dns') {
    return new FetchError('dns', url.href, `cannot resolve host ${url.hostname} (${code})`, {
      attempts: attempt,
      hint: 'check the host name and the DNS servers (DHCP or os.dns_nameservers)',
      cause: err,
    });
  }
  if (kind === 'refused') {
    return new FetchError('refused', url.href, `connection refused by ${host}`, { attempts: attempt, hint: 'is the HTTP server running on that port?', cause: err });
  }
  if (kind === 'tls') {
    return new FetchError('tls', url.href, `TLS verification failed for ${host}: ${code} (${detail})`, {
      attempts: attempt,
      hint: 'pass the CA that signed the server certificate (--ca-file), or serve the file over plain http',
      cause: err,
    });
  }
  return new FetchError('network', url.href, `cannot fetch ${url.href}: ${detail}${code ? ` (${code})` : ''}`, { attempts: attempt, cause: err });
}

function proxyFailure(kind: string, code: string, url: URL, via: ProxyChoice, attempt: number, cause: unknown): FetchError {
  const proxy = `proxy ${via.proxy.host} (${via.from})`;
  const what =
    kind === 'dns' ? `cannot resolve the ${proxy} (${code}) to fetch ${url.href}` : kind === 'refused' ? `connection refused by the ${proxy} fetching ${url.href}` : `the ${proxy} could not be reached (${code}) fetching ${url.href}`;
  return new FetchError(kind === 'dns' ? 'dns' : 'network', url.href, what, {
    attempts: attempt,
    hint: `check ${via.from} (os.environment's http_proxy/https_proxy on a node), or add ${url.hostname} to no_proxy if it is reached directly`,
    cause,
  });
}

async function buildDispatcher(opts: FetchOptions): Promise<Dispatcher> {
  if (opts.dispatcher) return opts.dispatcher;
  let ca: string[] | undefined;
  if (opts.caFile) {
    let pem: string;
    try {
      pem = await readFile(opts.caFile, 'utf8');
    } catch (err) {
      throw new FetchError('ca-file', '', `cannot read CA file ${opts.caFile}: ${(err as Error).message}`, { hint: 'give a PEM file with the CA certificate(s)' });
    }
    if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
      throw new FetchError('ca-file', '', `CA file ${opts.caFile} holds no PEM certificate`, { hint: 'expected -----BEGIN CERTIFICATE----- blocks' });
    }
    ca = [...rootCertificates, pem];
  }
  const tls = ca ? { ca } : undefined;
  const agent = new EnvHttpProxyAgent({ connect: tls, requestTls: tls });
  return agent.compose(interceptors.redirect({ maxRedirections: opts.maxRedirections ?? 5 }));
}

async function attemptOnce(url: URL, dispatcher: Dispatcher, opts: Required<Pick<FetchOptions, 'timeoutMs' | 'maxBytes'>> & FetchOptions, attempt: number): Promise<FetchResult> {
  const signal = AbortSignal.timeout(opts.timeoutMs);
  let res: Dispatcher.ResponseData;
  try {
    res = await request(url, { method: 'GET', dispatcher, signal, headers: { 'user-agent': 'hvinstall', ...opts.headers } });
  } catch (err) {
    throw classify(err, url, opts.timeoutMs, attempt);
  }
  const status = res.statusCode;
  const contentType = typeof res.headers['content-type'] === 'string' ? res.headers['content-type'] : undefined;
  if (status < 200 || status >= 400) {
    res.body.resume();
    const server = status >= 500 || status === 429 || status === 408;
    throw new FetchError(server ? 'http-server' : 'http-client', url.href, `HTTP ${status} from ${url.href}`, {
      status,
      attempts: attempt,
      hint: server ? 'the server failed; it is retried, then check its logs' : status === 404 ? 'check the path: the server has no such file' : 'check the URL and any credentials it needs',
    });
  }
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > opts.maxBytes) {
    // Nobody reads this body any more: swallow the abort error destroying it emits.
    res.body.on('error', () => undefined);
    res.body.destroy();
    throw new FetchError('too-large', url.href, `${url.href} is ${declared} bytes; the limit is ${opts.maxBytes}`, { status, attempts: attempt });
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size > opts.maxBytes) {
        res.body.on('error', () => undefined);
        res.body.destroy();
        throw new FetchError('too-large', url.href, `${url.href} is larger than the limit of ${opts.maxBytes} bytes`, { status, attempts: attempt });
      }
      chunks.push(chunk as Buffer);
    }
  } catch (err) {
    throw classify(err, url, opts.timeoutMs, attempt);
  }
  const finalUrl = (res as { context?: { history?: URL[] } }).context?.history?.at(-1)?.href ?? url.href;
  return { body: Buffer.concat(chunks), status, contentType, finalUrl, attempts: attempt };
}

/** Fetches a URL into memory with bounded retries; throws FetchError. */
export async function fetchBytes(rawUrl: string, options: FetchOptions = {}): Promise<FetchResult> {
  let url: URL;
  // user:pass@ is sent as Basic credentials (as Go's net/http does) and kept out of every message.
  const { url: withoutCredentials, authorization } = withoutUserinfo(rawUrl);
  try {
    url = new URL(withoutCredentials);
  } catch {
    throw new FetchError('bad-url', redactUrl(rawUrl), `not a URL: ${JSON.stringify(redactUrl(rawUrl))}`, { hint: 'write it as http(s)://host/path' });
  }
  if (authorization) options = { ...options, headers: { authorization, ...options.headers } };
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new FetchError('bad-url', rawUrl, `only http and https URLs can be fetched (got ${url.protocol})`);
  }
  const opts = { ...options, timeoutMs: options.timeoutMs ?? 15_000, maxBytes: options.maxBytes ?? 16 * 1024 * 1024 };
  const attempts = Math.max(1, Math.floor(options.attempts ?? 3));
  const maxDelay = options.maxRetryDelayMs ?? 10_000;
  let delay = options.retryDelayMs ?? 1000;
  let dispatcher: Dispatcher;
  try {
    dispatcher = await buildDispatcher(opts);
  } catch (err) {
    if (err instanceof FetchError) throw new FetchError(err.kind, url.href, err.message, { hint: err.hint, attempts: 0 });
    throw err;
  }
  try {
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await attemptOnce(url, dispatcher, opts, attempt);
        if (options.sha256) verifySha256(result, options.sha256);
        return result;
      } catch (err) {
        const fe = err instanceof FetchError ? err : classify(err, url, opts.timeoutMs, attempt);
        if (!RETRYABLE.has(fe.kind) || attempt >= attempts) {
          throw new FetchError(fe.kind, fe.url || url.href, attempt > 1 ? `${fe.message} (after ${attempt} attempts)` : fe.message, {
            status: fe.status,
            attempts: attempt,
            hint: fe.hint,
            cause: fe.cause ?? fe,
          });
        }
        options.onRetry?.({ attempt, delayMs: delay, error: fe });
        await sleep(delay);
        delay = Math.min(delay * 2, maxDelay);
      }
    }
  } finally {
    if (!options.dispatcher) await dispatcher.close().catch(() => undefined);
  }
}

function verifySha256(result: FetchResult, expected: string): void {
  const want = expected.replace(/^sha256:/i, '').trim().toLowerCase();
  const got = createHash('sha256').update(result.body).digest('hex');
  if (got !== want) {
    throw new FetchError('checksum', result.finalUrl, `sha256 mismatch for ${result.finalUrl}: expected ${want}, got ${got}`, {
      attempts: result.attempts,
      hint: 'the file changed on the server, or the expected checksum is stale',
    });
  }
}
