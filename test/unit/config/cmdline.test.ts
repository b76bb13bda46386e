import { describe, expect, it } from 'vitest';
import { parseCmdline, tokenizeCmdline } from '../../../config/cmdline.js';
import { parseInterfaceSpec } from '../../../config/interface-spec.js';
import { normaliseRaw } from '../../../config/normalise.js';
import { loadConfig } from '../../../config/index.js';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { afterAll } from 'vitest';

const tmp = mkdtempSync('/tmp/hvcfg-cmdline-');
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function cmdlineConfig(text: string) {
  const p = parseCmdline(text);
  return { parsed: p, n: normaliseRaw(p.raw, { name: '<cmdline>', cmdline: true, positions: p.positions }) };
}

describe('kernel command line tokens', () => {
  it('splits on whitespace outside double quotes and drops the quotes', () => {
    expect(tokenizeCmdline('a=1  b="two words" c\td="x"y').map((t) => t.text)).toEqual(['a=1', 'b=two words', 'c', 'd=xy']);
  });
  it('records the column of each parameter', () => {
    expect(tokenizeCmdline('ro harvester.x=1').map((t) => [t.text, t.line, t.column])).toEqual([
      ['ro', 1, 1],
      ['harvester.x=1', 1, 4],
    ]);
  });
});

describe('harvester.* parameters', () => {
  it('ignores everything without the harvester. prefix and harvester.installer.*', () => {
    const { parsed } = cmdlineConfig('BOOT_IMAGE=/vmlinuz root=live:http://x/rootfs ip=dhcp harvester.installer.disable=true cos.install.power_off=true');
    expect(parsed.raw).toEqual({});
  });
  it('splits dotted paths into nested keys; a bare key means "true"', () => {
    const { parsed, n } = cmdlineConfig('harvester.install.automatic harvester.install.mode=create harvester.scheme_version=1');
    expect(parsed.raw).toEqual({ install: { automatic: 'true', mode: 'create' }, scheme_version: '1' });
    expect(n.config).toEqual({ schemeVersion: 1, install: { automatic: true, mode: 'create' } });
  });
  it('keeps quoted values whole', () => {
    const { n } = cmdlineConfig('harvester.os.after_install_chroot_commands="echo hello world"');
    expect(n.config.os?.afterInstallChrootCommands).toEqual(['echo hello world']);
  });
  it('turns a repeated key into a list', () => {
    const { parsed, n } = cmdlineConfig('harvester.os.ntp_servers=a harvester.os.ntp_servers=b harvester.os.ntp_servers=c');
    expect(parsed.raw).toEqual({ os: { ntp_servers: ['a', 'b', 'c'] } });
    expect(n.config.os?.ntpServers).toEqual(['a', 'b', 'c']);
  });
  it('accepts camelCase and lowercase paths too', () => {
    const { n } = cmdlineConfig('harvester.install.persistentPartitionSize=150Gi harvester.install.powerOff=true harvester.install.wipealldisks=yes');
    expect(n.config.install).toEqual({ persistentPartitionSize: '150Gi', powerOff: true, wipeAllDisks: true });
  });
  it('coerces strings to the field types (cmdline values are all strings, harvester#9667)', () => {
    const { n } = cmdlineConfig('harvester.install.management_interface.mtu=1500 harvester.install.management_interface.vlan_id=10 harvester.install.skipchecks=false');
    expect(n.config.install?.managementInterface).toEqual({ mtu: 1500, vlanId: 10 });
    expect(n.config.install?.skipchecks).toBe(false);
  });
  it('joins dotted map keys back (sysctls, labels)', () => {
    const { n } = cmdlineConfig('harvester.os.sysctls.net.ipv4.ip_forward=1 harvester.os.labels.topology.kubernetes.io/zone=z1');
    expect(n.config.os?.sysctls).toEqual({ 'net.ipv4.ip_forward': '1' });
    expect(n.config.os?.labels).toEqual({ 'topology.kubernetes.io/zone': 'z1' });
  });
  it('reports a value and nested keys under one name, and empty key parts', () => {
    const { parsed } = cmdlineConfig('harvester.install.mode=create harvester.install.mode.x=1 harvester..y=2');
    expect(parsed.errors).toEqual([expect.objectContaining({ message: 'kernel parameter harvester.install.mode.x sets both a value and nested keys under the same name', line: 1, column: 31 })]);
    expect(parsed.warnings).toEqual([expect.objectContaining({ message: 'kernel parameter "harvester..y=2" has an empty key part and is ignored' })]);
  });
  it('places findings at the parameter column', () => {
    const { n } = cmdlineConfig('quiet harvester.install.vipmode=static harvester.install.bogus=1');
    expect(n.errors).toEqual([]);
    expect(n.warnings).toEqual([expect.objectContaining({ path: 'install.bogus', source: '<cmdline>', line: 1, column: 40, message: 'unknown key "bogus": Harvester ignores it' })]);
  });
});

