import { describe, expect, it } from 'vitest';
import { classifyNetworkError, networkErrorCode } from '../../../lib/net-error.js';

const withCode = (code: string, message = code): Error => Object.assign(new Error(message), { code });

describe('classifyNetworkError', () => {
  it.each([
    ['ENOTFOUND', 'dns'],
    ['EAI_AGAIN', 'dns'],
    ['ECONNREFUSED', 'refused'],
    ['ECONNRESET', 'reset'],
    ['UND_ERR_SOCKET', 'reset'],
    ['EHOSTUNREACH', 'unreachable'],
    ['ETIMEDOUT', 'timeout'],
    ['UND_ERR_CONNECT_TIMEOUT', 'timeout'],
    ['UND_ERR_BODY_TIMEOUT', 'timeout'],
    ['SELF_SIGNED_CERT_IN_CHAIN', 'tls'],
    ['ERR_TLS_CERT_ALTNAME_INVALID', 'tls'],
    ['ERR_SSL_WRONG_VERSION_NUMBER', 'tls'],
    ['EPROTO_SOMETHING', 'other'],
  ])('%s is %s', (code, kind) => {
    expect(classifyNetworkError(withCode(code))).toEqual({ kind, code });
  });

  it("finds the code on a cause, as undici's fetch wraps it", () => {
    const err = new TypeError('fetch failed', { cause: withCode('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:1') });
    expect(classifyNetworkError(err)).toEqual({ kind: 'refused', code: 'ECONNREFUSED' });
    expect(networkErrorCode(err)).toBe('ECONNREFUSED');
  });

  it('takes AbortSignal.timeout for a timeout, but not any other abort', () => {
    const timeout = new DOMException('The operation was aborted due to timeout', 'TimeoutError');
    expect(classifyNetworkError(timeout).kind).toBe('timeout'); // its numeric DOMException code is ignored
    expect(classifyNetworkError(new DOMException('aborted', 'AbortError')).kind).toBe('other');
  });

  it('is "other" for errors without a code, and for things that are not errors', () => {
    expect(classifyNetworkError(new Error('boom'))).toEqual({ kind: 'other' });
    expect(classifyNetworkError(undefined)).toEqual({ kind: 'other' });
    expect(classifyNetworkError('text')).toEqual({ kind: 'other' });
  });
});
