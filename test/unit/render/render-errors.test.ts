/** Decisions and error paths of the renderer: each error names what, where and what to do. */
import { describe, expect, it } from 'vitest';
import { gzipSync } from 'node:zlib';
import { renderNode, renderNodeFiles, placeNodePath, persistentStatePaths, defaultHasDataPartition } from '../../../installer/render/index.js';
import { maskToPrefix } from '../../../installer/render/network.js';
import { harvesterChartValues } from '../../../installer/render/bootstrap-resources.js';
import { reservedMilliCpu, reservedResourcesArgs, supervisorUrl } from '../../../installer/render/rke2.js';
import { renderGrubenv, renderMultipathConf, rke2ProxyEnvironment } from '../../../installer/render/yip.js';
import type { HarvesterConfig } from '../../../config/types.js';
import { HvError } from '../../../lib/errors.js';
import { CASES } from './cases.js';

const base = CASES.find((c) => c.name === 'create-dhcp')!;
const clone = (): HarvesterConfig => structuredClone(base.config);

function errorOf(fn: () => unknown): HvError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(HvError);
    return err as HvError;
  }
  throw new Error('expected an error');
}

describe('network decisions', () => {
  it.each([
    ['255.255.255.0', 24],
    ['255.255.252.0', 22],
    ['255.255.255.255', 32],
    ['0.0.0.0', 0],
  ])('mask %s is /%d', (mask, prefix) => expect(maskToPrefix(mask)).toBe(prefix));

  it.each([['255.0.255.0', /not a contiguous subnet mask/], ['255.255.256.0', /not a valid subnet mask/], ['/24', /not a valid subnet mask/]])('rejects mask %s', (mask, msg) => {
    const err = errorOf(() => maskToPrefix(mask));
    expect(err.message).toMatch(msg);
    expect(err.where).toBe('install.management_interface.subnet_mask');
  });

  it('names the missing NIC and lists what the machine has', () => {
    const c = clone();
    c.install!.managementInterface!.interfaces = [{ hwAddr: 'de:ad:be:ef:00:01' }];
    const err = errorOf(() => renderNodeFiles(c, base.facts, base.seeds));
    expect(err.message).toBe('no interface matching hardware address de:ad:be:ef:00:01 found');
    expect(err.where).toBe('install.management_interface.interfaces[0]');
    expect(err.hint).toContain('eno1 52:54:00:aa:00:01');
  });

  it('refuses a name and a MAC that disagree', () => {
    const c = clone();
    c.install!.managementInterface!.interfaces = [{ name: 'eno1', hwAddr: '52:54:00:aa:00:02' }];
    expect(errorOf(() => renderNodeFiles(c, base.facts, base.seeds)).message).toMatch(/eno1 has hardware address 52:54:00:aa:00:01, not 52:54:00:aa:00:02/);
  });

  it('without NIC facts, a MAC-only slave is matched by MAC alone', () => {
    const c = clone();
    c.install!.managementInterface!.interfaces = [{ hwAddr: '52:54:00:aa:00:09' }];
    const files = renderNodeFiles(c, { cpuCount: 4, nics: [] }, base.seeds);
    const slave = files.find((f) => f.path.endsWith('bond-slave-525400aa0009.nmconnection'))!;
    expect(slave.content).toContain('mac-address=52:54:00:AA:00:09');
    expect(slave.content).not.toContain('interface-name=');
  });

  it('static without gateway is refused', () => {
    const c = clone();
    c.install!.managementInterface = { interfaces: [{ name: 'eno1' }], method: 'static', ip: '10.0.0.2', subnetMask: '255.255.255.0' };
    expect(errorOf(() => renderNodeFiles(c, base.facts, base.seeds)).message).toMatch(/needs ip, subnet_mask and gateway/);
  });
});

