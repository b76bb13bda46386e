/** The disk the console starts on: the first usable one of the list, as Harvester's page starts at its first entry. */
import { describe, expect, it } from 'vitest';
import { defaultDisk } from '../../../installer/console/machine.js';
import { disk, machine } from '../disk/facts-fixture.js';

describe('defaultDisk', () => {
  it('the first usable disk, not the largest further down', () => {
    const small = disk('nvme0n1', 400, { transport: 'nvme', links: [] });
    const big = disk('nvme1n1', 3000, { transport: 'nvme', links: [] });
    expect(defaultDisk(machine([small, big]))).toBe('/dev/nvme0n1');
  });

  it('skips a disk that cannot take the install (mounted), and has none to offer when none can', () => {
    const mounted = disk('vda', 500, { links: [], inUse: { mountpoints: ['/'], swap: false, holders: [], bootMedium: false } });
    const free = disk('vdb', 300, { links: [] });
    expect(defaultDisk(machine([mounted, free]))).toBe('/dev/vdb');
    expect(defaultDisk(machine([mounted]))).toBeUndefined();
  });
});
