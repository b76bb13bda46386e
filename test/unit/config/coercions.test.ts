/**
 * How a scalar becomes the kind its field has, as Harvester's YAML reader and mapper take it:
 * booleans (only true, t, yes, y are true), whole numbers, strings. Expected values written out.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig, validateConfig } from '../../../config/index.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const base = {
  scheme_version: 1,
  token: 'token-rancher-123',
  os: { hostname: 'node1', password: 'rancher' },
  install: { mode: 'create', management_interface: { interfaces: [{ name: 'ens5' }], method: 'dhcp' }, device: '/dev/sda', vip: '10.10.0.20', vip_mode: 'static' },
};
const withInstall = (extra: Record<string, unknown>) => ({ ...base, install: { ...base.install, ...extra } });
const withMtu = (mtu: unknown) => withInstall({ management_interface: { ...base.install.management_interface, mtu } });
const at = (findings: Array<{ path: string; message: string }>, p: string) => findings.filter((f) => f.path === p).map((f) => f.message);

describe('booleans', () => {
  it.each(['true', 't', 'yes', 'y', ' Yes ', 'TRUE'])('%j is true, without a warning', async (word) => {
    const r = await validateConfig(withInstall({ silent: word }));
    expect(r.config?.install?.silent).toBe(true);
    expect(at(r.warnings, 'install.silent')).toEqual([]);
  });
  it.each(['false', 'f', 'no', 'n', ''])('%j is false, without a warning', async (word) => {
    const r = await validateConfig(withInstall({ silent: word }));
    expect(r.config?.install?.silent ?? false).toBe(false);
    expect(at(r.warnings, 'install.silent')).toEqual([]);
  });
  it('any other word, or a number, is false, with a warning that says so', async () => {
    const r = await validateConfig(withInstall({ silent: 'on' }));
    expect(r.config?.install?.silent).toBe(false);
    expect(at(r.warnings, 'install.silent')).toEqual(['"on" is read as false (Harvester takes only true, t, yes or y as true)']);
    expect(r.warnings.find((w) => w.path === 'install.silent')?.severity).toBe('warning');
    const one = await validateConfig(withInstall({ silent: 1 }));
    expect(one.config?.install?.silent).toBe(false);
    expect(at(one.errors, 'install.silent')).toEqual([]);
    expect(at(one.warnings, 'install.silent')).toEqual(['"1" is read as false (Harvester takes only true, t, yes or y as true)']);
  });
  it('a list or a map is an error', async () => {
    const r = await validateConfig(withInstall({ silent: ['yes'] }));
    expect(at(r.errors, 'install.silent')).toEqual([expect.stringMatching(/^must be true or false \(got /)]);
  });
});

describe('whole numbers', () => {
  it('a number, a string of digits with a sign or white space around', async () => {
    for (const [given, want] of [[1500, 1500], ['9000', 9000], [' 1400 ', 1400], ['+1300', 1300]] as const) {
      const r = await validateConfig(withMtu(given));
      expect(r.config?.install?.managementInterface?.mtu).toBe(want);
      expect(at(r.errors, 'install.management_interface.mtu')).toEqual([]);
    }
  });
  it('"" and nil are unset, not an error', async () => {
    for (const given of ['', 'nil', ' nil ']) {
      const r = await validateConfig(withMtu(given));
      expect(r.config?.install?.managementInterface?.mtu).toBeUndefined();
      expect(at(r.errors, 'install.management_interface.mtu')).toEqual([]);
    }
  });
  it('a fraction, digits followed by text, a list are errors naming what was given', async () => {
    expect(at((await validateConfig(withMtu(1500.5))).errors, 'install.management_interface.mtu')).toEqual(['must be a whole number (got 1500.5)']);
    expect(at((await validateConfig(withMtu('1500x'))).errors, 'install.management_interface.mtu')).toEqual(['must be a whole number (got "1500x")']);
    expect(at((await validateConfig(withMtu([1500]))).errors, 'install.management_interface.mtu')).toEqual([expect.stringMatching(/^must be a whole number \(got /)]);
  });
});

describe('strings', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  it('a boolean given for a string field is its word', async () => {
    const r = await validateConfig({ ...base, os: { ...base.os, hostname: 'node1', environment: { A: true } } });
    expect(r.config?.os?.environment).toEqual({ A: 'true' });
  });
  it('an unquoted number with a leading 0 is kept as written, with the octal warning; other numbers as written', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'hv-coerce-'));
    dirs.push(dir);
    const file = path.join(dir, 'config.yaml');
    writeFileSync(
      file,
      'scheme_version: 1\ntoken: token-rancher-123\nos:\n  hostname: node1\n  password: rancher\n  environment:\n    MODE: 0644\n    PORT: 8080\n    RATIO: 0644.5\n  write_files:\n    - path: /etc/a\n      permissions: 0644\ninstall:\n  mode: create\n  device: /dev/sda\n  vip: 10.10.0.20\n  vip_mode: static\n  management_interface:\n    method: dhcp\n    interfaces:\n      - name: ens5\n',
    );
    const r = await loadConfig(file);
    expect(r.config.os?.environment).toEqual({ MODE: '0644', PORT: '8080', RATIO: '0644.5' });
    const mode = r.warnings.filter((w) => w.path === 'os.environment.MODE');
    expect(mode.map((w) => w.message)).toEqual(["0644 is an unquoted number; Harvester's YAML reader takes it as octal 420"]);
    expect(mode[0]!.severity).toBe('warning');
    expect(r.warnings.filter((w) => w.path === 'os.environment.PORT' || w.path === 'os.environment.RATIO')).toEqual([]);
  });
});