describe('RKE2 decisions', () => {
  // Values as Harvester's Go code computes them (float sum, int64 truncation): odd core counts lose the half milli-CPU.
  it.each([
    [1, 460], [2, 470], [4, 480], [5, 482], [8, 490], [9, 492], [64, 630],
  ])('reserved milli-CPU for %d cores is %d', (cores, r) => expect(reservedMilliCpu(cores)).toBe(r));

  it('splits reservations 2:3 of twice R with integer division', () => {
    expect(reservedResourcesArgs(5)).toEqual(['system-reserved=cpu=385m', 'kube-reserved=cpu=578m']);
    expect(reservedResourcesArgs(8)).toEqual(['system-reserved=cpu=392m', 'kube-reserved=cpu=588m']);
    expect(reservedMilliCpu(0)).toBe(0);
  });

  it('join nodes register with the supervisor port of the server URL host', () => {
    expect(supervisorUrl('https://192.168.1.100:443')).toBe('https://192.168.1.100:9345');
    expect(supervisorUrl('https://harvester.example.com')).toBe('https://harvester.example.com:9345');
    expect(errorOf(() => supervisorUrl('not a url')).where).toBe('server_url');
  });

  it('join without server_url and nodes without token are refused', () => {
    const join = structuredClone(CASES.find((c) => c.name === 'join')!.config);
    delete join.serverUrl;
    expect(errorOf(() => renderNodeFiles(join, base.facts, base.seeds)).message).toBe('server_url is required in join mode');
    const c = clone();
    delete c.token;
    expect(errorOf(() => renderNodeFiles(c, base.facts, base.seeds)).where).toBe('token');
  });

  it('a non-integer CPU count is a usage error', () => {
    expect(errorOf(() => renderNodeFiles(clone(), { ...base.facts, cpuCount: 0 }, base.seeds)).where).toBe('facts.cpuCount');
  });
});

describe('kube-vip decisions', () => {
  it('vip_mode none renders no manifest; dhcp needs the leased VIP and its MAC', () => {
    const none = clone();
    none.install!.vipMode = 'none';
    expect(renderNodeFiles(none, base.facts, base.seeds).some((f) => f.path.includes('kube-vip'))).toBe(false);
    const dhcp = clone();
    dhcp.install!.vipMode = 'dhcp';
    dhcp.install!.vip = '';
    expect(errorOf(() => renderNodeFiles(dhcp, base.facts, base.seeds)).message).toMatch(/VIP obtained by DHCP must be in install.vip/);
    dhcp.install!.vip = '10.0.0.5';
    dhcp.install!.vipHwAddr = 'zz';
    expect(errorOf(() => renderNodeFiles(dhcp, base.facts, base.seeds)).where).toBe('install.vip_hw_addr');
  });

  it('renders the manifest for a promoted join node from the VIP it is given', async () => {
    const join = CASES.find((c) => c.name === 'join')!;
    const { renderKubeVipManifest } = await import('../../../installer/render/index.js');
    expect(() => renderKubeVipManifest(join.config)).toThrow(/is not a valid IP address/);
    expect(renderKubeVipManifest(join.config, { vip: '192.168.122.100' })).toMatch(/name: address\n\s+value: 192\.168\.122\.100/);
  });

  it('binds the VIP to the VLAN interface when the management network is tagged', () => {
    const vlan = CASES.find((c) => c.name === 'create-vlan-bond-mtu')!;
    const manifest = String(renderNodeFiles(vlan.config, vlan.facts, vlan.seeds).find((f) => f.path.endsWith('kube-vip.yaml'))!.content);
    expect(manifest).toMatch(/name: vip_interface\n\s+value: mgmt-br\.100/);
  });
});

