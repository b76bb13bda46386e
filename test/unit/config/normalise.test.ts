/** What the valid fixtures normalise to: spellings, coercions, server_url, defaults, round trip. */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig, serialiseHarvesterConfig, validateConfig } from '../../../config/index.js';
import { toSnakeCase, spellingsOf } from '../../../config/spellings.js';
import { fieldTree } from '../../../config/generated/harvester-config.fields.js';
import { formatServerUrl } from '../../../config/server-url.js';
import { parse } from 'yaml';

const fx = (p: string) => path.resolve(__dirname, '../../fixtures/config', p);

describe('spellings', () => {
  it('snake_case follows Go convert.ToYAMLKey', () => {
    expect(toSnakeCase('serverUrl')).toBe('server_url');
    expect(toSnakeCase('vipHwAddr')).toBe('vip_hw_addr');
    expect(toSnakeCase('guaranteedInstanceManagerCPU')).toBe('guaranteed_instance_manager_cpu');
    expect(toSnakeCase('skipchecks')).toBe('skipchecks');
  });
  it('accepts camelCase, snake_case, lowercase and singular forms, nothing else', () => {
    const os = spellingsOf(fieldTree.f!.os);
    for (const s of ['dnsNameservers', 'dns_nameservers', 'dnsnameservers', 'dns_nameserver', 'dnsNameserver', 'dnsnameserver']) expect(os.get(s)).toBe('dnsNameservers');
    expect(os.get('DNS_NAMESERVERS')).toBeUndefined();
    expect(os.get('sysctl')).toBe('sysctls');
    expect(os.get('ssh_authorized_key')).toBe('sshAuthorizedKeys');
  });
});

describe('normalised fixtures', () => {
  it('coercions: strings to bool/int, scalar to list, map values to strings, lowercased modes', async () => {
    const r = await loadConfig(fx('valid/coercions.yaml'));
    expect(r.errors).toEqual([]);
    expect(r.config.schemeVersion).toBe(1);
    expect(r.config.token).toBe('123456');
    expect(r.config.os?.sshAuthorizedKeys).toEqual(['github:octocat']);
    expect(r.config.os?.sysctls).toEqual({ 'net.ipv4.ip_forward': '1', 'kernel.panic': '10' });
    expect(r.config.install?.automatic).toBe(true);
    expect(r.config.install?.skipchecks).toBe(true);
    expect(r.config.install?.managementInterface).toMatchObject({ method: 'dhcp', mtu: 1500, vlanId: 0 });
    expect(r.config.install?.vipMode).toBe('static');
    expect(r.config.install?.harvester?.storageClass?.replicaCount).toBe(2);
  });
  it('singular forms and the v1.0 bond_option spelling of bond_options', async () => {
    const r = await loadConfig(fx('valid/join-singular-forms.yaml'));
    expect(r.errors).toEqual([]);
    expect(r.config.os).toMatchObject({ dnsNameservers: ['10.0.0.1'], ntpServers: ['ntp.example.com'], sysctls: { 'vm.swappiness': '10' }, labels: { 'topology.kubernetes.io/zone': 'zone-a' } });
    expect(r.config.os?.modules).toEqual(['kvm', 'vhost_net', 'br_netfilter']);
    expect(r.config.install?.managementInterface?.bondOptions).toEqual({ mode: 'active-backup' });
    expect(r.config.serverUrl).toBe('https://10.0.0.10:443');
  });
  it('the kernel command line alone can carry a whole config', async () => {
    const r = await loadConfig(undefined, { cmdline: readFileSync(fx('valid/cmdline-only.cmdline'), 'utf8') });
    expect(r.errors).toEqual([]);
    expect(r.config.install?.managementInterface?.interfaces).toEqual([{ name: 'ens3' }, { hwAddr: '52:54:00:aa:bb:cc' }]);
    expect(r.config.install?.managementInterface?.bondOptions).toEqual({ mode: 'balance-tlb' });
    expect(r.config.os?.labels).toEqual({ 'topology.kubernetes.io/zone': 'zone-a' });
    expect(r.config.install?.powerOff).toBe(true);
  });
  it('multipath option 1 (a list) and option 2 (the blacklist shape) both normalise', async () => {
    const one = await loadConfig(fx('valid/external-storage-option1.yaml'));
    expect(one.config.os?.externalStorageConfig).toEqual({ enabled: true, multiPathConfig: [{ vendor: 'DELL', product: 'MD36xxi' }] });
    const two = await loadConfig(fx('valid/external-storage-option2.yaml'));
    expect(two.config.os?.externalStorageConfig?.multiPathConfig).toEqual({
      blacklist: [{ vendor: 'IET', product: 'VIRTUAL-DISK' }],
      blacklistWwids: ['3600a098038304333'],
      blacklistExceptions: [{ vendor: 'NETAPP' }],
    });
  });
  it('defaults: data_disk equal to device is dropped with a warning; force_gpt follows force_mbr', async () => {
    const r = await validateConfig({ ...parse(readFileSync(fx('valid/create-dhcp-snake.yaml'), 'utf8')), install: { ...parse(readFileSync(fx('valid/create-dhcp-snake.yaml'), 'utf8')).install, data_disk: '/dev/sda', force_mbr: true } });
    expect(r.warnings.map((w) => w.message)).toContain('data_disk is the same disk as device and is ignored');
    expect(r.config.install?.dataDisk).toBeUndefined();
    expect(r.config.install?.forceGpt).toBe(false);
  });
});

