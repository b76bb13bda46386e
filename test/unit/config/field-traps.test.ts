/**
 * The field's configuration traps, each from the config text an operator writes: file:line:col,
 * the key, what is wrong and what to do. Errors where the install comes up broken, warnings where
 * it may, or breaks later (docs/config.md).
 */
import { describe, expect, it } from 'vitest';
import { check, CREATE, JOIN } from './helpers.js';

const STATIC = `scheme_version: 1
token: token-rancher-123
os:
  hostname: node1
  password: rancher
  ntp_servers: [10.20.0.2]
  dns_nameservers: [10.20.0.53]
install:
  mode: create
  device: /dev/sda
  vip: 10.20.0.5
  vip_mode: static
  management_interface:
    interfaces:
      - name: ens5
    method: static
    ip: 10.20.0.10
    subnet_mask: 255.255.255.0
    gateway: 10.20.0.1
`;

describe('DNS', () => {
  it('an internal and a public resolver together: a warning naming both (CoreDNS picks one at random)', async () => {
    const r = await check(STATIC.replace('dns_nameservers: [10.20.0.53]', 'dns_nameservers: [10.20.0.53, 8.8.8.8]'));
    expect(r.valid).toBe(true);
    expect(r.warnings).toEqual([
      {
        at: 'config.yaml:7:20',
        key: 'os.dns_nameservers',
        message: 'dns_nameservers mixes internal (10.20.0.53) and public (8.8.8.8) resolvers: CoreDNS asks one of them at random, so internal names resolve only some of the time',
        hint: 'list only the internal resolvers (let them forward to the internet), or only public ones when the cluster needs no internal name',
      },
    ]);
  });

  it('only internal, or only public, resolvers: no finding', async () => {
    expect((await check(STATIC.replace('[10.20.0.53]', '[10.20.0.53, 192.168.1.53]'))).warnings).toEqual([]);
    expect((await check(STATIC.replace('[10.20.0.53]', '[1.1.1.1, 8.8.8.8]'))).warnings).toEqual([]);
  });
});

