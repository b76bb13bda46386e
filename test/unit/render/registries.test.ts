import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseContainerdRegistry, renderRegistriesFile, renderRegistriesYaml } from '../../../installer/render/index.js';
import { HvError } from '../../../lib/errors.js';
import { assertSchema, ourRegistriesSchema } from './format-schemas.js';

function errorOf(fn: () => unknown): HvError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(HvError);
    return err as HvError;
  }
  throw new Error('expected an error');
}

describe('renderRegistriesYaml', () => {
  it("accepts the docs' spelling and wharfie's json tags alike", () => {
    const docs = { Mirrors: { 'docker.io': { Endpoints: ['https://m.example'], Rewrites: { '^a/(.*)': 'b/$1' } } }, Configs: { 'm.example': { Auth: { Username: 'u', Password: 'p' }, TLS: { InsecureSkipVerify: true, CAFile: '/ca.pem' } } } };
    const tags = { mirrors: { 'docker.io': { endpoint: ['https://m.example'], rewrite: { '^a/(.*)': 'b/$1' } } }, configs: { 'm.example': { auth: { username: 'u', password: 'p' }, tls: { insecure_skip_verify: true, ca_file: '/ca.pem' } } } };
    expect(renderRegistriesYaml(JSON.stringify(docs))).toBe(renderRegistriesYaml(tags));
    const doc = parse(renderRegistriesYaml(docs));
    assertSchema(ourRegistriesSchema, doc, 'registries.yaml');
    expect(doc).toEqual({ mirrors: { 'docker.io': { endpoint: ['https://m.example'], rewrite: { '^a/(.*)': 'b/$1' } } }, configs: { 'm.example': { auth: { username: 'u', password: 'p' }, tls: { ca_file: '/ca.pem', insecure_skip_verify: true } } } });
  });

  it('is 0600 only when it holds credentials', () => {
    expect(renderRegistriesFile({ Mirrors: { 'docker.io': { Endpoints: ['https://m.example'] } } })).toMatchObject({ mode: 0o644, secret: false });
    expect(renderRegistriesFile({ Configs: { 'm.example': { Auth: { IdentityToken: 'tok-1234' } } } })).toMatchObject({ mode: 0o600, secret: true });
  });

  it('sorts hosts so the same setting always gives the same bytes', () => {
    const a = renderRegistriesYaml({ Mirrors: { 'b.io': { Endpoints: ['https://x'] }, 'a.io': { Endpoints: ['https://y'] } } });
    const b = renderRegistriesYaml({ Mirrors: { 'a.io': { Endpoints: ['https://y'] }, 'b.io': { Endpoints: ['https://x'] } } });
    expect(a).toBe(b);
    expect(a.indexOf('a.io')).toBeLessThan(a.indexOf('b.io'));
  });

  it('renders a setting without mirrors or configs as an empty document that still matches the schema', () => {
    for (const empty of ['{}', 'null', '{"Mirrors":null,"Configs":{}}']) assertSchema(ourRegistriesSchema, parse(renderRegistriesYaml(empty)), empty);
  });

  it.each([
    ['{not json', /could not parse containerd-registry as JSON/],
    [{ Mirror: {} }, /unknown key "Mirror"/],
    [{ Mirrors: { 'docker.io': { Endpoints: 'https://x' } } }, /Endpoints must be a list of URLs/],
    [{ Mirrors: { 'docker.io': { Endpoints: ['ftp://x'] } } }, /"ftp:\/\/x" is not an http\(s\) URL/],
    [{ Mirrors: { 'docker.io': { Endpoints: [], Rewrites: { '(': 'x' } } } }, /not a valid regular expression/],
    [{ Configs: { h: { Auth: { Password: 'p' } } } }, /a Password needs a Username/],
    [{ Configs: { h: { TLS: { CertFile: '/c.pem' } } } }, /CertFile and KeyFile go together/],
    [{ Configs: { h: { TLS: { InsecureSkipVerify: 'yes' } } } }, /InsecureSkipVerify must be true or false/],
    [{ Mirrors: { 'docker.io': { Endpoints: [], endpoint: [] } } }, /more than one spelling/],
  ] as Array<[string | object, RegExp]>)('rejects %j', (setting, message) => {
    const err = errorOf(() => renderRegistriesYaml(setting));
    expect(err.message).toMatch(message);
    expect(err.where).toBe('system_settings.containerd-registry');
  });

  it('never puts a credential into an error message', () => {
    const err = errorOf(() => parseContainerdRegistry({ Configs: { h: { Auth: { Password: 'sup3r-secret' } } } }));
    expect(`${err.message} ${err.hint ?? ''}`).not.toContain('sup3r-secret');
  });
});
