/**
 * A minimal Kubernetes API client over node:https (lib/http-request.ts): just the calls the agent
 * makes (get a Node or Lease, merge-patch a Node, create an Event). Every request has a deadline;
 * errors name the URL and the status.
 */
import http from 'node:http';
import https from 'node:https';
import { httpRequest } from '../../lib/http-request.js';
import { HvError } from '../../lib/errors.js';
import type { KubeCredentials } from './kubeconfig.js';
import { classifyNetworkError } from '../../lib/net-error.js';

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    resourceVersion?: string;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

export class KubeApiError extends HvError {
  constructor(message: string, readonly status: number | undefined, where: string) {
    super(message, { where });
    this.name = 'KubeApiError';
  }
}

export class KubeClient {
  private readonly agent: http.Agent;

  private readonly timeoutMs: number;
  private readonly signal?: AbortSignal;

  /** timeoutMs: each request's deadline (default 10 s); signal: ends a request in flight when it aborts (the agent stopping). */
  constructor(readonly creds: KubeCredentials, opts: { timeoutMs?: number; signal?: AbortSignal } = {}) {
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.signal = opts.signal;
    // The server's certificate is always checked (against the kubeconfig's CA, else the system's):
    // the node's credentials go in every request. Only the kubeconfig's own
    // insecure-skip-tls-verify turns that off, as for kubectl.
    // One kept-alive connection for the client's requests, as kubectl keeps one.
    this.agent = new URL(creds.server).protocol === 'http:'
      ? new http.Agent({ keepAlive: true })
      : new https.Agent({ keepAlive: true, ca: creds.ca, cert: creds.cert, key: creds.key, rejectUnauthorized: creds.insecureSkipTlsVerify !== true });
  }

  async close(): Promise<void> {
    this.agent.destroy();
  }

  getNode(name: string): Promise<KubeObject> {
    return this.call('GET', `/api/v1/nodes/${encodeURIComponent(name)}`);
  }

  getLease(namespace: string, name: string): Promise<KubeObject> {
    return this.call('GET', `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases/${encodeURIComponent(name)}`);
  }

  /** JSON merge patch (a null value deletes a key). */
  patchNode(name: string, patch: unknown): Promise<KubeObject> {
    return this.call('PATCH', `/api/v1/nodes/${encodeURIComponent(name)}`, patch, 'application/merge-patch+json');
  }

  /** Creates a core/v1 Event (what `kubectl describe node` and the dashboards show). */
  createEvent(namespace: string, event: unknown): Promise<KubeObject> {
    return this.call('POST', `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`, event, 'application/json');
  }

  private async call<T>(method: 'GET' | 'PATCH' | 'POST', apiPath: string, body?: unknown, contentType?: string): Promise<T> {
    const url = new URL(apiPath, this.creds.server).toString();
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.creds.token) headers.authorization = `Bearer ${this.creds.token}`;
    if (contentType) headers['content-type'] = contentType;
    let res;
    try {
      res = await httpRequest(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        agent: this.agent,
        timeoutMs: this.timeoutMs,
        signal: this.signal,
        // Whole objects only: a cut one would not parse. A Node or a Lease is some kilobytes.
        maxBodyBytes: 64 * 1024 * 1024,
      });
    } catch (err) {
      throw new KubeApiError(`${method} ${url}: ${describeNetError(err)}`, undefined, this.creds.source);
    }
    const text = res.body;
    if (res.statusCode < 200 || res.statusCode >= 300) {
      let reason = text.slice(0, 300);
      try {
        reason = (JSON.parse(text) as { message?: string }).message ?? reason;
      } catch {
        /* not a Status object */
      }
      throw new KubeApiError(`${method} ${url}: HTTP ${res.statusCode}: ${reason}`, res.statusCode, this.creds.source);
    }
    return JSON.parse(text) as T;
  }
}

export function describeNetError(err: unknown): string {
  const { kind, code } = classifyNetworkError(err);
  // lib/http-request.ts ends a request at its deadline as a timeout, and on its signal (the agent
  // stopping) as an AbortError.
  if (kind === 'timeout') return 'timed out';
  if (code === 'ABORT_ERR') return 'abandoned: the agent is stopping';
  if (kind === 'refused') return 'connection refused (nothing listening yet)';
  if (kind === 'reset') return 'connection reset';
  if (kind === 'tls') return `TLS verification failed (${code}): is the CA the cluster's server-ca.crt?`;
  const e = err as { message?: string; cause?: { message?: string } };
  return e.cause?.message ?? e.message ?? String(err);
}
