/** The edges of the address and NIC judgements the first agent mutation run left open; expected values written out. */
import { describe, expect, it } from 'vitest';
import { judgeAddress, type AddressFacts } from '../../../agent/identity/address.js';
import { describeNicChanges, nicChanges, nicRenameHint } from '../../../agent/identity/nics.js';

const f = (over: Partial<AddressFacts>): AddressFacts => ({ iface: 'mgmt-br', method: 'dhcp', samples: [['10.0.0.5/24']], clusterKnows: false, ...over });

describe('judgeAddress', () => {
  it('the same addresses in another order are one set; an empty sample between two sets is not a change', () => {
    expect(judgeAddress(f({ samples: [['10.0.0.5/24', '10.0.0.6/24'], ['10.0.0.6/24', '10.0.0.5/24'], [], ['10.0.0.5/24', '10.0.0.6/24']] })).verdict).toBe('ok');
    const flap = judgeAddress(f({ samples: [['10.0.0.5/24'], ['10.0.0.7/24'], ['10.0.0.5/24']] }));
    expect(flap).toMatchObject({ verdict: 'flapping', addresses: ['10.0.0.5/24', '10.0.0.7/24'] });
    expect(flap.text).toBe('the address of mgmt-br flaps between 10.0.0.5/24, 10.0.0.7/24: two DHCP servers answering, or leases that keep changing? The cluster needs one stable address');
  });

  it('a first boot with nothing recorded records the first address, naming all of them', () => {
    expect(judgeAddress(f({ samples: [['10.0.0.5/24', '10.0.0.6/24']] }))).toEqual({ verdict: 'ok', text: "mgmt-br 10.0.0.5/24, 10.0.0.6/24; recorded as this node's address (first boot)", address: '10.0.0.5/24', record: { address: '10.0.0.5/24', why: 'first-boot' } });
  });

  it('a match names where the expectation came from: the static address installed, or the installer', () => {
    expect(judgeAddress(f({ method: 'static', install: { address: '10.0.0.5/24', source: 'config' } })).text).toBe('mgmt-br 10.0.0.5/24 (the static address installed)');
    expect(judgeAddress(f({ install: { address: '10.0.0.5/24', source: 'install' } })).text).toBe('mgmt-br 10.0.0.5/24 (as the installer saw it)');
    expect(judgeAddress(f({ install: { address: '10.0.0.5/16', source: 'install' }, seen: { version: 1, interface: 'mgmt-br', address: '10.0.0.5/24', recordedAt: '2026-12-01T10:00:00Z', why: 'first-boot' } }))).toEqual({ verdict: 'ok', text: 'mgmt-br 10.0.0.5/24 (recorded 2026-12-01T10:00:00Z)', address: '10.0.0.5/24' });
  });

  it('a static node without its address is changed, whatever RKE2 did; a DHCP first boot adopts the new lease only while the cluster knows nothing', () => {
    const staticOff = judgeAddress(f({ method: 'static', samples: [['10.0.0.9/24']], install: { address: '10.0.0.5/24', source: 'config' } }));
    expect(staticOff).toMatchObject({ verdict: 'changed', expected: '10.0.0.5/24', current: ['10.0.0.9/24'] });
    expect(staticOff.text).toBe('mgmt-br has 10.0.0.9/24, not the static address 10.0.0.5/24 this node was installed with');
    expect((staticOff as { hint: string }).hint).toBe('check /etc/NetworkManager/system-connections (bridge-mgmt or vlan-mgmt: address1=10.0.0.5/24) and `nmcli connection up` it; the cluster knows this node as 10.0.0.5');
    const adopted = judgeAddress(f({ samples: [['10.0.0.9/24']], install: { address: '10.0.0.5/24', source: 'install' } }));
    expect(adopted).toMatchObject({ verdict: 'ok', address: '10.0.0.9/24', record: { address: '10.0.0.9/24', why: 'first-boot' } });
    // The installer's lease of a static-method node (no config source) is not adopted.
    expect(judgeAddress(f({ method: 'static', samples: [['10.0.0.9/24']], install: { address: '10.0.0.5/24', source: 'install' } })).verdict).toBe('changed');
    expect(judgeAddress(f({ samples: [['10.0.0.9/24']], install: { address: '10.0.0.5/24', source: 'install' }, clusterKnows: true })).verdict).toBe('changed');
    const seen = { version: 1 as const, interface: 'mgmt-br', address: '10.0.0.5/24', recordedAt: 't', why: 'first-boot' as const };
    const later = judgeAddress(f({ samples: [['10.0.0.9/24']], seen, mac: '52:54:00:aa:bb:cc' }));
    expect(later.text).toBe('management address changed: mgmt-br has 10.0.0.9/24 from DHCP, but the cluster knows this node as 10.0.0.5 (recorded at its first boot, t). etcd and kubelet would come up on an address the other members do not know ("not a member of the etcd cluster")');
    expect(judgeAddress(f({ method: 'static', samples: [['10.0.0.9/24']], seen })).text).toMatch(/^management address changed: mgmt-br has 10\.0\.0\.9\/24, but/);
  });
});

