// Boot medium and mounts on variants of a fixture tree, copied to a temp dir and edited.
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Host } from '../../../lib/host.js';
import { gatherMachineFacts, suggestInstallDevice } from '../../../installer/preflight/index.js';
import { FIXTURES } from './helpers.js';

let root = '';
beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'hv-preflight-sysroot-'));
  await cp(path.join(FIXTURES, 'old-install'), root, { recursive: true, verbatimSymlinks: true });
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('mounts under a sysroot', () => {
  it('the disk holding / (an installed system on sda4) is the boot medium and is never suggested', async () => {
    // sda is the first SATA disk: 8:0, its partitions 8:1..8:6.
    await writeFile(path.join(root, 'proc/self/mountinfo'), '40 1 8:4 / / rw,relatime - ext4 /dev/sda4 rw\n');
    const f = await gatherMachineFacts(new Host(root));
    const sda = f.disks.find((d) => d.name === 'sda')!;
    expect(sda.inUse).toMatchObject({ mountpoints: ['/'], bootMedium: true });
    expect(sda.partitions[3].mountpoints).toEqual(['/']);
    expect(f.disks.find((d) => d.name === 'sr0')!.inUse.bootMedium).toBe(true); // COS_LIVE label
    expect(suggestInstallDevice(f)?.path).toBe('/dev/nvme0n1');
  });

  it('falls back to /proc/mounts (source paths) when mountinfo is missing', async () => {
    await rm(path.join(root, 'proc/self/mountinfo'));
    await writeFile(path.join(root, 'proc/mounts'), 'overlay / overlay rw 0 0\n/dev/nvme0n1 /var/lib/data ext4 rw 0 0\n');
    const f = await gatherMachineFacts(new Host(root));
    expect(f.disks.find((d) => d.name === 'nvme0n1')!.inUse.mountpoints).toEqual(['/var/lib/data']);
    expect(f.disks.find((d) => d.name === 'sdd')!.inUse).toMatchObject({ mountpoints: [], swap: true });
    expect(suggestInstallDevice(f)?.path).toBe('/dev/sdb');
  });
});
