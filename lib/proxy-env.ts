/**
 * Which proxy a request to a URL goes through, by the rule undici's EnvHttpProxyAgent applies
 * (node_modules/undici/lib/dispatcher/env-http-proxy-agent.js): http_proxy/HTTP_PROXY for http,
 * https_proxy/HTTPS_PROXY (else the http one) for https, unless no_proxy/NO_PROXY names the host
 * (exactly, or as a suffix when the entry starts with `.` or `*`; an entry's port must match; `*`
 * means never). So an error can say whether the target or the proxy did not answer. Pure.
 */

export interface ProxyChoice {
  /** The proxy's URL, its credentials out (they are not to be printed). */
  proxy: URL;
  /** The variable it came from, e.g. HTTPS_PROXY. */
  from: string;
}

const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 };

function firstSet(env: NodeJS.ProcessEnv, names: string[]): { value: string; from: string } | undefined {
  for (const n of names) {
    const v = env[n];
    if (v !== undefined && v !== '') return { value: v, from: n };
  }
  return undefined;
}

function bypassed(host: string, port: number, env: NodeJS.ProcessEnv): boolean {
  const raw = env.no_proxy ?? env.NO_PROXY ?? '';
  if (raw === '*') return true;
  for (const entry of raw.split(/[,\s]/).filter(Boolean)) {
    const m = /^(.+):(\d+)$/.exec(entry);
    const name = (m ? m[1]! : entry).toLowerCase();
    if (m && Number(m[2]) !== port) continue;
    if (/^[.*]/.test(name) ? host.endsWith(name.replace(/^\*/, '')) : host === name) return true;
  }
  return false;
}

export function proxyFor(url: URL, env: NodeJS.ProcessEnv = process.env): ProxyChoice | undefined {
  const host = url.host.replace(/:\d*$/, '').toLowerCase();
  const port = Number.parseInt(url.port, 10) || DEFAULT_PORTS[url.protocol] || 0;
  const http = ['http_proxy', 'HTTP_PROXY'];
  const chosen = url.protocol === 'https:' ? (firstSet(env, ['https_proxy', 'HTTPS_PROXY']) ?? firstSet(env, http)) : url.protocol === 'http:' ? firstSet(env, http) : undefined;
  if (!chosen || bypassed(host, port, env)) return undefined;
  let proxy: URL;
  try {
    proxy = new URL(chosen.value);
  } catch {
    return undefined;
  }
  proxy.username = '';
  proxy.password = '';
  return { proxy, from: chosen.from };
}
