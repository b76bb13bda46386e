/**
 * install.admin_password: the hash is the one Rancher checks (PBKDF2-HMAC-SHA3-512, checked with
 * openssl's own KDF), the clear text never reaches a rendered file, the drop-in is rancherd config,
 * and its post-instruction script, run by /bin/sh against a stand-in kubectl, patches exactly the
 * admin's password Secret, or gives up after its bounded wait with a message saying what to do.
 */
import { describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { adminPasswordProblem } from '../../../config/admin-password.js';
import { ADMIN_PASSWORD_PATH, ADMIN_PASSWORD_SCRIPT, hashAdminPassword, renderAdminPasswordDropIn } from '../../../installer/render/admin-password.js';
import { renderNode } from '../../../installer/render/index.js';
import { HvError } from '../../../lib/errors.js';
import { ADMIN_PASSWORD, CASES } from './cases.js';
import { assertSchema, parseYamlStrict, ourRancherdConfigSchema } from './format-schemas.js';

/** openssl's PBKDF2 with SHA3-512: the reference the hash must equal. */
function opensslPbkdf2(password: string, salt: Buffer): Buffer {
  const hex = execFileSync('openssl', ['kdf', '-keylen', '32', '-kdfopt', 'digest:SHA3-512', '-kdfopt', `pass:${password}`, '-kdfopt', `hexsalt:${salt.toString('hex')}`, '-kdfopt', 'iter:210000', 'PBKDF2']).toString().trim();
  return Buffer.from(hex.replace(/:/g, ''), 'hex');
}

interface DropIn {
  rancherValues: { bootstrapPassword: string };
  postInstructions: Array<{ name: string; command: string; args: string[]; env: string[] }>;
}
const envOf = (d: DropIn) => Object.fromEntries(d.postInstructions[0]!.env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));

describe('the hash', () => {
  it("is Rancher's PBKDF2-HMAC-SHA3-512 (210000 iterations, 32 bytes), equal to openssl's", () => {
    const salt = Buffer.from('000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f', 'hex');
    expect(hashAdminPassword(ADMIN_PASSWORD, salt).key.equals(opensslPbkdf2(ADMIN_PASSWORD, salt))).toBe(true);
  });

  it.each([
    ['short', 'eleven-char', /at least 12 characters/],
    ['the user name', 'admin', /at least 12 characters/],
    ['a bcrypt hash', '$2a$10$abcdefghijklmnopqrstuu5Jq0wJ3lMZK2oL1Mo0tnQJWFsYJzqK', /bcrypt hashes cannot be used/],
    ['a hash with other iterations', '$pbkdf2-sha3-512$i=1000$AAECAwQFBgcICQoLDA0ODw==$ZGGlY8m6lF8NsyWTwTJXVbCo0YDQyRzsxGpLEuqm9ms=', /210000 iterations, not 1000/],
    ['a hash with a short key', '$pbkdf2-sha3-512$i=210000$AAECAwQFBgcICQoLDA0ODw==$ZGGl', /key must be 32 bytes/],
    ['a malformed hash', '$pbkdf2-sha3-512$nonsense', /has the form/],
  ])('refuses %s', (_what, value, message) => {
    expect(adminPasswordProblem(value)).toMatch(message);
  });

  it('accepts 12 characters of any script, and a well-formed hash', () => {
    expect(adminPasswordProblem('pässwörd-äöü')).toBeUndefined();
    expect(adminPasswordProblem('$pbkdf2-sha3-512$i=210000$AAECAwQFBgcICQoLDA0ODw==$ZGGlY8m6lF8NsyWTwTJXVbCo0YDQyRzsxGpLEuqm9ms=')).toBeUndefined();
  });
});

