/**
 * Readiness probes: the API server's /readyz with the node's admin credentials (server role), the
 * kubelet's /healthz (agent role). Each probe is one bounded request and returns a reason when not
 * ready, which the guard turns into its diagnosis.
 */
import { readFile } from 'node:fs/promises';
import { httpRequest } from '../../lib/http-request.js';
import type { Probe } from '../../lib/wait.js';
import { describeNetError } from '../kube/client.js';

export interface TlsMaterial {
  ca?: string;
  cert?: string;
  key?: string;
}

/** RKE2's admin client certificate and the server CA, as RKE2 lays them out in server/tls. */
export async function loadServerTls(tlsDir: string): Promise<TlsMaterial> {
  const read = (f: string) => readFile(`${tlsDir}/${f}`, 'utf8').catch(() => undefined);
  return { ca: await read('server-ca.crt'), cert: await read('client-admin.crt'), key: await read('client-admin.key') };
}

/**
 * One readiness request. With the server CA the answer is verified and the admin client certificate
 * is presented; without it (an agent node has no server/tls) the probe only asks whether the
 * endpoint answers: unverified, and with no credentials to hand to whoever answers. Bounded by 5 s;
 * the signal (the agent stopping) abandons it sooner.
 */
export async function probeUrl(url: string, tls: TlsMaterial, opts: { signal?: AbortSignal } = {}): Promise<Probe<string>> {
  const verified = tls.ca !== undefined;
  try {
    const res = await httpRequest(url, {
      timeoutMs: 5_000,
      signal: opts.signal,
      tls: { ca: tls.ca, ...(verified ? { cert: tls.cert, key: tls.key } : {}), rejectUnauthorized: verified },
    });
    const body = res.body.trim();
    if (res.statusCode === 200) return { done: true, value: body || 'ok' };
    const failing = body
      .split('\n')
      .filter((l) => l.startsWith('[-]'))
      .map((l) => l.slice(3).replace(/ failed: reason withheld$/, ''))
      .join(', ');
    return { done: false, reason: `${url}: HTTP ${res.statusCode}${failing ? ` (failing: ${failing})` : body ? `: ${body.slice(0, 200)}` : ''}` };
  } catch (err) {
    return { done: false, reason: `${url}: ${describeNetError(err)}` };
  }
}
