import { describe, expect, it } from 'vitest';
import { loadConfig, validateConfig, serialiseHarvesterConfig } from '../../../config/index.js';
import { parse } from 'yaml';
import { testTempDir } from '../temp-dir.js';

const base = {
  scheme_version: 1,
  token: 'token-rancher-123',
  os: { hostname: 'node1', password: 'rancher', ntp_servers: ['10.10.0.2'] },
  install: {
    mode: 'create',
    management_interface: { interfaces: [{ name: 'ens5' }], method: 'dhcp' },
    device: '/dev/sda',
    vip: '10.10.0.20',
    vip_mode: 'static',
  },
};

describe('validateConfig', () => {
  it('accepts a minimal create config and applies the documented defaults', async () => {
    const r = await validateConfig(base);
    expect(r.errors).toEqual([]);
    expect(r.valid).toBe(true);
    expect(r.config.os?.modules).toEqual(['kvm', 'vhost_net']);
    expect(r.config.install?.managementInterface?.bondOptions).toEqual({ mode: 'active-backup', miimon: '100' });
    expect(r.config.install?.vipMode).toBe('static');
  });

  it('accepts camelCase and all-lowercase spellings to the same canonical config', async () => {
    const camel = await validateConfig({
      schemeVersion: 1,
      token: 'token-rancher-123',
      os: { hostname: 'node1', password: 'rancher', ntp_servers: ['10.10.0.2'] },
      install: { mode: 'create', managementInterface: { interfaces: [{ name: 'ens5' }], method: 'DHCP' }, device: '/dev/sda', vip: '10.10.0.20', vipMode: 'Static' },
    });
    const lower = await validateConfig({
      schemeversion: '1',
      token: 'token-rancher-123',
      os: { hostname: 'node1', password: 'rancher', ntp_servers: ['10.10.0.2'] },
      install: { mode: 'create', managementinterface: { interface: { name: 'ens5' } }, device: '/dev/sda', vip: '10.10.0.20', vipmode: 'static' },
    });
    expect(camel.errors).toEqual([]);
    expect(camel.config).toEqual((await validateConfig(base)).config);
    // singular `interface` is a struct list: a mapping there is an error, not silently wrapped
    expect(lower.errors.map((e) => e.path)).toContain('install.managementinterface.interface');
  });

  it('reports every finding at once, in the user spelling, with did-you-mean; an unknown key is a warning (Harvester ignores it)', async () => {
    const r = await validateConfig({ ...base, install: { ...base.install, vip_mode: 'dhpc', vipp: '1.2.3.4' } });
    expect(r.valid).toBe(false);
    expect(r.errors).toEqual([expect.objectContaining({ path: 'install.vip_mode', message: 'unknown vip mode: dhpc', hint: 'did you mean "dhcp"?' })]);
    expect(r.warnings).toEqual([expect.objectContaining({ path: 'install.vipp', message: 'unknown key "vipp": Harvester ignores it', hint: 'did you mean "vip"?' })]);
  });
});

describe('loadConfig', () => {
  it('merges the kernel command line over the file: scalars win, lists append', async () => {
    const { writeFileSync } = await import('node:fs');
    const dir = testTempDir('hvcfg-');
    const file = `${dir}/c.yaml`;
    writeFileSync(file, 'scheme_version: 1\ntoken: abc123\nos:\n  password: x\n  ntp_servers: [a.example]\ninstall:\n  mode: create\n  device: /dev/sda\n  vip: 10.0.0.5\n  vip_mode: static\n  management_interface:\n    interfaces: [{name: ens3}]\n    method: dhcp\n');
    const r = await loadConfig(file, { cmdline: 'console=tty1 harvester.install.device=/dev/vda harvester.os.ntp_servers=b.example harvester.install.management_interface.interfaces="hwAddr:52:54:00:12:34:56"' });
    expect(r.errors).toEqual([]);
    expect(r.config.install?.device).toBe('/dev/vda');
    expect(r.config.os?.ntpServers).toEqual(['b.example', 'a.example']);
    expect(r.config.install?.managementInterface?.interfaces).toEqual([{ hwAddr: '52:54:00:12:34:56' }, { name: 'ens3' }]);
  });

  it('points findings at file:line:column', async () => {
    const { writeFileSync } = await import('node:fs');
    const dir = testTempDir('hvcfg-');
    const file = `${dir}/c.yaml`;
    writeFileSync(file, 'scheme_version: 1\ninstall:\n  mode: craete\n');
    const r = await loadConfig(file);
    expect(r.errors).toContainEqual(expect.objectContaining({ path: 'install.mode', source: file, line: 3, column: 9 }));
  });
});

describe('serialiseHarvesterConfig', () => {
  it('writes yaml.v3 lowercase keys with zero values, nested os/install', async () => {
    const r = await validateConfig(base);
    const text = await serialiseHarvesterConfig(r.config);
    const back = parse(text) as Record<string, any>;
    expect(back.schemeversion).toBe(1);
    expect(back.serverurl).toBe('');
    expect(back.os.sshauthorizedkeys).toEqual([]);
    expect(back.install.managementinterface.bondoptions).toEqual({ mode: 'active-backup', miimon: '100' });
    expect(back.install.vipmode).toBe('static');
    // and our loader reads it back to the same config
    const again = await validateConfig(back);
    expect(again.errors).toEqual([]);
    expect(withoutZeros(again.config)).toEqual(withoutZeros(r.config));
  });
});

/** Drops false, 0 and emptied mappings, which Harvester's file spells out and a user's file leaves out. */
function withoutZeros(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withoutZeros);
  if (v && typeof v === 'object') {
    const entries = Object.entries(v)
      .map(([k, x]) => [k, withoutZeros(x)] as const)
      .filter(([, x]) => x !== false && x !== 0 && !(x && typeof x === 'object' && !Array.isArray(x) && Object.keys(x).length === 0));
    return Object.fromEntries(entries);
  }
  return v;
}