describe('management_interface.interfaces forms', () => {
  it.each([
    ['hwAddr:be:44:8c:b0:5d:f2', { hwAddr: 'be:44:8c:b0:5d:f2' }],
    ['hwAddr: be:44:8c:b0:5d:f2', { hwAddr: 'be:44:8c:b0:5d:f2' }],
    ['be:44:8c:b0:5d:f2', { hwAddr: 'be:44:8c:b0:5d:f2' }],
    ['name:ens3', { name: 'ens3' }],
    ['name: ens3', { name: 'ens3' }],
    ['ens3', { name: 'ens3' }],
    ['hwAddr:be:44:8c:b0:5d:f2,name:ens3', { hwAddr: 'be:44:8c:b0:5d:f2', name: 'ens3' }],
  ])('%s', (spec, want) => {
    expect(parseInterfaceSpec(spec)).toEqual({ spec: want });
  });
  it('a single parameter becomes a one-element list; repeated ones a longer list', () => {
    const one = cmdlineConfig('harvester.install.management_interface.interfaces="hwAddr:52:54:00:00:00:01"').n;
    expect(one.config.install?.managementInterface?.interfaces).toEqual([{ hwAddr: '52:54:00:00:00:01' }]);
    const two = cmdlineConfig('harvester.install.management_interface.interfaces=ens3 harvester.install.management_interface.interfaces=52:54:00:00:00:02').n;
    expect(two.config.install?.managementInterface?.interfaces).toEqual([{ name: 'ens3' }, { hwAddr: '52:54:00:00:00:02' }]);
  });
});

describe('merge priority (cmdline over file)', () => {
  const file = `${tmp}/base.yaml`;
  writeFileSync(
    file,
    [
      'scheme_version: 1',
      'token: file-token',
      'os:',
      '  password: x',
      '  modules: [nvme_tcp]',
      '  labels: {rack: r1, zone: file-zone}',
      'install:',
      '  mode: create',
      '  device: /dev/sda',
      '  vip: 10.0.0.5',
      '  vip_mode: static',
      '  skipchecks: true',
      '  management_interface:',
      '    interfaces: [{name: ens3}]',
      '    method: dhcp',
      '',
    ].join('\n'),
  );

  it('a non-zero cmdline scalar wins; a zero one (false) cannot override the file', async () => {
    const r = await loadConfig(file, { cmdline: 'harvester.token=cmd-token harvester.install.skipchecks=false harvester.install.device=/dev/nvme0n1' });
    expect(r.config.token).toBe('cmd-token');
    expect(r.config.install?.device).toBe('/dev/nvme0n1');
    expect(r.config.install?.skipchecks).toBe(true);
  });
  it('lists append (cmdline first), and os.modules keeps kvm, vhost_net first', async () => {
    const r = await loadConfig(file, { cmdline: 'harvester.os.modules=br_netfilter harvester.install.management_interface.interfaces=ens4' });
    expect(r.config.os?.modules).toEqual(['kvm', 'vhost_net', 'br_netfilter', 'nvme_tcp']);
    expect(r.config.install?.managementInterface?.interfaces).toEqual([{ name: 'ens4' }, { name: 'ens3' }]);
  });
  it('maps gain keys; existing keys keep the cmdline value', async () => {
    const r = await loadConfig(file, { cmdline: 'harvester.os.labels.zone=cmd-zone harvester.os.labels.row=7' });
    expect(r.config.os?.labels).toEqual({ zone: 'cmd-zone', row: '7', rack: 'r1' });
  });
  it('findings point at the source that set the value', async () => {
    const r = await loadConfig(file, { cmdline: 'harvester.install.vip=10.0.0.999' });
    expect(r.errors).toEqual([expect.objectContaining({ path: 'install.vip', source: '<cmdline>', line: 1, column: 1, message: '10.0.0.999 is not a valid IP address' })]);
  });
  it('reads --cmdline-file and reports an unreadable one as a usage error', async () => {
    const cf = `${tmp}/cmdline`;
    writeFileSync(cf, 'BOOT_IMAGE=x harvester.install.device=/dev/vdb\n');
    const r = await loadConfig(file, { cmdlineFile: cf });
    expect(r.config.install?.device).toBe('/dev/vdb');
    await expect(loadConfig(file, { cmdlineFile: `${tmp}/absent` })).rejects.toMatchObject({ exitCode: 2, message: expect.stringContaining(`cannot read the kernel command line from ${tmp}/absent`) });
  });
  it('with only a command line, validates the command line alone', async () => {
    const r = await loadConfig(undefined, { cmdline: 'harvester.scheme_version=1 harvester.install.mode=install harvester.install.device=/dev/sda' });
    expect(r.source).toBe('<cmdline>');
    expect(r.errors).toEqual([]);
  });
});

