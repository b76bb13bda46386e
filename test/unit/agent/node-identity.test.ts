/**
 * The node-identity decisions: a changed, flapping or first-boot address; renamed and missing bond
 * NICs (and the network-online message that names them instead of "not enslaved"); the records the
 * install and the agent write; what the installer pins in RKE2's drop-ins.
 */
import { describe, expect, it } from 'vitest';
import { judgeAddress, type AddressFacts } from '../../../agent/identity/address.js';
import { describeNicChanges, nicChanges, nicRenameHint } from '../../../agent/identity/nics.js';
import { parseNodeIdentity, parseSeenAddress } from '../../../agent/identity/record.js';
import { assessNetwork, linkIdentities, type IpLink, type NetworkFacts } from '../../../agent/network/assess.js';
import { nodeDropIn } from '../../../installer/render/rke2.js';
import { nodeIdentity } from '../../../installer/render/identity.js';
import { managementAddressOf } from '../../../installer/steps/content-steps.js';
import type { HarvesterConfig } from '../../../config/types.js';
import type { MachineFacts } from '../../../installer/preflight/types.js';

const seen = { version: 1 as const, address: '10.0.0.5/24', interface: 'mgmt-br', recordedAt: '2026-11-30T12:00:00.000Z', why: 'first-boot' as const };
const facts = (over: Partial<AddressFacts>): AddressFacts => ({ iface: 'mgmt-br', method: 'dhcp', samples: [['10.0.0.5/24']], mac: '52:54:00:12:34:56', clusterKnows: true, ...over });

describe('judgeAddress', () => {
  it('is ok when the interface has the recorded address', () => {
    const j = judgeAddress(facts({ seen }));
    expect(j).toMatchObject({ verdict: 'ok', address: '10.0.0.5/24' });
    expect(j.verdict === 'ok' && j.record).toBeUndefined();
    expect(j.text).toBe('mgmt-br 10.0.0.5/24 (recorded 2026-11-30T12:00:00.000Z)');
  });

  it('names both addresses and the fix when DHCP handed out another one after the cluster learned the first', () => {
    const j = judgeAddress(facts({ seen, samples: [['10.0.0.12/24'], ['10.0.0.12/24']] }));
    expect(j.verdict).toBe('changed');
    expect(j.text).toBe('management address changed: mgmt-br has 10.0.0.12/24 from DHCP, but the cluster knows this node as 10.0.0.5 (recorded at its first boot, 2026-11-30T12:00:00.000Z). etcd and kubelet would come up on an address the other members do not know ("not a member of the etcd cluster")');
    expect(j.verdict === 'changed' && j.hint).toBe('make the DHCP server hand 10.0.0.5 to 52:54:00:12:34:56 again (a reservation) and renew the lease (`nmcli connection up bridge-mgmt`), or add the address back: `ip addr add 10.0.0.5/24 dev mgmt-br`');
  });

  it('adopts a first boot\'s lease that differs from the installer\'s while RKE2 has never run', () => {
    const j = judgeAddress(facts({ install: { address: '10.0.0.7/24', source: 'install' }, samples: [['10.0.0.9/24']], clusterKnows: false }));
    expect(j).toMatchObject({ verdict: 'ok', address: '10.0.0.9/24', record: { address: '10.0.0.9/24', why: 'first-boot' } });
    expect(j.text).toContain('the installer had 10.0.0.7/24');
  });

  it('does not adopt a different address once the cluster knows the node, even without the agent\'s own record', () => {
    const j = judgeAddress(facts({ install: { address: '10.0.0.7/24', source: 'install' }, samples: [['10.0.0.9/24']], clusterKnows: true }));
    expect(j.verdict).toBe('changed');
    expect(j.text).toContain('the cluster knows this node as 10.0.0.7 (recorded by the install)');
  });

  it('records the install\'s address on the first boot that confirms it, and a static address that is not applied is a change', () => {
    expect(judgeAddress(facts({ install: { address: '10.0.0.5/24', source: 'config' }, method: 'static', clusterKnows: false }))).toMatchObject({ verdict: 'ok', record: { address: '10.0.0.5/24', why: 'install' } });
    const j = judgeAddress(facts({ install: { address: '10.0.0.5/24', source: 'config' }, method: 'static', samples: [['192.168.1.3/24']], clusterKnows: false }));
    expect(j.verdict).toBe('changed');
    expect(j.text).toBe('mgmt-br has 192.168.1.3/24, not the static address 10.0.0.5/24 this node was installed with');
  });

  it('calls an address that goes A→B→A within the window flapping, but not a single change or a lease lost for a moment', () => {
    const flap = judgeAddress(facts({ seen, samples: [['10.0.0.5/24'], ['10.0.0.12/24'], ['10.0.0.5/24']] }));
    expect(flap).toMatchObject({ verdict: 'flapping', addresses: ['10.0.0.5/24', '10.0.0.12/24'] });
    expect(flap.text).toContain('flaps between 10.0.0.5/24, 10.0.0.12/24');
    expect(judgeAddress(facts({ seen, samples: [['10.0.0.5/24'], [], ['10.0.0.5/24']] })).verdict).toBe('ok');
    expect(judgeAddress(facts({ seen, samples: [['10.0.0.5/24'], ['10.0.0.12/24'], [], ['10.0.0.12/24']] })).verdict).toBe('changed');
  });

  it('waits while there is no address, and adopts the first one when nothing was recorded', () => {
    expect(judgeAddress(facts({ seen, samples: [[]] }))).toEqual({ verdict: 'waiting', text: 'mgmt-br has no IPv4 address yet' });
    expect(judgeAddress(facts({ samples: [['10.0.0.5/24']] }))).toMatchObject({ verdict: 'ok', record: { address: '10.0.0.5/24', why: 'first-boot' } });
  });
});

