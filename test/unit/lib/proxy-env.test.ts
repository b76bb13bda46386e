/** proxyFor: undici's EnvHttpProxyAgent rule, so errors can blame the proxy when it is the proxy. */
import { describe, expect, it } from 'vitest';
import { proxyFor } from '../../../lib/proxy-env.js';

const env = (e: Record<string, string>) => e as NodeJS.ProcessEnv;
const via = (url: string, e: Record<string, string>) => {
  const p = proxyFor(new URL(url), env(e));
  return p ? `${p.proxy.href} ${p.from}` : undefined;
};

describe('proxyFor', () => {
  it('http uses http_proxy (lower case first); https uses https_proxy, else the http one', () => {
    expect(via('http://h.example/', { HTTP_PROXY: 'http://P:1', http_proxy: 'http://p:2' })).toBe('http://p:2/ http_proxy');
    expect(via('https://h.example/', { HTTPS_PROXY: 'http://s:3' })).toBe('http://s:3/ HTTPS_PROXY');
    expect(via('https://h.example/', { HTTP_PROXY: 'http://p:1' })).toBe('http://p:1/ HTTP_PROXY');
    expect(via('http://h.example/', { HTTPS_PROXY: 'http://s:3' })).toBeUndefined();
  });

  it('no_proxy: exact names, suffixes with . or *, ports, and * for everything; credentials never kept', () => {
    const p = { HTTP_PROXY: 'http://u:secret@p:1' };
    expect(via('http://h.example/', { ...p, NO_PROXY: 'h.example' })).toBeUndefined();
    expect(via('http://a.h.example/', { ...p, NO_PROXY: 'h.example' })).toBe('http://p:1/ HTTP_PROXY');
    expect(via('http://a.h.example/', { ...p, NO_PROXY: '.h.example' })).toBeUndefined();
    expect(via('http://a.h.example/', { ...p, no_proxy: '*.h.example' })).toBeUndefined();
    expect(via('http://h.example:8080/', { ...p, NO_PROXY: 'h.example:80' })).toBe('http://p:1/ HTTP_PROXY');
    expect(via('http://h.example/', { ...p, NO_PROXY: 'h.example:80' })).toBeUndefined();
    expect(via('http://h.example/', { ...p, NO_PROXY: '*' })).toBeUndefined();
  });
});
