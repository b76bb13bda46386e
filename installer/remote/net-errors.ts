/**
 * Turns low-level network errors into one sentence a person can act on (DNS, refused, timeout,
 * reset, TLS). Used for the ISO download; config_url errors come from lib/http-fetch.
 */
function codeOf(err: unknown): string | undefined {
  let e: unknown = err;
  for (let i = 0; i < 5 && e; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

export function describeNetworkError(err: unknown, url: string, timeoutMs?: number): { message: string; retryable: boolean } {
  let host = url;
  try {
    const u = new URL(url);
    host = u.host;
  } catch {
    // keep the raw text
  }
  const code = codeOf(err);
  switch (code) {
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return { message: `cannot resolve ${host.replace(/:\d+$/, '')} (DNS lookup failed: ${code}); check the name and the DNS servers`, retryable: true };
    case 'ECONNREFUSED':
      return { message: `connection to ${host} refused; is the server running and the port right?`, retryable: true };
    case 'ECONNRESET':
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
      return { message: `connection to ${host} was reset`, retryable: true };
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return { message: `${host} is unreachable (${code}); check the route and default gateway`, retryable: true };
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
    case 'ETIMEDOUT':
      return { message: `${host} did not answer within ${timeoutMs !== undefined ? `${Math.round(timeoutMs / 1000)} s` : 'the timeout'} (${code})`, retryable: true };
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'SELF_SIGNED_CERT_IN_CHAIN':
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
    case 'CERT_HAS_EXPIRED':
    case 'ERR_TLS_CERT_ALTNAME_INVALID':
      return { message: `TLS certificate of ${host} not accepted (${code}); pass the CA bundle (--ca-file)`, retryable: false };
    default: {
      const msg = err instanceof Error ? err.message : String(err);
      const cause = (err as { cause?: { message?: string } }).cause?.message;
      return { message: `request to ${host} failed: ${msg}${cause && cause !== msg ? `: ${cause}` : ''}`, retryable: true };
    }
  }
}
