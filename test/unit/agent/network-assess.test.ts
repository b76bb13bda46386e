import { describe, expect, it } from 'vitest';
import { assessNetwork, bondLinkFailures, parseDhcpLease, parseResolvConf, type IpLink, type NetworkFacts, type NetworkWant } from '../../../agent/network/assess.js';
import { networkWant } from '../../../agent/guards/network-online.js';

const UP = ['BROADCAST', 'MULTICAST', 'UP', 'LOWER_UP'];
const NOCARRIER = ['NO-CARRIER', 'BROADCAST', 'MULTICAST', 'UP'];

function slave(name: string, state: string, mii: string, flags = UP): IpLink {
  return { ifname: name, flags, operstate: flags === UP ? 'UP' : 'DOWN', master: 'mgmt-bo', linkinfo: { info_slave_kind: 'bond', info_slave_data: { state, mii_status: mii, link_failure_count: 0 } } };
}

function facts(over: Partial<NetworkFacts> = {}): NetworkFacts {
  return {
    links: [
      { ifname: 'mgmt-br', flags: UP, operstate: 'UP', linkinfo: { info_kind: 'bridge' } },
      { ifname: 'mgmt-bo', flags: [...UP, 'MASTER'], operstate: 'UP', master: 'mgmt-br', linkinfo: { info_kind: 'bond' } },
      slave('ens3', 'ACTIVE', 'UP'),
      slave('ens4', 'BACKUP', 'UP'),
    ],
    addrs: [{ ifname: 'mgmt-br', addr_info: [{ family: 'inet', local: '10.0.0.5', prefixlen: 24, scope: 'global' }] }],
    defaultRoutes: [{ dst: 'default', gateway: '10.0.0.1', dev: 'mgmt-br' }],
    nameservers: [],
    ...over,
  };
}

const want: NetworkWant = { iface: 'mgmt-br', bridge: 'mgmt-br', bond: 'mgmt-bo', expectedSlaves: 2, method: 'dhcp', dnsServers: [], requireDns: false };

