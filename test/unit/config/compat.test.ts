/**
 * What Harvester accepts, hvinstall accepts; where Harvester refuses, it refuses with Harvester's
 * words (docs/config.md, the compatibility rule). Cases from Harvester's own installer code and
 * test data (harvester/harvester-installer pkg/console/util_test.go, validator_test.go,
 * webhooks.go, pkg/util/cmdline_test.go, pkg/config/*_test.go and testdata), each written as the
 * operator would write it.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseDocument, isMap, isScalar, type YAMLMap } from 'yaml';
import { serialiseHarvesterConfig } from '../../../config/index.js';
import { formatServerUrl } from '../../../config/server-url.js';
import { check, CREATE, JOIN } from './helpers.js';

const harvesterData = path.resolve(__dirname, '../../fixtures/config/harvester');
const read = (name: string) => readFileSync(path.join(harvesterData, name), 'utf8');

describe('server_url: getFormattedServerURL (pkg/console/util.go), from the text as written', () => {
  // pkg/console/util_test.go TestGetFormattedServerURL, plus the scheme written out.
  it.each([
    ['1.2.3.4', 'https://1.2.3.4:443'],
    ['example.org', 'https://example.org:443'],
    ['https://1.2.3.4', 'https://1.2.3.4:443'],
    ['https://1.2.3.4:443', 'https://1.2.3.4:443'],
  ])('%s -> %s', (input, url) => expect(formatServerUrl(input)).toEqual({ url }));

  it.each([
    ['1.2.3.4:555', 'server url invalid: currently non-443 port are not allowed'],
    ['1.2.3.4/', 'server url invalid: path is not allowed in management address: /'],
    ['https://1.2.3.4/', 'server url invalid: path is not allowed in management address: /'],
    ['abc.org/test/abc', 'server url invalid: path is not allowed in management address: /test/abc'],
    ['https://1.2.3.4:443/', 'server url invalid: path is not allowed in management address: /'],
    ['https://1.2.3.4?x=1', 'server url invalid: a query (?x=1) is not allowed in the management address'],
    ['https://1.2.3.4:44x', 'server url invalid: https://1.2.3.4:44x is invalid'],
  ])('%s is refused: %s', (input, error) => expect(formatServerUrl(input)).toEqual({ error }));

  it('https://1.2.3.4/ in a join config is an error at the key, with what to write', async () => {
    const r = await check(JOIN.replace('server_url: https://10.10.0.20', 'server_url: https://1.2.3.4/'));
    expect(r.valid).toBe(false);
    expect(r.errors).toEqual([
      {
        at: 'config.yaml:2:13',
        key: 'server_url',
        message: 'server url invalid: path is not allowed in management address: /',
        hint: 'write the cluster VIP as https://<vip>:443 (or just the VIP)',
      },
    ]);
  });

  it('https://1.2.3.4 (no path) is accepted and becomes https://1.2.3.4:443', async () => {
    const r = await check(JOIN.replace('server_url: https://10.10.0.20', 'server_url: https://1.2.3.4'));
    expect(r.errors).toEqual([]);
    expect(r.config.serverUrl).toBe('https://1.2.3.4:443');
  });
});

describe('webhooks: prepareWebhook (pkg/console/webhooks.go)', () => {
  const withHook = (hook: string) => `${CREATE}  webhooks:\n${hook}`;

  it.each(['get', 'Post', 'connect', 'TRACE', 'options'])('method %s is accepted (Harvester upper-cases it) and sent upper-cased', async (method) => {
    const r = await check(withHook(`    - event: STARTED\n      method: ${method}\n      url: http://10.0.0.1/hook\n`));
    expect(r.errors).toEqual([]);
    expect(r.warnings).toEqual([]);
    expect(r.config.install?.webhooks?.[0]?.method).toBe(method.toUpperCase());
  });

  it('method PUNCH: Harvester\'s "unknown HTTP method: PUNCH", a warning (Harvester installs without its webhooks)', async () => {
    const r = await check(withHook('    - event: STARTED\n      method: PUNCH\n      url: http://10.0.0.1/hook\n'));
    expect(r.valid).toBe(true);
    expect(r.warnings).toEqual([
      {
        at: 'config.yaml:18:15',
        key: 'install.webhooks[0].method',
        message: 'unknown HTTP method: PUNCH',
        hint: "use one of GET, HEAD, POST, PUT, PATCH, DELETE, CONNECT, OPTIONS, TRACE; Harvester then sends none of this config's webhooks (it logs the error and installs on)",
      },
    ]);
  });

  it('event XXX: Harvester\'s "unknown install event: XXX"', async () => {
    const r = await check(withHook('    - event: XXX\n      method: POST\n      url: http://10.0.0.1/hook\n'));
    expect(r.valid).toBe(true);
    expect(r.warnings).toEqual([expect.objectContaining({ at: 'config.yaml:17:14', key: 'install.webhooks[0].event', message: 'unknown install event: XXX' })]);
  });

  it('a method left out: Harvester upper-cases "" and refuses it, so the webhook is never sent', async () => {
    const r = await check(withHook('    - event: FAILED\n      url: http://10.0.0.1/hook\n'));
    expect(r.valid).toBe(true);
    expect(r.warnings).toEqual([
      {
        at: 'config.yaml:17:7',
        key: 'install.webhooks[0].method',
        message: 'unknown HTTP method: ',
        hint: "set method (e.g. POST); Harvester then sends none of this config's webhooks (it logs the error and installs on)",
      },
    ]);
  });

  it('a template field Harvester does not have renders empty (missingkey=zero): accepted, with a warning naming the near field', async () => {
    const r = await check(withHook('    - event: SUCCEEDED\n      method: POST\n      url: http://10.0.0.1/done/{{ .Hostnam }}\n'));
    expect(r.valid).toBe(true);
    expect(r.warnings).toEqual([
      {
        at: 'config.yaml:19:12',
        key: 'install.webhooks[0].url',
        message: 'webhook url: .Hostnam is not a template field and renders as an empty string',
        hint: 'did you mean .Hostname?',
      },
    ]);
  });
});

describe('/oem/harvester.config as Harvester writes it (yaml.v3: Go field names lowercased)', () => {
  it('loads without an unknown key: externalstorage, kubeovnoperatorchartversion, defaultroute are its keys', async () => {
    // pkg/config/config_test.go Test_NilValues_DirectFromPureYAML. Harvester's own validator refuses
    // this test file for the same reason: it has no password and no SSH key.
    const r = await check(read('oem-harvester.config.yaml'));
    expect(r.errors).toEqual([
      { at: 'config.yaml:7:1', key: 'os.password', message: 'no SSH authorized keys or passwords are set', hint: 'set os.password or os.ssh_authorized_keys so you can log in as rancher' },
    ]);
    expect(r.warnings).toEqual([
      {
        at: 'config.yaml:39:9',
        key: 'install.managementinterface.defaultroute',
        message: 'default_route is ignored by Harvester (its config reader drops it)',
        hint: 'remove it; the default route comes from DHCP or from gateway with the static method',
      },
    ]);
    expect(r.config.kubeovnChartVersion).toBe('1.14.10-dev.1');
    expect(r.config.os?.externalStorageConfig).toEqual({ enabled: false });
    expect(r.config.systemSettings).toEqual({ 'ntp-servers': '{"ntpServers":["0.suse.pool.ntp.org"]}' });
    expect(r.config.install?.managementInterface?.interfaces).toEqual([{ name: 'enp1s0', hwAddr: '52:54:00:6b:16:07' }]);
  });

  it('os.externalstorage and write_files rawfilepermissions carry their values', async () => {
    const text = `${CREATE.replace('  password: rancher\n', '  password: rancher\n  writefiles:\n    - path: /etc/x.conf\n      rawfilepermissions: "0644"\n  externalstorage:\n    enabled: true\n')}kubeovnoperatorchartversion: 1.14.10\n`;
    const r = await check(text);
    expect(r.errors).toEqual([]);
    expect(r.warnings).toEqual([]);
    expect(r.config.os?.externalStorageConfig).toEqual({ enabled: true });
    expect(r.config.os?.writeFiles).toEqual([{ path: '/etc/x.conf', permissions: '0644' }]);
    expect(r.config.kubeovnChartVersion).toBe('1.14.10');
  });

  it('both spellings of one field are one setting twice: an error (Harvester keeps one of them, whichever its map order gives)', async () => {
    const r = await check(CREATE.replace('  password: rancher\n', '  password: rancher\n  externalstorage: {enabled: true}\n  external_storage_config: {enabled: false}\n'));
    expect(r.errors).toEqual([
      expect.objectContaining({ at: 'config.yaml:7:3', key: 'os.external_storage_config', message: 'duplicate key: "external_storage_config" and "externalstorage" are the same setting' }),
    ]);
  });

  it('what hvinstall writes has, in every struct, exactly yaml.v3\'s keys in Go field order', async () => {
    const { $hvinstall: extras, ...structs } = JSON.parse(read('go-structs.json')) as Record<string, string[]> & { $hvinstall: Record<string, string[]> };
    const full = {
      os: { writeFiles: [{ path: '/x' }], sshd: {}, externalStorageConfig: { enabled: true } },
      install: {
        managementInterface: { interfaces: [{ name: 'ens5' }] },
        webhooks: [{ event: 'STARTED', url: 'http://h/' }],
        addons: { rancher_logging: { enabled: true } },
      },
    };
    const doc = parseDocument(await serialiseHarvesterConfig(full));
    const keysOf = (m: unknown): string[] => (m as YAMLMap).items.map((p) => String((p.key as { value: unknown }).value));
    const walk = (node: unknown, struct: string, where: string): void => {
      const fields = [...structs[struct]!, ...(extras[struct] ?? [])];
      expect(isMap(node), where).toBe(true);
      expect(keysOf(node), where).toEqual(fields.map((f) => f.split(':')[0]!.toLowerCase()));
      for (const f of fields) {
        const [name, type] = f.split(':');
        const child = (node as YAMLMap).get(name!.toLowerCase(), true);
        if (type) walk(child, type, `${where}.${name}`);
      }
    };
    walk(doc.contents, 'HarvesterConfig', '');
    const first = (seq: unknown) => (seq as { items: unknown[] }).items[0];
    walk(first(doc.getIn(['os', 'writefiles'], true)), 'File', 'os.writefiles[0]');
    walk(first(doc.getIn(['install', 'managementinterface', 'interfaces'], true)), 'NetworkInterface', 'interfaces[0]');
    walk(first(doc.getIn(['install', 'webhooks'], true)), 'Webhook', 'webhooks[0]');
    walk(doc.getIn(['install', 'addons', 'rancher_logging'], true), 'Addon', 'addons.rancher_logging');
    // Go pointers (the Longhorn CPU settings) and the multipath interface are null when unset; a non-pointer int is 0.
    const lh = doc.getIn(['install', 'harvester', 'longhorn', 'defaultsettings'], true) as YAMLMap;
    expect(lh.items.map((p) => (isScalar(p.value) ? p.value.value : 'not a scalar'))).toEqual([null, null, null, null]);
    expect(doc.getIn(['install', 'harvester', 'storageclass', 'replicacount'])).toBe(0);
    expect(doc.getIn(['os', 'externalstorage', 'multipathconfig'])).toBeNull();
    expect(doc.getIn(['install', 'managementinterface', 'defaultroute'])).toBe(false);
  });
});

describe('empty and legacy keys Harvester ignores', () => {
  it('install.networks: with no value (pkg/config/testdata/userdata.yaml) is a warning, not an error', async () => {
    const r = await check(read('userdata.yaml'), { alreadyInstalled: true });
    expect(r.warnings).toContainEqual({
      at: 'config.yaml:13:3',
      key: 'install.networks',
      message: 'install.networks was replaced by install.management_interface in Harvester v1.1; it is empty here, and ignored',
      hint: 'write install.management_interface: {interfaces: [{name: ens3}], method: dhcp} (see https://docs.harvesterhci.io/v1.1/install/harvester-configuration/#installmanagement_interface)',
    });
    // Harvester's Validate refuses this test file too: it has no scheme_version.
    expect(r.errors.map((e) => e.message)).toEqual(['Unsupported Harvester Scheme Version 0, please use new config and refer https://docs.harvesterhci.io/v1.1/install/harvester-configuration/']);
  });

  it("Harvester's testdata/harvester-config.yaml loads to the values of its TestToHarvesterConfig", async () => {
    const r = await check(read('harvester-config.yaml'));
    expect(r.config).toMatchObject({
      schemeVersion: 1,
      serverUrl: 'https://someserver:6443',
      token: 'TOKEN_VALUE',
      os: {
        sshAuthorizedKeys: ['ssh-rsa AAAAB3NzaC1yc2EAAAADAQAB...', 'github:username'],
        hostname: 'myhost',
        modules: ['kvm', 'vhost_net', 'nvme'],
        sysctls: { 'kernel.printk': '4 4 1 7', 'kernel.kptr_restrict': '1' },
        dnsNameservers: ['8.8.8.8', '1.1.1.1'],
        ntpServers: ['0.us.pool.ntp.org', '1.us.pool.ntp.org'],
        password: 'rancher',
        environment: { http_proxy: 'http://myserver', https_proxy: 'http://myserver' },
      },
      install: {
        mode: 'create',
        managementInterface: { interfaces: [{ name: 'ens0' }, { name: 'ens3' }], method: 'dhcp' },
        forceEfi: true,
        device: '/dev/vda',
        silent: true,
        isoUrl: 'http://myserver/test.iso',
        powerOff: true,
        noFormat: true,
        debug: true,
        tty: 'ttyS0',
      },
    });
    // Harvester's validator refuses it too: a server_url in create mode.
    expect(r.errors.map((e) => e.message)).toContain('ServerURL need to be empty in create mode');
  });

  it('an unknown key is a warning with a did-you-mean: Harvester drops it and installs', async () => {
    const r = await check(CREATE.replace('  hostname: node1', '  hostnme: node1'));
    expect(r.valid).toBe(true);
    expect(r.warnings).toEqual([{ at: 'config.yaml:4:3', key: 'os.hostnme', message: 'unknown key "hostnme": Harvester ignores it', hint: 'did you mean "hostname"?' }]);
  });
});

describe("Harvester's own messages", () => {
  it('install.mode: asdf -> "unknown mode: asdf" (validator_test.go)', async () => {
    const r = await check(CREATE.replace('  mode: create', '  mode: asdf'));
    expect(r.errors).toContainEqual({ at: 'config.yaml:8:9', key: 'install.mode', message: 'unknown mode: asdf', hint: 'use one of create, join, install, upgrade' });
  });

  it.each([
    ['harvester.install.management_interface.interfaces=""', 'empty interface details', 1],
    ['harvester.install.management_interface.interfaces="foo:bar:foobar"', 'could not parse interface details foo:bar:foobar', 1],
    ['quiet harvester.install.management_interface.interfaces="hwAddr: be:4:8c:b0:5d:x2,ens3"', 'could not parse interface details: address be:4:8c:b0:5d:x2: invalid MAC address', 7],
    ['harvester.install.management_interface.interfaces=eth0:1', 'could not parse interface details eth0:1', 1],
  ])('%s -> %s (pkg/util/cmdline_test.go)', async (cmdline, message, column) => {
    const r = await check(CREATE.replace(/  management_interface:\n.*\n.*\n.*\n/, ''), { cmdline });
    expect(r.errors).toContainEqual({
      at: `<cmdline>:1:${column}`,
      key: 'install.management_interface.interfaces',
      message,
      hint: 'write hwAddr:<MAC>, <MAC>, name:<nic> or <nic>, comma-separated for both',
    });
  });

  it('the forms cmdline_test.go accepts give the same interfaces', async () => {
    const cmdline = [
      'harvester.install.management_interface.interfaces="hwAddr: be:44:8c:b0:5d:f2"',
      'harvester.install.management_interface.interfaces="hwAddr:   10:fe:71:05:57:fd"',
      'harvester.install.management_interface.interfaces="ens3"',
      'harvester.install.management_interface.interfaces="name:ens5"',
      'harvester.install.management_interface.interfaces="hwAddr: be:44:8c:b0:5d:f2,ens3,name:ens4"',
    ].join(' ');
    const r = await check(CREATE.replace(/  management_interface:\n.*\n.*\n.*\n/, '  management_interface:\n    method: dhcp\n'), { cmdline });
    expect(r.errors).toEqual([]);
    expect(r.config.install?.managementInterface?.interfaces).toEqual([
      { hwAddr: 'be:44:8c:b0:5d:f2' },
      { hwAddr: '10:fe:71:05:57:fd' },
      { name: 'ens3' },
      { name: 'ens5' },
      { hwAddr: 'be:44:8c:b0:5d:f2', name: 'ens4' },
    ]);
  });
});
