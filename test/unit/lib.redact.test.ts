import { describe, expect, it } from 'vitest';
import { Redactor, REDACTED } from '../../lib/redact.js';
import { Logger, MemorySink } from '../../lib/logger.js';

describe('Redactor', () => {
  it('redacts secret-named keys at any depth and registered values inside strings', () => {
    const r = new Redactor().add('K10abc::server:s3cret');
    const out = r.redact({
      token: 'K10abc::server:s3cret',
      os: { password: 'hunter22', hostname: 'n1' },
      install: { webhooks: [{ url: 'http://u:pw12@h/x', basicAuth: { user: 'a', password: 'b' } }] },
      note: 'joined with K10abc::server:s3cret ok',
    });
    expect(out.token).toBe(REDACTED);
    expect(out.os.password).toBe(REDACTED);
    expect(out.os.hostname).toBe('n1');
    expect(out.install.webhooks[0]!.url).toBe(`http://u:${REDACTED}@h/x`);
    expect(out.install.webhooks[0]!.basicAuth).toEqual({ user: REDACTED, password: REDACTED });
    expect(out.note).toBe(`joined with ${REDACTED} ok`);
  });

  it('addFrom collects secrets from a config so they vanish from free text', () => {
    const r = new Redactor().addFrom({ token: 'abcd1234', os: { password: 'pass-word' } });
    expect(r.redactString('echo abcd1234 pass-word')).toBe(`echo ${REDACTED} ${REDACTED}`);
  });

  it('a redacted copy keeps keys named __proto__ or constructor as plain keys (a printed config shows them, redacted)', () => {
    const value = JSON.parse('{"labels":{"__proto__":"x","constructor":"y"},"__proto__":{"token":"t0ken-value"}}') as Record<string, unknown>;
    const out = new Redactor().redact(value);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(JSON.stringify(out)).toBe(`{"labels":{"__proto__":"x","constructor":"y"},"__proto__":{"token":"${REDACTED}"}}`);
  });

  it('a secret that contains another is replaced whole, in whatever order they were registered', () => {
    const short = 'pass-1234';
    const long = 'K10::server:pass-1234-and-more';
    for (const r of [new Redactor().add(short, long), new Redactor().add(long, short)]) {
      expect(r.redactString(`token=${long} pw=${short}`)).toBe(`token=${REDACTED} pw=${REDACTED}`);
      expect(r.redact({ note: `joined with ${long}` }).note).toBe(`joined with ${REDACTED}`);
    }
  });

  it('the logger never writes a registered secret', () => {
    const sink = new MemorySink();
    const log = new Logger(sink);
    log.redactor.add('topsecret-token');
    log.info('joining', { cmd: 'rke2 --token topsecret-token' });
    expect(sink.lines.join('')).not.toContain('topsecret-token');
    expect(JSON.parse(sink.lines[0]!).cmd).toBe(`rke2 --token ${REDACTED}`);
  });
});