describe('assessNetwork', () => {
  it('is online with an active slave, carrier, an address and a default route', () => {
    expect(assessNetwork(facts(), want)).toEqual({ online: true, detail: 'mgmt-br 10.0.0.5/24, default via 10.0.0.1, bond mgmt-bo 1/2 slaves active' });
  });

  it('names the bond when no slave is active, with each slave\'s problem', () => {
    const f = facts();
    f.links = [f.links[0]!, { ...f.links[1]!, flags: NOCARRIER }, slave('ens3', 'BACKUP', 'DOWN', NOCARRIER), slave('ens4', 'BACKUP', 'UP')];
    expect(assessNetwork(f, want)).toEqual({ online: false, missing: 'bond mgmt-bo: 0 of 2 slaves active (ens3: no carrier, ens4: backup)' });
  });

  it('counts declared slaves that are not enslaved', () => {
    const f = facts();
    f.links = f.links.filter((l) => l.master !== 'mgmt-bo');
    expect(assessNetwork(f, want)).toEqual({ online: false, missing: 'bond mgmt-bo: 0 of 2 slaves active (2 declared slave(s) not enslaved)' });
  });

  it('waits for the bond carrier while LACP negotiates', () => {
    const f = facts();
    f.links[1] = { ...f.links[1]!, flags: NOCARRIER, operstate: 'DOWN' };
    expect(assessNetwork(f, want)).toMatchObject({ online: false, missing: 'bond mgmt-bo has no carrier yet (1 of 2 slaves up; LACP negotiating?)' });
  });

  it('reports a missing bond and a missing bridge', () => {
    expect(assessNetwork(facts({ links: [] }), want)).toMatchObject({ missing: 'bond mgmt-bo does not exist (NetworkManager has not brought up bond-mgmt)' });
    expect(assessNetwork(facts({ links: [] }), { ...want, bond: undefined })).toMatchObject({ missing: 'interface mgmt-br does not exist' });
  });

  it('checks the bridge and the VLAN interface for carrier', () => {
    const f = facts();
    f.links[0] = { ...f.links[0]!, flags: NOCARRIER };
    expect(assessNetwork(f, want)).toMatchObject({ missing: 'mgmt-br has no carrier' });
    const vlanWant = { ...want, iface: 'mgmt-br.100' };
    expect(assessNetwork(facts(), vlanWant)).toMatchObject({ missing: 'interface mgmt-br.100 does not exist' });
    const g = facts({ addrs: [{ ifname: 'mgmt-br.100', addr_info: [{ family: 'inet', local: '10.1.0.5', prefixlen: 24, scope: 'global' }] }] });
    g.links.push({ ifname: 'mgmt-br.100', flags: UP, operstate: 'UP', link: 'mgmt-br' });
    expect(assessNetwork(g, vlanWant)).toMatchObject({ online: true, detail: expect.stringMatching(/^mgmt-br\.100 10\.1\.0\.5\/24, default via 10\.0\.0\.1 dev mgmt-br/) });
  });

  it('needs an IPv4 address: link-local does not count', () => {
    const f = facts({ addrs: [{ ifname: 'mgmt-br', addr_info: [{ family: 'inet', local: '169.254.3.4', prefixlen: 16, scope: 'link' }, { family: 'inet6', local: 'fe80::1', prefixlen: 64, scope: 'link' }] }] });
    expect(assessNetwork(f, want)).toMatchObject({ missing: 'mgmt-br has no IPv4 address: no DHCP lease yet' });
    expect(assessNetwork(f, { ...want, method: 'static', staticIp: '10.0.0.5/24' })).toMatchObject({ missing: 'mgmt-br has no IPv4 address: the static address 10.0.0.5/24 is not applied' });
  });

  it('names the missing routers option from the lease', () => {
    const lease = { file: '/var/lib/NetworkManager/internal-x-mgmt-br.lease', address: '10.0.0.5', routers: [] };
    expect(assessNetwork(facts({ defaultRoutes: [], lease }), want)).toEqual({
      online: false,
      missing: 'no default route: the DHCP server sent no routers option (lease /var/lib/NetworkManager/internal-x-mgmt-br.lease, mgmt-br 10.0.0.5/24)',
    });
    expect(assessNetwork(facts({ defaultRoutes: [], lease: { ...lease, routers: ['10.0.0.1'] } }), want)).toMatchObject({ missing: 'no default route although the DHCP lease names router 10.0.0.1 (not installed yet)' });
    expect(assessNetwork(facts({ defaultRoutes: [] }), want)).toMatchObject({ missing: expect.stringMatching(/^no default route \(mgmt-br has 10\.0\.0\.5\/24; no DHCP lease found/) });
    expect(assessNetwork(facts({ defaultRoutes: [] }), { ...want, method: 'static', gateway: '10.0.0.1' })).toMatchObject({ missing: 'no default route: the static gateway 10.0.0.1 is not applied on mgmt-br' });
  });

  it('requires DNS only when declared or asked for', () => {
    expect(assessNetwork(facts(), { ...want, dnsServers: ['1.1.1.1'] })).toMatchObject({ missing: 'DNS: no nameserver in /etc/resolv.conf (declared: 1.1.1.1)' });
    expect(assessNetwork(facts({ nameservers: ['9.9.9.9'] }), { ...want, dnsServers: ['1.1.1.1'] })).toMatchObject({ missing: 'DNS: /etc/resolv.conf lists 9.9.9.9, none of the declared 1.1.1.1' });
    expect(assessNetwork(facts(), { ...want, requireDns: true })).toMatchObject({ missing: 'DNS: no nameserver in /etc/resolv.conf' });
    expect(assessNetwork(facts({ nameservers: ['1.1.1.1'] }), { ...want, dnsServers: ['1.1.1.1'] })).toMatchObject({ online: true, detail: expect.stringMatching(/dns 1\.1\.1\.1$/) });
  });
});

describe('bondLinkFailures', () => {
  it('sums the link failures of the bond\'s slaves', () => {
    const f = facts();
    f.links[2]!.linkinfo!.info_slave_data!.link_failure_count = 3;
    f.links[3]!.linkinfo!.info_slave_data!.link_failure_count = 1;
    expect(bondLinkFailures(f, 'mgmt-bo')).toBe(4);
    expect(bondLinkFailures(f, undefined)).toBe(0);
  });
});

describe('lease and resolv.conf parsing', () => {
  it('reads the last dhclient lease of the interface', () => {
    const text = `lease {\n  interface "mgmt-br";\n  fixed-address 10.0.0.7;\n  option routers 10.0.0.1;\n}\nlease {\n  interface "eth9";\n  fixed-address 10.9.0.7;\n}\nlease {\n  interface "mgmt-br";\n  fixed-address 10.0.0.8;\n  option subnet-mask 255.255.255.0;\n}\n`;
    expect(parseDhcpLease(text, '/var/lib/dhcp/dhclient.leases', 'mgmt-br')).toEqual({ file: '/var/lib/dhcp/dhclient.leases', address: '10.0.0.8', routers: [] });
    expect(parseDhcpLease(text, 'f', 'eth0')).toBeUndefined();
  });

  it('reads NetworkManager internal leases named after the interface', () => {
    const text = '# This is private data. Do not parse.\nADDRESS=10.0.0.9\nNETMASK=255.255.255.0\nROUTER=10.0.0.1 10.0.0.2\n';
    expect(parseDhcpLease(text, '/var/lib/NetworkManager/internal-abc-mgmt-br.lease', 'mgmt-br')).toEqual({ file: '/var/lib/NetworkManager/internal-abc-mgmt-br.lease', address: '10.0.0.9', routers: ['10.0.0.1', '10.0.0.2'] });
    expect(parseDhcpLease(text, '/var/lib/NetworkManager/internal-abc-eth0.lease', 'mgmt-br')).toBeUndefined();
  });

  it('DNS: one of several declared nameservers in resolv.conf is enough (DHCP may add others, drop some)', () => {
    const two = { ...want, dnsServers: ['1.1.1.1', '8.8.8.8'] };
    expect(assessNetwork(facts({ nameservers: ['8.8.8.8'] }), two)).toMatchObject({ online: true });
    expect(assessNetwork(facts({ nameservers: ['9.9.9.9', '1.1.1.1'] }), two)).toMatchObject({ online: true, detail: expect.stringMatching(/dns 9\.9\.9\.9 1\.1\.1\.1$/) });
    expect(assessNetwork(facts({ nameservers: ['9.9.9.9'] }), two)).toMatchObject({ online: false, missing: 'DNS: /etc/resolv.conf lists 9.9.9.9, none of the declared 1.1.1.1, 8.8.8.8' });
  });

  it('parses nameserver lines', () => {
    expect(parseResolvConf('# x\nnameserver 1.1.1.1\nsearch lan\n  nameserver 8.8.8.8 \n')).toEqual(['1.1.1.1', '8.8.8.8']);
  });
});

describe('networkWant', () => {
  it('takes the VLAN interface, slaves, method and DNS from the config', () => {
    const w = networkWant({ install: { managementInterface: { vlanId: 100, interfaces: [{ name: 'ens3' }, { name: 'ens4' }], method: 'static', ip: '10.1.0.5', gateway: '10.1.0.1' } }, os: { dnsNameservers: ['1.1.1.1'] } }, {});
    expect(w).toEqual({ iface: 'mgmt-br.100', bridge: 'mgmt-br', bond: 'mgmt-bo', expectedSlaves: 2, declaredNics: [{ name: 'ens3' }, { name: 'ens4' }], method: 'static', staticIp: '10.1.0.5', gateway: '10.1.0.1', dnsServers: ['1.1.1.1'], requireDns: false });
    expect(networkWant({ install: { managementInterface: { vlanId: 1 } } }, { bond: false }).iface).toBe('mgmt-br');
    expect(networkWant(undefined, { bond: false }).bond).toBeUndefined();
  });
});