describe('server_url normalisation (getFormattedServerURL)', () => {
  it.each([
    ['10.0.0.10', 'https://10.0.0.10:443'],
    [' https://vip.example.com ', 'https://vip.example.com:443'],
    ['https://10.0.0.10:443', 'https://10.0.0.10:443'],
  ])('%s -> %s', (input, want) => expect(formatServerUrl(input)).toEqual({ url: want }));
  it.each([
    ['https://10.0.0.10:6443', 'server url invalid: currently non-443 port are not allowed'],
    ['https://10.0.0.10/v3', 'server url invalid: path is not allowed in management address: /v3'],
    ['http://10.0.0.10', 'server url invalid: http:// is not supported, the management address is https://<vip>:443'],
    ['https://10.0.0.10:443/', 'server url invalid: path is not allowed in management address: /'],
    ['https://under_score', 'server url invalid: https://under_score is not a valid ip/domain'],
  ])('%s -> %s', (input, want) => expect(formatServerUrl(input)).toEqual({ error: want }));
});

describe('serialise -> load round trip', () => {
  it('the 150-line config survives /oem/harvester.config and back', async () => {
    const r = await loadConfig(fx('valid/bench-150-lines.yaml'));
    expect(r.errors).toEqual([]);
    const text = await serialiseHarvesterConfig(r.config);
    expect(text).toMatch(/^schemeversion: 1\nserverurl: ""\ntoken: /);
    expect(text).toContain('\n    managementinterface:\n        interfaces:\n            - name: ens1f0\n');
    // yaml.v3 writes the Go field name RawFilePermissions, not the json tag (go-yaml/yaml yaml.go getStructInfo).
    expect(text).toContain('rawfilepermissions: "0644"');
    const back = await validateConfig(parse(text), { source: 'harvester.config' });
    expect(back.errors).toEqual([]);
    expect(back.config).toEqual(expect.objectContaining({ token: r.config.token, os: expect.objectContaining({ labels: r.config.os?.labels, writeFiles: r.config.os?.writeFiles }) }));
    expect(back.config.install?.managementInterface).toEqual(expect.objectContaining(r.config.install?.managementInterface));
    expect(back.config.install?.webhooks).toEqual(r.config.install?.webhooks?.map((w) => ({ insecure: false, headers: {}, payload: '', method: '', basicAuth: { user: '', password: '' }, ...w })).map((w) => stripEmpty(w)));
  });
});

function stripEmpty(w: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(w)) {
    if (v === '' || (v && typeof v === 'object' && Object.keys(v).length === 0)) continue;
    if (k === 'basicAuth' && v && typeof v === 'object') {
      const b = Object.fromEntries(Object.entries(v).filter(([, x]) => x !== ''));
      if (Object.keys(b).length) out[k] = b;
      continue;
    }
    out[k] = v;
  }
  return out;
}