describe('renamed NICs', () => {
  const links: IpLink[] = [
    { ifname: 'ens5', address: '52:54:00:00:00:01' },
    // A bond slave shows the bond's MAC; its own is perm_hwaddr.
    { ifname: 'ens6', address: '52:54:00:00:00:01', master: 'mgmt-bo', linkinfo: { info_slave_kind: 'bond', info_slave_data: { perm_hwaddr: '52:54:00:00:00:02' } } },
    { ifname: 'ens3', address: '52:54:00:00:00:09' },
  ];

  it('matches by the permanent MAC, so a swapped name is a rename and not "unchanged"', () => {
    const changes = nicChanges([{ name: 'ens3', mac: '52:54:00:00:00:01' }, { name: 'ens6', mac: '52:54:00:00:00:02' }, { name: 'ens4', mac: '52:54:00:00:00:03' }], linkIdentities(links));
    expect(changes).toEqual([
      { kind: 'renamed', was: 'ens3', now: 'ens5', mac: '52:54:00:00:00:01' },
      { kind: 'unchanged', name: 'ens6', mac: '52:54:00:00:00:02' },
      { kind: 'gone', was: 'ens4', mac: '52:54:00:00:00:03' },
    ]);
    expect(describeNicChanges(changes)).toEqual([
      "NIC ens3 (52:54:00:00:00:01) is now named ens5: NetworkManager's profile bond-slave-ens3 binds the name ens3, so ens5 is not enslaved to mgmt-bo",
      'NIC ens4 (52:54:00:00:00:03) is not on this machine any more (no link with that MAC)',
    ]);
    expect(nicRenameHint(changes)).toContain('MACAddress=52:54:00:00:00:01, Name=ens3');
  });

  it('never takes the bridge or bond that borrowed a NIC\'s MAC for the NIC', () => {
    const borrowed: IpLink[] = [
      { ifname: 'mgmt-br', address: '52:54:00:00:00:01', linkinfo: { info_kind: 'bridge' } },
      { ifname: 'mgmt-bo', address: '52:54:00:00:00:01', linkinfo: { info_kind: 'bond' } },
      { ifname: 'ens3', address: '52:54:00:00:00:01', master: 'mgmt-bo' },
    ];
    expect(nicChanges([{ name: 'ens3', mac: '52:54:00:00:00:01' }], linkIdentities(borrowed))).toEqual([{ kind: 'unchanged', name: 'ens3', mac: '52:54:00:00:00:01' }]);
    expect(nicChanges([{ name: 'ens3', mac: '52:54:00:00:00:01' }], linkIdentities(borrowed.slice(0, 2)))).toEqual([{ kind: 'gone', was: 'ens3', mac: '52:54:00:00:00:01' }]);
  });

  it('network-online names the renamed NIC instead of "declared slave(s) not enslaved"', () => {
    const f: NetworkFacts = {
      links: [
        { ifname: 'mgmt-bo', flags: ['UP'], operstate: 'DOWN', linkinfo: { info_kind: 'bond' } },
        { ifname: 'ens5', address: '52:54:00:00:00:01', flags: ['UP', 'LOWER_UP'] },
        { ifname: 'mgmt-br', flags: ['UP'] },
      ],
      addrs: [],
      defaultRoutes: [],
      nameservers: [],
    };
    const a = assessNetwork(f, { iface: 'mgmt-br', bridge: 'mgmt-br', bond: 'mgmt-bo', expectedSlaves: 1, declaredNics: [{ name: 'ens3', mac: '52:54:00:00:00:01' }], method: 'dhcp', dnsServers: [], requireDns: false });
    expect(a).toEqual({ online: false, missing: "bond mgmt-bo: 0 of 1 slaves active (NIC ens3 (52:54:00:00:00:01) is now named ens5: NetworkManager's profile bond-slave-ens3 binds the name ens3, so ens5 is not enslaved to mgmt-bo)" });
    // Without a MAC to go by, the old wording stays.
    const b = assessNetwork(f, { iface: 'mgmt-br', bridge: 'mgmt-br', bond: 'mgmt-bo', expectedSlaves: 1, declaredNics: [{ name: 'ens3' }], method: 'dhcp', dnsServers: [], requireDns: false });
    expect(b).toEqual({ online: false, missing: 'bond mgmt-bo: 0 of 1 slaves active (NIC ens3 is not on this machine any more (no link with that name))' });
  });
});

