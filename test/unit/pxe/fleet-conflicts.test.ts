/** Conflicts between the machines of one profiles.yaml, on the configs as the installer sees them; each names both machines. */
import { describe, expect, it } from 'vitest';
import { fleetConflicts, fleetFacts } from '../../../pxe/fleet-conflicts.js';
import type { HarvesterConfig } from '../../../config/types.js';

const create = (ip: string | undefined, vip = '10.0.0.100'): HarvesterConfig => ({ install: { mode: 'create', vip, managementInterface: ip ? { method: 'static', ip } : { method: 'dhcp' } } });
const join = (ip: string | undefined, server = 'https://10.0.0.100:443', hw?: string): HarvesterConfig => ({
  serverUrl: server,
  install: { mode: 'join', managementInterface: { method: ip ? 'static' : 'dhcp', ...(ip ? { ip } : {}), ...(hw ? { interfaces: [{ hwAddr: hw }] } : {}) } },
});

describe('fleetFacts', () => {
  it('reads the static address only when the method is static, the VIP only in create mode, the server host, the NICs', () => {
    expect(fleetFacts('a', create('10.0.0.11'))).toEqual({ machine: 'a', ip: '10.0.0.11', vip: '10.0.0.100', mode: 'create', serverHost: undefined, hwAddrs: [] });
    expect(fleetFacts('b', { install: { mode: 'join', managementInterface: { method: 'dhcp', ip: '10.0.0.5' } } }).ip).toBeUndefined();
    expect(fleetFacts('c', join('10.0.0.12', 'https://[fd00::1]:443', '52-54-00-AA-BB-CC'))).toMatchObject({ serverHost: 'fd00::1', hwAddrs: ['52:54:00:aa:bb:cc'], vip: undefined });
    expect(fleetFacts('d', { serverUrl: 'not a url', install: { mode: 'join' } }).serverHost).toBeUndefined();
  });
});

describe('fleetConflicts', () => {
  it('finds nothing in a sound fleet (DHCP machines, distinct addresses, joins to the VIP)', () => {
    expect(fleetConflicts([fleetFacts('n1', create('10.0.0.11')), fleetFacts('n2', join('10.0.0.12')), fleetFacts('n3', join(undefined)), fleetFacts('n4', join(undefined))])).toEqual([]);
  });

  it('two machines with the same static address', () => {
    expect(fleetConflicts([fleetFacts('n1', create('10.0.0.11')), fleetFacts('n2', join('10.0.0.12')), fleetFacts('n3', join('10.0.0.11'))])).toEqual(['machines n1 and n3 both have the static address 10.0.0.11']);
  });

  it("a machine whose address is a VIP (another's, or its own)", () => {
    expect(fleetConflicts([fleetFacts('n1', create('10.0.0.11')), fleetFacts('n2', join('10.0.0.100'))])).toEqual([
      "machine n2's static address 10.0.0.100 is the VIP that machine n1 creates",
      'machine n2 joins the cluster at its own address 10.0.0.100 (server_url): a join node needs the VIP or a management node of an existing cluster',
    ]);
    expect(fleetConflicts([fleetFacts('n1', create('10.0.0.100'))])).toEqual(["machine n1's static address 10.0.0.100 is the VIP that machine n1 creates (a node cannot be its own cluster VIP)"]);
  });

  it('a join node whose server_url is its own address', () => {
    expect(fleetConflicts([fleetFacts('n2', join('10.0.0.12', 'https://10.0.0.12:443'))])).toEqual([
      'machine n2 joins the cluster at its own address 10.0.0.12 (server_url): a join node needs the VIP or a management node of an existing cluster',
    ]);
    // A create node's server_url is not a join (the validator has its own rule for it).
    expect(fleetConflicts([{ ...fleetFacts('n1', create('10.0.0.11')), serverHost: '10.0.0.11' }])).toEqual([]);
  });

  it('one NIC configured on two machines, in any spelling', () => {
    expect(fleetConflicts([fleetFacts('n1', join(undefined, undefined, '52:54:00:aa:bb:cc')), fleetFacts('n2', join(undefined, undefined, '52-54-00-AA-BB-CC'))])).toEqual([
      'machines n1 and n2 both have a management interface with hardware address 52:54:00:aa:bb:cc',
    ]);
    // The same NIC listed twice by one machine is not a conflict.
    expect(fleetConflicts([{ ...fleetFacts('n1', join(undefined)), hwAddrs: ['52:54:00:aa:bb:cc', '52:54:00:aa:bb:cc'] }])).toEqual([]);
  });
});
