/**
 * What kind of network failure an error from node:net/tls/undici is, for callers that each word it
 * for their reader (config_url and ISO downloads, the kube API). Codes sit on the error or on one
 * of its causes (undici wraps the socket's error).
 */
export type NetErrorKind = 'timeout' | 'dns' | 'refused' | 'reset' | 'unreachable' | 'tls' | 'other';

/** The first string `code` on the error or its cause chain. */
export function networkErrorCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let i = 0; i < 5 && e; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * The kind and code of a network error. A TimeoutError (AbortSignal.timeout) counts as a timeout;
 * any other abort does not: only the caller knows whether it aborted for a deadline or on request.
 */
export function classifyNetworkError(err: unknown): { kind: NetErrorKind; code?: string } {
  const code = networkErrorCode(err);
  const name = (err as { name?: unknown } | undefined)?.name;
  if (name === 'TimeoutError' || code === 'ETIMEDOUT' || (code !== undefined && /^UND_ERR_\w*TIMEOUT$/.test(code))) return { kind: 'timeout', code };
  if (code === undefined) return { kind: 'other' };
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME') return { kind: 'dns', code };
  if (code === 'ECONNREFUSED') return { kind: 'refused', code };
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET') return { kind: 'reset', code };
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return { kind: 'unreachable', code };
  if (/CERT|SELF_SIGNED|TLS|SSL|UNABLE_TO_VERIFY/i.test(code)) return { kind: 'tls', code };
  return { kind: 'other', code };
}