describe('keys named like Object.prototype members (the command line comes over the network with PXE)', () => {
  const polluted = () => ['mode', 'device', 'token', 'polluted'].filter((k) => Object.prototype.hasOwnProperty(k) || ({} as Record<string, unknown>)[k] !== undefined);
  const clean = () => {
    for (const k of ['mode', 'device', 'token', 'polluted']) delete (Object.prototype as Record<string, unknown>)[k];
  };

  it('harvester.__proto__.mode=create sets nothing on Object.prototype; the unknown key and the missing mode are still reported', async () => {
    try {
      const r = await loadConfig(undefined, { cmdline: 'harvester.__proto__.mode=create harvester.install.__proto__.device=/dev/sda harvester.scheme_version=1 harvester.install.automatic=true' });
      expect(polluted()).toEqual([]);
      expect(r.warnings).toContainEqual(expect.objectContaining({ path: '__proto__', message: 'unknown key "__proto__": Harvester ignores it' }));
      expect(r.warnings).toContainEqual(expect.objectContaining({ path: 'install.__proto__', message: 'unknown key "__proto__": Harvester ignores it' }));
      expect(r.errors).toContainEqual(expect.objectContaining({ path: 'install.mode', message: 'unknown mode: ' }));
      expect(r.config.install?.mode).toBeUndefined();
      expect(r.config.install?.device).toBeUndefined();
    } finally {
      clean();
    }
  });

  it.each(['constructor', 'prototype', 'toString', 'hasOwnProperty'])('harvester.%s.polluted=1 is an unknown key like any other (not a clash with an inherited member)', (name) => {
    try {
      const { parsed, n } = cmdlineConfig(`harvester.${name}.polluted=1 harvester.install.${name}=x`);
      expect(polluted()).toEqual([]);
      expect(parsed.errors).toEqual([]);
      expect(Object.keys(parsed.raw)).toEqual([name, 'install']);
      expect(n.errors).toEqual([]);
      expect(n.warnings.map((e) => [e.path, e.message])).toEqual([
        [name, `unknown key "${name}": Harvester ignores it`],
        [`install.${name}`, `unknown key "${name}": Harvester ignores it`],
      ]);
    } finally {
      clean();
    }
  });

  it('a repeated harvester.__proto__ becomes a list, not a prototype', () => {
    const { parsed } = cmdlineConfig('harvester.os.__proto__=a harvester.os.__proto__=b');
    expect(Object.getPrototypeOf(parsed.raw.os)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(parsed.raw.os, '__proto__')?.value).toEqual(['a', 'b']);
  });
});

describe('merge with keys named like Object.prototype members', () => {
  it('a file label named constructor or __proto__ keeps its value when the command line adds labels', async () => {
    const file = `${tmp}/proto-labels.yaml`;
    writeFileSync(file, ['scheme_version: 1', 'os:', '  labels: {constructor: file-c, __proto__: file-p}', ''].join('\n'));
    const r = await loadConfig(file, { cmdline: 'harvester.os.labels.rack=r1' });
    const labels = r.config.os?.labels as Record<string, unknown>;
    expect(Object.getPrototypeOf(labels)).toBe(Object.prototype);
    expect(Object.entries(labels)).toEqual([
      ['rack', 'r1'],
      ['constructor', 'file-c'],
      ['__proto__', 'file-p'],
    ]);
  });
});
