/**
 * A minimal Kubernetes API client over undici: just the calls the agent makes (get a Node or Lease,
 * merge-patch a Node). Every request has a deadline; errors name the URL and the status.
 */
import { Agent, request } from 'undici';
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
  private readonly dispatcher: Agent;

  constructor(readonly creds: KubeCredentials, private readonly timeoutMs = 10_000) {
    // The server's certificate is always checked (against the kubeconfig's CA, else the system's):
    // the node's credentials go in every request. Only the kubeconfig's own
    // insecure-skip-tls-verify turns that off, as for kubectl.
    this.dispatcher = new Agent({
      connect: { ca: creds.ca, cert: creds.cert, key: creds.key, rejectUnauthorized: creds.insecureSkipTlsVerify !== true, timeout: timeoutMs },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
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
      res = await request(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        dispatcher: this.dispatcher,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      throw new KubeApiError(`${method} ${url}: ${describeNetError(err)}`, undefined, this.creds.source);
    }
    const text = await res.body.text();
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
  if (kind === 'timeout' || code === 'ABORT_ERR') return 'timed out';
  if (kind === 'refused') return 'connection refused (nothing listening yet)';
  if (kind === 'reset') return 'connection reset';
  if (kind === 'tls') return `TLS verification failed (${code}): is the CA the cluster's server-ca.crt?`;
  const e = err as { message?: string; cause?: { message?: string } };
  return e.cause?.message ?? e.message ?? String(err);
}
