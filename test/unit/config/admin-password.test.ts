/** install.admin_password (hvinstall, beyond Harvester): its spellings, its rules and their messages, and its redaction. */
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../../config/index.js';
import { redactConfig } from '../../../config/redact-config.js';
import { Redactor } from '../../../lib/redact.js';

const base = (install: Record<string, unknown> = {}) => ({
  scheme_version: 1,
  token: 'token-rancher-123',
  os: { hostname: 'node1', password: 'rancher' },
  install: { mode: 'create', management_interface: { interfaces: [{ name: 'ens5' }], method: 'dhcp' }, device: '/dev/sda', vip: '10.10.0.20', vip_mode: 'static', ...install },
});
const HASH = '$pbkdf2-sha3-512$i=210000$AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=$ZGGlY8m6lF8NsyWTwTJXVbCo0YDQyRzsxGpLEuqm9ms=';

describe('install.admin_password', () => {
  it.each(['admin_password', 'adminPassword', 'adminpassword'])('is accepted as %s', async (key) => {
    const r = await validateConfig(base({ [key]: 'a long enough password' }));
    expect(r.errors).toEqual([]);
    expect(r.config.install?.adminPassword).toBe('a long enough password');
  });

  it('takes a $pbkdf2-sha3-512$ hash as it is', async () => {
    const r = await validateConfig(base({ admin_password: HASH }));
    expect(r.errors).toEqual([]);
    expect(r.config.install?.adminPassword).toBe(HASH);
  });

  it('refuses a short password with the rule and what to give instead', async () => {
    const r = await validateConfig(base({ admin_password: 'short' }));
    expect(r.valid).toBe(false);
    expect(r.errors).toMatchObject([{ path: 'install.admin_password', message: "the password must be at least 12 characters (Rancher's password-min-length)", hint: expect.stringMatching(/\$pbkdf2-sha3-512\$/) }]);
  });

  it('refuses a bcrypt hash, which Rancher would hash again', async () => {
    const r = await validateConfig(base({ admin_password: '$2b$10$abcdefghijklmnopqrstuu5Jq0wJ3lMZK2oL1Mo0tnQJWFsYJzqK' }));
    expect(r.errors[0]?.message).toMatch(/bcrypt hashes cannot be used/);
  });

  it('is only a warning in join mode, where the cluster already has its admin', async () => {
    const r = await validateConfig({ ...base({ admin_password: 'a long enough password', mode: 'join' }), server_url: 'https://10.10.0.20:443' });
    expect(r.errors).toEqual([]);
    expect(r.warnings.map((w) => w.message)).toContain("admin_password is used only in create mode (the cluster's admin is set once, by the node that creates it); ignored in join mode");
  });

  it('is a secret: redacted by key name in printed configs and logs', async () => {
    const r = await validateConfig(base({ admin_password: 'a long enough password' }));
    expect(JSON.stringify(redactConfig(r.config))).not.toContain('a long enough password');
    expect(new Redactor().addFrom(r.config).redactString('login with a long enough password')).not.toContain('a long enough password');
  });
});
