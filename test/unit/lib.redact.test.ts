import { describe, expect, it } from 'vitest';
import { isSecretKey, Redactor, REDACTED, stringsUnderSecretKeys } from '../../lib/redact.js';
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

describe('secret-named keys', () => {
  it.each([
    'token', 'TOKEN', 'password', 'Password', 'passphrase', 'passwd', 'secret', 'auth', 'authorization',
    'identitytoken', 'identity_token', 'identity-token', 'basicauth', 'basic_auth', 'basicAuth', 'basic-auth',
    'private_key', 'privatekey', 'private-key', 'key_file', 'keyfile', 'key-file', 'tls_key', 'tlskey', 'tls-key',
    'agent_token', 'agenttoken', 'agent-token', 'server_token', 'servertoken', 'client_secret', 'clientsecret', 'client-secret',
    'admin_password', 'adminPassword', 'admin-password', 'credential', 'Credential',
  ])('%s names a secret', (k) => {
    expect(isSecretKey(k)).toBe(true);
  });

  it.each(['credentials', 'credential_id', 'tokens', 'mytoken', 'token_id', 'hostname', 'username', 'user', 'author', 'keyfiles', 'secrets', 'passwordless', 'private', 'key', 'tls', 'basic', 'x-auth', 'auth_url', ''])(
    '%j does not',
    (k) => {
      expect(isSecretKey(k)).toBe(false);
    },
  );
});

describe('redact: what stays and what goes', () => {
  const r = new Redactor();

  it('empty and absent secrets stay as they are (a "<redacted>" would claim there was one)', () => {
    expect(r.redact({ token: '', password: undefined, auth: null })).toEqual({ token: '', password: undefined, auth: null });
  });

  it('everything under a secret-named key is replaced, at any depth, in its shape', () => {
    expect(r.redact({ auth: ['first', 'second'] })).toEqual({ auth: [REDACTED, REDACTED] });
    expect(r.redact({ basicAuth: { user: 'bob', nested: { deeper: 'bob-again', list: ['x1'] }, port: 5 } })).toEqual({
      basicAuth: { user: REDACTED, nested: { deeper: REDACTED, list: [REDACTED] }, port: REDACTED },
    });
  });

  it('values under other keys are kept, registered secrets inside them scrubbed; arrays stay arrays', () => {
    const s = new Redactor().add('s3cret-value');
    expect(s.redact({ hosts: ['a.example', 'has s3cret-value inside'], n: 3, ok: true, none: null })).toEqual({ hosts: ['a.example', `has ${REDACTED} inside`], n: 3, ok: true, none: null });
  });
});

describe('Redactor.add and addFrom', () => {
  it('registers strings of four characters or more, ignores shorter ones and non-strings', () => {
    const r = new Redactor().add(undefined, null, 'abc', 'abcd');
    expect(r.redactString('abc abcd')).toBe(`abc ${REDACTED}`);
  });

  it('collects every string under a secret-named key (lists, nested objects), and nothing else', () => {
    const r = new Redactor().addFrom({
      os: { hostname: 'node-one', password: 'pass-word-1' },
      registries: [{ auth: { username: 'pull-user', password: 'pull-pass' } }],
      webhooks: [{ headers: { authorization: ['Bearer tok-111', 'Bearer tok-222'] } }],
    });
    expect(r.redactString('node-one pass-word-1 pull-user pull-pass Bearer tok-111 Bearer tok-222')).toBe(`node-one ${REDACTED} ${REDACTED} ${REDACTED} ${REDACTED} ${REDACTED}`);
  });

  it('a secret-named key holding nothing (null, a number, an empty list) registers nothing and does not fail', () => {
    const r = new Redactor().addFrom({ token: null, password: 1234, auth: [], secret: {} });
    expect(r.redactString('null 1234 [] {}')).toBe('null 1234 [] {}');
  });

  it("scrubs the value of a query parameter named as a secret (hvpxe's boot credential), and only that", () => {
    const c = 'Zx9_-'.repeat(8) + 'abc';
    expect(new Redactor().redactString(`GET http://h:8080/config/n-1.yaml?credential=${c} failed`)).toBe(`GET http://h:8080/config/n-1.yaml?credential=${REDACTED} failed`);
    expect(new Redactor().redactString(`http://h/e?a=1&credential=${c}&b=2#f`)).toBe(`http://h/e?a=1&credential=${REDACTED}&b=2#f`);
    expect(new Redactor().redactString(`sha256 mismatch for http://h/c.yaml?credential=${c}: expected 0`)).toBe(`sha256 mismatch for http://h/c.yaml?credential=${REDACTED}: expected 0`);
    expect(new Redactor().redactString(`(http://h/c?token=${c}).`)).toBe(`(http://h/c?token=${REDACTED}).`);
    expect(new Redactor().redactString('http://h/c?mac=52:54:00:00:00:01&uuid=1&credentials=x&q=credential')).toBe('http://h/c?mac=52:54:00:00:00:01&uuid=1&credentials=x&q=credential');
    expect(new Redactor().redactString('"url":"http://h/c?credential=abcd"')).toBe(`"url":"http://h/c?credential=${REDACTED}"`);
  });

  it('scrubs user:password@ in URLs whatever the user name', () => {
    expect(new Redactor().redactString('fetch https://admin:pw-123@registry.example/v2 and ftp://u:p@h/x')).toBe(
      `fetch https://admin:${REDACTED}@registry.example/v2 and ftp://u:${REDACTED}@h/x`,
    );
  });
});

describe('stringsUnderSecretKeys', () => {
  it('null, numbers and booleans under a secret key are no secrets and no crash; strings at any depth are', () => {
    expect(stringsUnderSecretKeys({ password: null, token: 5, auth: { enabled: true, inner: null, user: ['s3cr3t-a', { k: 's3cr3t-b' }] }, name: 'public' })).toEqual(['s3cr3t-a', 's3cr3t-b']);
  });
});

describe('redaction of bytes', () => {
  it('logs a Buffer or typed array as its length, not one entry per byte, under any key', () => {
    const r = new Redactor();
    const out = r.redact({ chunk: Buffer.alloc(1000), nested: { view: new Uint8Array(16) }, password: Buffer.from('hunter2') }) as Record<string, unknown>;
    expect(out.chunk).toBe('<1000 bytes>');
    expect(out.nested).toEqual({ view: '<16 bytes>' });
    expect(out.password).toBe('<7 bytes>');
    expect(stringsUnderSecretKeys({ token: Buffer.alloc(1_000_000) })).toEqual([]);
  });
});
