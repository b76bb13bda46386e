/**
 * The address samples network-online and node-identity share: which addresses count, and when
 * node-identity's window of samples is complete.
 */
import { describe, expect, it } from 'vitest';
import { addressSamples, addressWindowEnd, globalIPv4, recordAddressSample } from '../../../agent/identity/address-samples.js';

const A = ['10.0.0.5/24'];

describe('globalIPv4', () => {
  it("keeps the interface's global, settled IPv4 addresses only", () => {
    const entries = [
      { ifname: 'mgmt-bo', addr_info: [{ family: 'inet', local: '10.0.0.9', prefixlen: 24, scope: 'global' }] },
      {
        ifname: 'mgmt-br',
        addr_info: [
          { family: 'inet', local: '10.0.0.5', prefixlen: 24, scope: 'global', dynamic: true },
          { family: 'inet6', local: 'fe80::1', prefixlen: 64, scope: 'link' },
          { family: 'inet6', local: '2001:db8::5', prefixlen: 64, scope: 'global' },
          { family: 'inet', local: '169.254.3.3', prefixlen: 16, scope: 'link' },
          { family: 'inet', local: '10.0.0.6', prefixlen: 24, scope: 'global', tentative: true },
        ],
      },
    ];
    expect(globalIPv4(entries, 'mgmt-br')).toEqual(['10.0.0.5/24']);
    expect(globalIPv4(entries, 'mgmt-bo')).toEqual(['10.0.0.9/24']);
    expect(globalIPv4(entries, 'eth9')).toEqual([]);
    // `ip -4 addr` prints no family on some versions: inet is implied
    expect(globalIPv4([{ ifname: 'mgmt-br', addr_info: [{ local: '10.0.0.5', prefixlen: 24, scope: 'global' }] }], 'mgmt-br')).toEqual(['10.0.0.5/24']);
  });
});

describe('addressWindowEnd', () => {
  it('with no address seen yet, is a whole window from now', () => {
    expect(addressWindowEnd([], 100_000, 5_000)).toBe(105_000);
    expect(addressWindowEnd([{ at: 90_000, addrs: [] }, { at: 99_000, addrs: [] }], 100_000, 5_000)).toBe(105_000);
  });

  it('counts from the first look that had the address, so looks taken before the guard started count', () => {
    const samples = [{ at: 90_000, addrs: [] }, { at: 97_000, addrs: A }, { at: 98_000, addrs: A }, { at: 99_000, addrs: A }];
    expect(addressWindowEnd(samples, 100_000, 5_000)).toBe(102_000);
  });

  it('never ends before now: an address seen for longer than the window still gets one look now', () => {
    expect(addressWindowEnd([{ at: 10_000, addrs: A }, { at: 50_000, addrs: A }], 100_000, 5_000)).toBe(100_000);
  });

  it('starts again after a look with no address (a lost lease), and a change of address does not restart it', () => {
    expect(addressWindowEnd([{ at: 90_000, addrs: A }, { at: 96_000, addrs: [] }, { at: 98_000, addrs: A }], 100_000, 5_000)).toBe(103_000);
    expect(addressWindowEnd([{ at: 90_000, addrs: A }, { at: 96_000, addrs: [] }], 100_000, 5_000)).toBe(105_000);
    // A → B is for the judgement to call a change or a flap; the window is about having looked long enough.
    expect(addressWindowEnd([{ at: 90_000, addrs: A }, { at: 98_000, addrs: ['10.0.0.12/24'] }], 100_000, 5_000)).toBe(100_000);
  });
});

describe('the sample store', () => {
  it('keeps samples per node root and interface, oldest first, and answers from a time on', () => {
    recordAddressSample('/r1', 'mgmt-br', 1_000, []);
    recordAddressSample('/r1', 'mgmt-br', 2_000, A);
    recordAddressSample('/r1', 'mgmt-br.10', 2_500, ['10.1.0.5/24']);
    recordAddressSample('/r2', 'mgmt-br', 3_000, ['10.9.0.5/24']);
    expect(addressSamples('/r1', 'mgmt-br', 0)).toEqual([{ at: 1_000, addrs: [] }, { at: 2_000, addrs: A }]);
    expect(addressSamples('/r1', 'mgmt-br', 1_500)).toEqual([{ at: 2_000, addrs: A }]);
    expect(addressSamples('/r2', 'mgmt-br', 0)).toEqual([{ at: 3_000, addrs: ['10.9.0.5/24'] }]);
    expect(addressSamples('/r3', 'mgmt-br', 0)).toEqual([]);
  });

  it('drops samples older than ten minutes when it records', () => {
    recordAddressSample('/r4', 'mgmt-br', 0, A);
    recordAddressSample('/r4', 'mgmt-br', 600_000, A);
    recordAddressSample('/r4', 'mgmt-br', 600_001, A);
    expect(addressSamples('/r4', 'mgmt-br', 0).map((s) => s.at)).toEqual([600_000, 600_001]);
  });
});