describe('yip decisions', () => {
  it('checks encoded write_files content at render time', () => {
    const c = clone();
    c.os!.writeFiles = [{ path: '/etc/x', content: 'not base64!!', encoding: 'b64' }];
    expect(errorOf(() => renderNodeFiles(c, base.facts, base.seeds))).toMatchObject({ message: 'content is not valid base64', where: 'os.write_files[0].content' });
    c.os!.writeFiles = [{ path: '/etc/x', content: Buffer.from('plain').toString('base64'), encoding: 'gz+b64' }];
    expect(errorOf(() => renderNodeFiles(c, base.facts, base.seeds)).message).toMatch(/does not gunzip/);
    c.os!.writeFiles = [{ path: '/etc/x', content: 'x', encoding: 'rot13' }];
    expect(errorOf(() => renderNodeFiles(c, base.facts, base.seeds)).message).toBe('unknown encoding "rot13"');
    c.os!.writeFiles = [{ path: 'relative', content: 'x' }];
    expect(errorOf(() => renderNodeFiles(c, base.facts, base.seeds)).where).toBe('os.write_files[0].path');
    c.os!.writeFiles = [{ path: '/etc/ok', content: gzipSync('hi').toString('base64'), encoding: 'GZIP+BASE64', permissions: '755' }];
    const yip = String(renderNodeFiles(c, base.facts, base.seeds).find((f) => f.path === '/oem/90_custom.yaml')!.content);
    expect(yip).toMatch(/path: \/etc\/ok\n\s+permissions: 493\n/);
    expect(yip).toMatch(/encoding: gzip\+base64/);
  });

  it('gives RKE2 the proxy (either case) with the cluster CIDRs in NO_PROXY, and refuses shell-breaking values', () => {
    const c = clone();
    c.os!.environment = { HTTPS_PROXY: 'http://p:3128' };
    expect(rke2ProxyEnvironment(c)).toBe('HTTPS_PROXY=http://p:3128\nNO_PROXY=127.0.0.1,localhost,10.52.0.0/16,10.53.0.0/16,.svc,.cluster.local\n');
    c.os!.environment = { LANG: 'C' };
    expect(rke2ProxyEnvironment(c)).toBeUndefined();
    c.os!.environment = { http_proxy: 'http://p:3128"; rm -rf /' };
    expect(errorOf(() => renderNodeFiles(c, base.facts, base.seeds)).message).toMatch(/proxy setting "HTTP_PROXY" contains a quote/);
  });

  it('warns when a user sysctl fights the forced IPv6 enablement', () => {
    const c = clone();
    c.os!.sysctls = { 'net.ipv6.conf.default.disable_ipv6': '1' };
    expect(renderNode(c, base.facts, base.seeds).warnings).toEqual(['os.sysctls.net.ipv6.conf.default.disable_ipv6: Harvester forces net.ipv6.conf.default.disable_ipv6=0; "1" is ignored']);
  });

  it('renders the option-1 multipath shape as negated blacklist entries', () => {
    expect(renderMultipathConf([{ vendor: 'DELL', product: 'MD32xx' }])).toBe('blacklist {\n    device {\n        vendor "!DELL"\n        product "!MD32xx"\n    }\n}\n');
    expect(renderMultipathConf({ blacklistWwids: ['.*'] })).toBe('blacklist {\n    wwid ".*"\n}\nblacklist_exceptions {\n}\n');
  });

  it('refuses kernel arguments that overflow the 1024-byte grubenv', () => {
    expect(renderGrubenv({ a: 'b' }).length).toBe(1024);
    expect(errorOf(() => renderGrubenv({ third_party_kernel_args: 'x'.repeat(1100) })).hint).toBe('shorten the extra kernel arguments');
  });

  it('refuses unknown modes', () => {
    const c = clone();
    c.install!.mode = 'upgrade';
    expect(errorOf(() => renderNodeFiles(c, base.facts, base.seeds)).message).toBe('cannot render a node for install mode "upgrade"');
  });

  it('mode install (binaries only) renders the OS part without network or cluster files, and needs no token', () => {
    const c = clone();
    c.install!.mode = 'install';
    delete c.token;
    c.systemSettings = { 'containerd-registry': '{"Mirrors":{}}' };
    expect(renderNodeFiles(c, base.facts, base.seeds).map((f) => f.path)).toEqual([
      '/oem/90_custom.yaml', '/oem/grubcustom', '/oem/grubenv', '/oem/harvester.config', '/oem/hvinstall/config.json', '/oem/hvinstall/render-seeds.json',
    ]);
  });
});