describe('nicChanges', () => {
  it('a MAC in any case matches; without a MAC the name decides among several links', () => {
    const links = [{ ifname: 'ens3', mac: '52:54:00:00:00:03' }, { ifname: 'ens4', mac: '52:54:00:00:00:04' }];
    expect(nicChanges([{ name: 'ens4', mac: '52:54:00:00:00:04' }], links.map((l) => ({ ...l, mac: l.mac.toUpperCase() })))).toEqual([{ kind: 'unchanged', name: 'ens4', mac: '52:54:00:00:00:04' }]);
    expect(nicChanges([{ name: 'ens4' }, { name: 'ens9' }, {}], links)).toEqual([{ kind: 'unchanged', name: 'ens4' }, { kind: 'gone', was: 'ens9' }, { kind: 'gone', was: undefined }]);
  });

  it('two links with the declared MAC (a bond slave and its VLAN): the one with the declared name wins', () => {
    const links = [{ ifname: 'mgmt-x', mac: '52:54:00:00:00:03' }, { ifname: 'ens3', mac: '52:54:00:00:00:03' }];
    expect(nicChanges([{ name: 'ens3', mac: '52:54:00:00:00:03' }], links)).toEqual([{ kind: 'unchanged', name: 'ens3', mac: '52:54:00:00:00:03' }]);
  });

  it('the hint names the first renamed NIC, and nothing when none was renamed', () => {
    const changes = nicChanges([{ name: 'ens9', mac: 'aa:aa:aa:aa:aa:09' }, { name: 'ens3', mac: '52:54:00:00:00:03' }], [{ ifname: 'ens5', mac: '52:54:00:00:00:03' }]);
    expect(nicRenameHint(changes)).toBe('pin the name with a systemd .link file (MACAddress=52:54:00:00:00:03, Name=ens3) in /etc/systemd/network and reboot, or set interface-name=ens5 in /etc/NetworkManager/system-connections/bond-slave-ens3.nmconnection and run `nmcli connection reload`');
    expect(nicRenameHint(nicChanges([{ name: 'ens9', mac: 'aa:aa:aa:aa:aa:09' }], []))).toBeUndefined();
    expect(describeNicChanges(changes)).toEqual([
      'NIC ens9 (aa:aa:aa:aa:aa:09) is not on this machine any more (no link with that MAC)',
      "NIC ens3 (52:54:00:00:00:03) is now named ens5: NetworkManager's profile bond-slave-ens3 binds the name ens3, so ens5 is not enslaved to mgmt-bo",
    ]);
  });
});

describe('judgeAddress: sets, repeats and the hint', () => {
  it('a set of two addresses that becomes another and back is a flap naming each address', () => {
    const r = judgeAddress(f({ samples: [['10.0.0.5/24', '10.0.0.6/24'], ['10.0.0.7/24'], ['10.0.0.6/24', '10.0.0.5/24']] }));
    expect(r).toMatchObject({ verdict: 'flapping', addresses: ['10.0.0.5/24', '10.0.0.6/24', '10.0.0.7/24'] });
  });

  it('the same address seen twice, then another: one change, not a flap', () => {
    expect(judgeAddress(f({ samples: [['10.0.0.5/24'], ['10.0.0.5/24'], ['10.0.0.9/24']] })).verdict).not.toBe('flapping');
  });

  it('no sample at all: waiting for an address', () => {
    expect(judgeAddress(f({ samples: [] }))).toEqual({ verdict: 'waiting', text: 'mgmt-br has no IPv4 address yet' });
  });

  it('without a MAC the reservation hint names no MAC', () => {
    const seen = { version: 1 as const, interface: 'mgmt-br', address: '10.0.0.5/24', recordedAt: '2026-12-01T10:00:00Z', why: 'first-boot' as const };
    const r = judgeAddress(f({ samples: [['10.0.0.9/24']], seen, clusterKnows: true }));
    expect((r as { hint: string }).hint).toBe('make the DHCP server hand 10.0.0.5 again (a reservation) and renew the lease (`nmcli connection up bridge-mgmt`), or add the address back: `ip addr add 10.0.0.5/24 dev mgmt-br`');
  });
});
