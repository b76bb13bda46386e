import { classifyNetworkError } from '../../lib/net-error.js';
import { proxyFor } from '../../lib/proxy-env.js';

/**
 * Turns low-level network errors into one sentence a person can act on (DNS, refused, timeout,
 * reset, TLS), for the ISO download; config_url errors come from lib/http-fetch. A TLS failure is
 * not worth retrying: the certificate will not change between attempts.
 */
export function describeNetworkError(err: unknown, url: string, timeoutMs?: number): { message: string; retryable: boolean } {
  let host = url;
  try {
    const u = new URL(url);
    host = u.host;
  } catch {
    // keep the raw text
  }
  const { kind, code } = classifyNetworkError(err);
  // Through a proxy, DNS, refusal, reset and no route are the proxy's, not the server's.
  const via = (() => {
    try {
      return proxyFor(new URL(url));
    } catch {
      return undefined;
    }
  })();
  if (via && (kind === 'dns' || kind === 'refused' || kind === 'reset' || kind === 'unreachable')) {
    const why = kind === 'dns' ? `cannot be resolved (${code})` : kind === 'refused' ? 'refused the connection' : `could not be reached (${code})`;
    return { message: `the proxy ${via.proxy.host} (${via.from}) ${why} on the way to ${host}; check ${via.from}, or add ${host.replace(/:\d+$/, '')} to no_proxy`, retryable: true };
  }
  switch (kind) {
    case 'dns':
      return { message: `cannot resolve ${host.replace(/:\d+$/, '')} (DNS lookup failed: ${code}); check the name and the DNS servers`, retryable: true };
    case 'refused':
      return { message: `connection to ${host} refused; is the server running and the port right?`, retryable: true };
    case 'reset':
      return { message: `connection to ${host} was reset`, retryable: true };
    case 'unreachable':
      return { message: `${host} is unreachable (${code}); check the route and default gateway`, retryable: true };
    case 'timeout':
      return { message: `${host} did not answer within ${timeoutMs !== undefined ? `${Math.round(timeoutMs / 1000)} s` : 'the timeout'}${code ? ` (${code})` : ''}`, retryable: true };
    case 'tls':
      return { message: `TLS certificate of ${host} not accepted (${code}); pass the CA bundle (--ca-file)`, retryable: false };
    default: {
      const msg = err instanceof Error ? err.message : String(err);
      const cause = (err as { cause?: { message?: string } }).cause?.message;
      return { message: `request to ${host} failed: ${msg}${cause && cause !== msg ? `: ${cause}` : ''}`, retryable: true };
    }
  }
}