describe('addresses', () => {
  it('the default pod CIDR 10.52.0.0/16 over a management subnet 10.52.3.0/24: an error at the address, naming the default', async () => {
    const text = STATIC.replace(/10\.20\.0\./g, '10.52.3.');
    const r = await check(text);
    expect(r.valid).toBe(false);
    expect(r.errors).toEqual([{
      at: 'config.yaml:17:9',
      key: 'install.management_interface.ip',
      message: 'cluster_pod_cidr (default 10.52.0.0/16) overlaps the management subnet 10.52.3.0/24, the gateway 10.52.3.1, the VIP 10.52.3.5, the DNS server 10.52.3.53: the node would send that traffic into the cluster network instead of the LAN',
      hint: "choose cluster_pod_cidr outside the site's networks (e.g. 172.30.0.0/16), the same in every node's config",
    }]);
  });

  it('a stated service CIDR holding a DNS server and the VIP: errors at cluster_service_cidr', async () => {
    const r = await check(`${STATIC}  cluster_service_cidr: 10.20.0.0/16\n  cluster_dns: 10.20.0.10\n`);
    expect(r.errors).toEqual([
      {
        at: 'config.yaml:20:25',
        key: 'install.cluster_service_cidr',
        message: 'cluster_service_cidr 10.20.0.0/16 overlaps the management subnet 10.20.0.0/24, the gateway 10.20.0.1, the VIP 10.20.0.5, the DNS server 10.20.0.53: the node would send that traffic into the cluster network instead of the LAN',
        hint: "choose cluster_service_cidr outside the site's networks (e.g. 172.30.0.0/16), the same in every node's config",
      },
    ]);
  });

  it('pod and service CIDRs that overlap each other: an error', async () => {
    const r = await check(`${CREATE}  cluster_pod_cidr: 10.52.0.0/15\n`);
    expect(r.errors).toEqual([
      expect.objectContaining({ at: 'config.yaml:16:21', key: 'install.cluster_pod_cidr', message: 'cluster_pod_cidr 10.52.0.0/15 overlaps cluster_service_cidr (default) 10.53.0.0/16: services and pods would share addresses' }),
    ]);
  });

  it('a join node that leaves the CIDRs to the cluster gets a warning only: the cluster may not use the defaults', async () => {
    const r = await check(JOIN.replace('https://10.10.0.20', 'https://10.53.0.20'));
    expect(r.valid).toBe(true);
    expect(r.warnings).toContainEqual(expect.objectContaining({ at: 'config.yaml:2:13', key: 'server_url', message: expect.stringMatching(/^cluster_service_cidr \(default 10\.53\.0\.0\/16\) overlaps the server_url address 10\.53\.0\.20: .*, if the cluster uses the default$/) }));
  });

  it("management on 10.0.2.0/24, KubeVirt's masquerade network: a warning (the install works, upgrades stall)", async () => {
    const r = await check(STATIC.replace(/10\.20\.0\./g, '10.0.2.'));
    expect(r.valid).toBe(true);
    expect(r.warnings).toContainEqual({
      at: 'config.yaml:17:9',
      key: 'install.management_interface.ip',
      message: "the management network overlaps 10.0.2.0/24, KubeVirt's masquerade network inside every VM pod: the install works, upgrades stall (the upgrade repository VM is unreachable)",
      hint: 'use another management subnet if you can',
    });
  });

  it('a VIP inside the DHCP pool the operator names: an error; outside it: none', async () => {
    const text = CREATE.replace('vip: 10.10.0.20', 'vip: 10.10.0.150');
    const r = await check(text, { dhcpRanges: [{ first: '10.10.0.100', last: '10.10.0.200' }] });
    expect(r.errors).toEqual([
      {
        at: 'config.yaml:10:8',
        key: 'install.vip',
        message: 'the VIP 10.10.0.150 is inside the DHCP pool 10.10.0.100-10.10.0.200: the DHCP server will lease it to another machine',
        hint: 'choose an address outside the pool, or exclude it from the pool (a reservation)',
      },
    ]);
    expect((await check(text, { dhcpRanges: [{ first: '10.10.0.151', last: '10.10.0.200' }] })).errors).toEqual([]);
  });

  it('a VIP on the gateway: an error; outside the static subnet: a warning', async () => {
    const onGateway = await check(STATIC.replace('vip: 10.20.0.5', 'vip: 10.20.0.1'));
    expect(onGateway.errors).toEqual([expect.objectContaining({ at: 'config.yaml:11:8', key: 'install.vip', message: "the VIP 10.20.0.1 is the gateway's address: two hosts would answer ARP for it" })]);
    const outside = await check(STATIC.replace('vip: 10.20.0.5', 'vip: 10.21.0.5'));
    expect(outside.errors).toEqual([]);
    expect(outside.warnings).toEqual([expect.objectContaining({ at: 'config.yaml:11:8', key: 'install.vip', message: expect.stringMatching(/^the VIP 10\.21\.0\.5 is outside the management subnet 10\.20\.0\.0\/24/) })]);
  });

  it('a fully qualified hostname: a warning with the short name to use', async () => {
    const r = await check(CREATE.replace('hostname: node1', 'hostname: node1.dc1.example.com'));
    expect(r.valid).toBe(true);
    expect(r.warnings).toEqual([
      {
        at: 'config.yaml:4:13',
        key: 'os.hostname',
        message: 'node1.dc1.example.com is a fully qualified name: Harvester releases before v1.6 register such a node twice (as node1 and as node1.dc1.example.com) and never finish setting it up',
        hint: 'use the short name node1 unless the image is v1.6 or later; the domain belongs in DNS',
      },
    ]);
  });
});

describe('hostname advice', () => {
  it('an invalid dotted name gets its error, not a short name to use that is invalid too (HV_Prod)', async () => {
    const r = await check(CREATE.replace('hostname: node1', 'hostname: HV_Prod.example.com'));
    expect(r.valid).toBe(false);
    expect(r.errors.map((e) => e.key)).toEqual(['os.hostname']);
    expect(r.warnings.filter((w) => w.key === 'os.hostname')).toEqual([]);
    expect(JSON.stringify(r)).not.toContain('use the short name HV_Prod');
  });
});

describe('NTP', () => {
  it('no ntp_servers is not silently a public pool: a warning at os', async () => {
    const r = await check(CREATE.replace('  ntp_servers: [10.10.0.2]\n', ''));
    expect(r.valid).toBe(true);
    expect(r.warnings).toEqual([
      {
        at: 'config.yaml:3:1',
        key: 'os.ntp_servers',
        message: 'no ntp_servers: the node uses systemd-timesyncd\'s built-in public pool, which an isolated network cannot reach; a wrong clock makes joins fail ("certificate is not yet valid")',
        hint: "set os.ntp_servers to the site's NTP servers (hvinstall preflight --config checks that they answer)",
      },
    ]);
  });
});