describe('the records', () => {
  it('parses the install\'s node identity and names what is wrong with a broken one', () => {
    const ok = parseNodeIdentity(JSON.stringify({ version: 1, nodeName: 'n1', interface: 'mgmt-br', method: 'dhcp', address: '10.0.0.5/24', addressSource: 'install', nics: [{ name: 'ens3', mac: '52:54:00:AA:00:01' }] }), '/oem/hvinstall/node-identity.json');
    expect(ok.value?.nics).toEqual([{ name: 'ens3', mac: '52:54:00:aa:00:01' }]);
    expect(parseNodeIdentity('{', 'f').problem).toMatch(/^f is not JSON/);
    expect(parseNodeIdentity(JSON.stringify({ version: 2 }), 'f').problem).toBe('f: not a version 1 node identity');
    expect(parseNodeIdentity(JSON.stringify({ version: 1, nodeName: 'n', interface: 'mgmt-br', method: 'dhcp', address: '10.0.0.5' }), 'f').problem).toBe('f: address "10.0.0.5" is not an IPv4 address with prefix');
    expect(parseSeenAddress('{"version":1,"address":"x","interface":"mgmt-br"}', 's').problem).toBe('s: not a version 1 address record');
  });
});

describe('what the installer pins and records', () => {
  const staticCfg: HarvesterConfig = { install: { mode: 'create', managementInterface: { method: 'static', ip: '10.0.0.5', subnetMask: '255.255.255.0', gateway: '10.0.0.1', interfaces: [{ hwAddr: '52:54:00:AA:00:01' }] } } };
  const dhcpCfg: HarvesterConfig = { install: { mode: 'join', managementInterface: { method: 'dhcp', interfaces: [{ name: 'ens3' }] } } };

  it('pins node-name always and node-ip only for a static address', () => {
    expect(nodeDropIn(staticCfg, 'node1')).toMatchObject({ path: '/etc/rancher/rke2/config.yaml.d/90-hvinstall-node.yaml', content: 'node-name: node1\nnode-ip: 10.0.0.5\n', mode: 0o600 });
    expect(nodeDropIn(dhcpCfg, 'node2').content).toBe('node-name: node2\n');
  });

  it('records the static address from the config and the DHCP address the installer saw', () => {
    const nics = [{ name: 'ens3', mac: '52:54:00:aa:00:01' }];
    expect(nodeIdentity(staticCfg, { cpuCount: 4, nics }, 'node1')).toEqual({ version: 1, nodeName: 'node1', interface: 'mgmt-br', method: 'static', nics: [{ name: 'ens3', mac: '52:54:00:aa:00:01' }], address: '10.0.0.5/24', addressSource: 'config' });
    expect(nodeIdentity(dhcpCfg, { cpuCount: 4, nics, managementAddress: '10.0.0.77/24' }, 'node2')).toMatchObject({ method: 'dhcp', address: '10.0.0.77/24', addressSource: 'install' });
    expect(nodeIdentity(dhcpCfg, { cpuCount: 4, nics }, 'node2').address).toBeUndefined();
  });

  it('takes the install-time address from the management NIC, by name or MAC, never for a static install', () => {
    const machine = { nics: [{ name: 'ens3', mac: '52:54:00:aa:00:01', ipv4: ['10.0.0.77/24'], virtual: false, loopback: false }, { name: 'ens4', mac: '52:54:00:aa:00:02', ipv4: ['172.16.0.9/16'], virtual: false, loopback: false }] } as unknown as MachineFacts;
    expect(managementAddressOf(dhcpCfg, machine)).toEqual({ managementAddress: '10.0.0.77/24' });
    expect(managementAddressOf({ install: { managementInterface: { interfaces: [{ hwAddr: '52:54:00:AA:00:02' }] } } }, machine)).toEqual({ managementAddress: '172.16.0.9/16' });
    expect(managementAddressOf(staticCfg, machine)).toEqual({});
  });
});