describe('rendered for a create node with rancherd', () => {
  const c = CASES.find((k) => k.name === 'rancherd-create')!;
  const report = renderNode(structuredClone(c.config), structuredClone(c.facts), c.seeds);
  const file = report.yipFiles.find((f) => f.path === ADMIN_PASSWORD_PATH)!;
  const dropIn = parseYamlStrict(String(file.content)) as DropIn;

  it('is rancherd config: a random bootstrap password and a post-instruction carrying the hash', () => {
    expect({ mode: file.mode, secret: file.secret }).toEqual({ mode: 0o600, secret: true });
    assertSchema(ourRancherdConfigSchema, dropIn, ADMIN_PASSWORD_PATH);
    const bootstrap = dropIn.rancherValues.bootstrapPassword;
    // Not Harvester's `admin` (which makes Rancher ask for a new password at first login), not the password itself.
    expect(bootstrap).not.toBe('admin');
    expect(bootstrap).not.toBe(ADMIN_PASSWORD);
    expect(bootstrap.length).toBeGreaterThanOrEqual(32);
    expect(dropIn.postInstructions[0]).toMatchObject({ name: 'hvinstall-admin-password', command: '/bin/sh', args: ['-c', ADMIN_PASSWORD_SCRIPT] });
    const env = envOf(dropIn);
    expect(Buffer.from(env.HVINSTALL_ADMIN_PASSWORD_SALT!, 'base64')).toHaveLength(32);
    expect(Buffer.from(env.HVINSTALL_ADMIN_PASSWORD_KEY!, 'base64').equals(opensslPbkdf2(ADMIN_PASSWORD, Buffer.from(env.HVINSTALL_ADMIN_PASSWORD_SALT!, 'base64')))).toBe(true);
  });

  it('keeps the same hash in the saved configs, so the node re-renders the same drop-in', () => {
    const env = envOf(dropIn);
    const saved = JSON.parse(String(report.files.find((f) => f.path === '/oem/hvinstall/config.json')!.content)) as { install: { adminPassword: string } };
    expect(saved.install.adminPassword).toBe(`$pbkdf2-sha3-512$i=210000$${env.HVINSTALL_ADMIN_PASSWORD_SALT}$${env.HVINSTALL_ADMIN_PASSWORD_KEY}`);
    const again = renderNode({ ...structuredClone(c.config), install: { ...c.config.install, adminPassword: saved.install.adminPassword } }, structuredClone(c.facts), c.seeds);
    expect(again.yipFiles.find((f) => f.path === ADMIN_PASSWORD_PATH)!.content).toBe(file.content);
  });

  it('a different seed gives another salt and bootstrap password', () => {
    const other = renderNode(structuredClone(c.config), structuredClone(c.facts), { seed: 'another' });
    const d = parseYamlStrict(String(other.yipFiles.find((f) => f.path === ADMIN_PASSWORD_PATH)!.content)) as DropIn;
    expect(envOf(d).HVINSTALL_ADMIN_PASSWORD_SALT).not.toBe(envOf(dropIn).HVINSTALL_ADMIN_PASSWORD_SALT);
    expect(d.rancherValues.bootstrapPassword).not.toBe(dropIn.rancherValues.bootstrapPassword);
  });

  it('is refused for a Rancher that keeps passwords elsewhere (before v2.13), or an unreadable version', () => {
    for (const v of ['v2.12.3', 'master-head']) {
      let err: unknown;
      try {
        renderAdminPasswordDropIn(ADMIN_PASSWORD, 'seed', v);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(HvError);
      expect((err as HvError).message).toBe(`install.admin_password needs Rancher v2.13.0 or later, which keeps local passwords in cattle-local-user-passwords Secrets; the bootstrap uses Rancher ${v}`);
      expect((err as HvError).hint).toMatch(/set the password in the UI/);
    }
  });

  it('is ignored, with a warning, on an image without rancherd', () => {
    const r = renderNode(structuredClone(c.config), { ...structuredClone(c.facts), image: undefined }, c.seeds);
    expect(r.yipFiles).toEqual([]);
    expect(r.warnings).toContain('install.admin_password is ignored: this image has no rancherd, so no Rancher UI is bootstrapped');
  });
});

describe('the post-instruction script', () => {
  const c = CASES.find((k) => k.name === 'rancherd-create')!;
  const dropIn = parseYamlStrict(String(renderNode(structuredClone(c.config), structuredClone(c.facts), c.seeds).yipFiles.find((f) => f.path === ADMIN_PASSWORD_PATH)!.content)) as DropIn;
  const env = envOf(dropIn);

  /** Runs the script with /bin/sh, kubectl replaced by a stand-in that logs its arguments (one JSON line per call). */
  function runScript(admin: string): { status: number | null; stderr: string; calls: string[][] } {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'hv-admin-pw-'));
    try {
      const log = path.join(dir, 'calls.log');
      const kubectl = path.join(dir, 'kubectl');
      writeFileSync(
        kubectl,
        `#!/bin/sh
{ printf '%s\\037' "$@"; printf '\\n'; } >> "${log}"
case "$*" in
  "get users.management.cattle.io "*) printf '%s' "${admin}" ;;
  "-n cattle-local-user-passwords get secret user-abc12") exit 0 ;;
  "-n cattle-local-user-passwords get secret "*) exit 1 ;;
esac
exit 0
`,
      );
      chmodSync(kubectl, 0o755);
      // The bounded wait must not take ten minutes here.
      writeFileSync(path.join(dir, 'sleep'), '#!/bin/sh\nexit 0\n');
      chmodSync(path.join(dir, 'sleep'), 0o755);
      const script = ADMIN_PASSWORD_SCRIPT.replace('k=/var/lib/rancher/rke2/bin/kubectl', `k=${kubectl}`);
      const r = spawnSync('/bin/sh', ['-c', script], { env: { PATH: `${dir}:${process.env.PATH}`, ...env }, encoding: 'utf8', timeout: 60_000 });
      // One line per call, each argument ended by a unit separator (no argument holds a newline).
      const calls = readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => l.split('\x1f').slice(0, -1));
      return { status: r.status, stderr: r.stderr, calls };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it("patches the admin's password Secret with the hash and the pbkdf2sha3512 annotation, then clears the first-login prompts", () => {
    const r = runScript('user-abc12');
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const patch = r.calls.find((a) => a.includes('patch') && a.includes('secret'))!;
    expect(patch.slice(0, 5)).toEqual(['-n', 'cattle-local-user-passwords', 'patch', 'secret', 'user-abc12']);
    expect(JSON.parse(patch[patch.indexOf('-p') + 1]!)).toEqual([
      { op: 'replace', path: '/data', value: { password: env.HVINSTALL_ADMIN_PASSWORD_KEY, salt: env.HVINSTALL_ADMIN_PASSWORD_SALT } },
      { op: 'add', path: '/metadata/annotations/cattle.io~1password-hash', value: 'pbkdf2sha3512' },
    ]);
    expect(r.calls).toContainEqual(['patch', 'users.management.cattle.io', 'user-abc12', '--type=merge', '-p', '{"mustChangePassword":false}']);
    expect(r.calls).toContainEqual(['patch', 'settings.management.cattle.io', 'first-login', '--type=merge', '-p', '{"value":"false"}']);
  });

  it('gives up after 40 tries when Rancher has no admin password Secret, says so, and patches nothing', () => {
    const r = runScript('');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/install\.admin_password was NOT applied; set the password with: rancherd reset-admin/);
    expect(r.calls.filter((a) => a[0] === 'get' && a[1] === 'users.management.cattle.io')).toHaveLength(40);
    expect(r.calls.some((a) => a.includes('patch'))).toBe(false);
  });
});