describe('proxy: no_proxy gets what the node must reach directly, and says so', () => {
  const proxied = (env: string) => STATIC.replace('  dns_nameservers: [10.20.0.53]\n', `  dns_nameservers: [10.20.0.53]\n  environment:\n${env}`);

  it('http_proxy without no_proxy: no_proxy is added with the management subnet and the VIP', async () => {
    const r = await check(proxied('    http_proxy: http://proxy.example.com:3128\n'));
    expect(r.valid).toBe(true);
    expect(r.config.os?.environment).toEqual({ http_proxy: 'http://proxy.example.com:3128', no_proxy: '10.20.0.0/24,10.20.0.5' });
    expect(r.warnings).toEqual([
      {
        at: 'config.yaml:9:5',
        key: 'os.environment',
        message: 'no_proxy lacks the management subnet 10.20.0.0/24, the VIP 10.20.0.5: added to what the node gets, so it reaches them directly and not through the proxy',
        hint: 'add 10.20.0.0/24,10.20.0.5 to no_proxy in os.environment yourself to keep the file and the node the same',
      },
    ]);
  });

  it('a NO_PROXY that misses the VIP keeps its entries and gains the VIP; a covering CIDR counts', async () => {
    const r = await check(proxied('    HTTPS_PROXY: http://proxy:3128\n    NO_PROXY: localhost,10.20.0.0/16\n'));
    expect(r.config.os?.environment?.NO_PROXY).toBe('localhost,10.20.0.0/16');
    expect(r.warnings).toEqual([]);
    const missing = await check(proxied('    HTTPS_PROXY: http://proxy:3128\n    NO_PROXY: localhost,10.20.0.5\n'));
    expect(missing.config.os?.environment?.NO_PROXY).toBe('localhost,10.20.0.5,10.20.0.0/24');
    expect(missing.warnings).toEqual([expect.objectContaining({ at: 'config.yaml:10:15', key: 'os.environment.NO_PROXY', message: expect.stringMatching(/^NO_PROXY lacks the management subnet 10\.20\.0\.0\/24: added/) })]);
  });

  it('a join node: the server_url host; a domain entry covers its subdomains', async () => {
    const join = JOIN.replace('server_url: https://10.10.0.20', 'server_url: https://vip.dc1.example.com').replace('  ntp_servers: [10.10.0.2]\n', '  ntp_servers: [10.10.0.2]\n  environment:\n    http_proxy: http://proxy:3128\n    no_proxy: .example.com\n');
    expect((await check(join)).warnings.filter((w) => w.key.startsWith('os.environment.no_proxy'))).toEqual([]);
    const r = await check(join.replace('no_proxy: .example.com', 'no_proxy: localhost'));
    expect(r.config.os?.environment?.no_proxy).toBe('localhost,vip.dc1.example.com');
  });

  it("the http-proxy setting's noProxy is completed too (create mode)", async () => {
    const r = await check(`${STATIC}system_settings:\n  http-proxy: '{"httpProxy":"http://proxy:3128","noProxy":"localhost"}'\n`);
    expect(JSON.parse(r.config.systemSettings!['http-proxy']!)).toEqual({ httpProxy: 'http://proxy:3128', noProxy: 'localhost,10.20.0.0/24,10.20.0.5' });
    expect(r.warnings).toEqual([expect.objectContaining({ at: 'config.yaml:21:15', key: 'system_settings.http-proxy' })]);
  });

  it('with DHCP the subnet cannot be known: a warning says to add it', async () => {
    const r = await check(CREATE.replace('  ntp_servers: [10.10.0.2]\n', '  ntp_servers: [10.10.0.2]\n  environment: {http_proxy: "http://proxy:3128", no_proxy: 10.10.0.20}\n'));
    expect(r.warnings).toEqual([
      {
        at: 'config.yaml:7:16',
        key: 'os.environment',
        message: 'with the DHCP method the management subnet is not known before the install, so it cannot be added to no_proxy',
        hint: "add the management network's CIDR to no_proxy in os.environment",
      },
    ]);
  });
});