describe('hostname and seeds', () => {
  it('a given hostname wins; DHCP is used unless it is the live ISO default; else one is generated from the seed', () => {
    const c = clone();
    expect(renderNode(c, { ...base.facts, dhcpHostname: 'from-dhcp' }, base.seeds).hostname).toEqual({ name: 'from-dhcp', source: 'dhcp' });
    expect(renderNode(c, { ...base.facts, dhcpHostname: 'rancher' }, base.seeds).hostname.source).toBe('generated');
    expect(renderNode(c, base.facts, { hostnameSuffix: 'ab12c' }).hostname.name).toBe('harvester-ab12c');
    c.os!.hostname = 'given';
    expect(renderNode(c, { ...base.facts, dhcpHostname: 'from-dhcp' }, base.seeds).hostname).toEqual({ name: 'given', source: 'config' });
  });

  it('different seeds give different salts and hostnames; no seed is derived from the input', () => {
    const a = renderNode(clone(), base.facts, { seed: 'one' });
    const b = renderNode(clone(), base.facts, { seed: 'two' });
    expect(a.seeds.passwordSalt).not.toBe(b.seeds.passwordSalt);
    expect(a.hostname.name).not.toBe(b.hostname.name);
    expect(renderNode(clone(), base.facts).seeds).toEqual(renderNode(clone(), base.facts).seeds);
  });

  it('rejects malformed explicit seeds', () => {
    expect(errorOf(() => renderNode(clone(), base.facts, { hostnameSuffix: 'UPPER' })).where).toBe('seeds.hostnameSuffix');
    expect(errorOf(() => renderNode(clone(), base.facts, { passwordSalt: 'has$dollar' })).where).toBe('seeds.passwordSalt');
  });
});

describe('Harvester chart values', () => {
  it("clamps replicas to 3, instance-manager CPU to 12 and reserved storage to 30, as Harvester's setConfigDefaultValues does", () => {
    const c = clone();
    c.install!.harvester = { storageClass: { replicaCount: 7 }, longhorn: { defaultSettings: { guaranteedInstanceManagerCPU: 40, storageReservedPercentageForDefaultDisk: 99 } } };
    const v = harvesterChartValues(c) as { storageClass: unknown; longhorn: { defaultSettings: Record<string, unknown> } };
    expect(v.storageClass).toEqual({ replicaCount: 3 });
    expect(v.longhorn.defaultSettings).toMatchObject({ guaranteedInstanceManagerCPU: 12, storageReservedPercentageForDefaultDisk: '30', defaultDataPath: '/var/lib/harvester/defaultdisk' });
  });

  it('leaves replicas to the chart at 0, omits an unset instance-manager CPU, and passes the reserved storage as "0" by default', () => {
    const c = clone();
    c.install!.harvester = { storageClass: { replicaCount: 0 } };
    const z = harvesterChartValues(c) as Record<string, { defaultSettings?: Record<string, unknown> }>;
    expect(z.storageClass).toBeUndefined();
    expect(z.longhorn!.defaultSettings).not.toHaveProperty('guaranteedInstanceManagerCPU');
    expect(z.longhorn!.defaultSettings!.storageReservedPercentageForDefaultDisk).toBe('0');
    expect(z['harvester-node-disk-manager']).toEqual({ enabled: true, image: { pullPolicy: 'IfNotPresent' }, labelFilter: ['COS_*', 'HARV_*'] });
    // The chart's kube-vip DaemonSet owns the VIP when rancherd bootstraps Harvester.
    expect(z['kube-vip']).toEqual({ enabled: true });
  });
});

describe('layout and placement', () => {
  it('has no data partition for witnesses and MBR without a data disk', () => {
    const c = clone();
    expect(defaultHasDataPartition(c)).toBe(true);
    c.install!.forceMbr = true;
    expect(defaultHasDataPartition(c)).toBe(false);
    c.install!.dataDisk = '/dev/sdb';
    expect(defaultHasDataPartition(c)).toBe(true);
    c.install!.role = 'witness';
    expect(defaultHasDataPartition(c)).toBe(false);
  });

  it('places every rendered file on COS_OEM or in a persistent bind directory', () => {
    for (const k of CASES) {
      const paths = persistentStatePaths(k.config, true);
      for (const f of renderNodeFiles(k.config, k.facts, k.seeds)) expect(placeNodePath(f.path, paths).partition, f.path).not.toBe('none');
    }
    expect(placeNodePath('/etc/rancher/rke2/registries.yaml', persistentStatePaths(clone(), true))).toEqual({ partition: 'COS_PERSISTENT', relPath: '.state/etc-rancher.bind/rke2/registries.yaml' });
    expect(placeNodePath('/etc/motd', persistentStatePaths(clone(), true)).partition).toBe('none');
  });
});
