/**
 * The planner's edges: every way a disk may be named, the exact limits of Harvester's size rules
 * (at the minimum passes, one unit below fails), the MBR limit, the boot partition each firmware
 * gets, the role/name/type of every partition, the wipe list's exclusions and order, and the
 * installer's own mounts. Expected values are Harvester's and the kernel's, written out here.
 */
import { describe, expect, it } from 'vitest';
import { findDisk, planInstall, PlanRefusedError, targetInUseProblems } from '../../../installer/disk/plan.js';
import { partitionPath } from '../../../installer/disk/commands.js';
import type { HarvesterConfig } from '../../../config/types.js';
import { disk, machine, GiB } from './facts-fixture.js';

const MiB = 1024 * 1024;
/** Harvester's msdos limit: 2 TiB minus one 512-byte sector (harvester-installer's MBR size check). */
const MBR_LIMIT = 2_199_023_255_040;

function cfg(install: HarvesterConfig['install'] = {}): HarvesterConfig {
  return { schemeVersion: 1, token: 'secret-token', os: { hostname: 'node1' }, install: { mode: 'create', device: '/dev/vda', ...install } };
}

function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(PlanRefusedError);
    return (err as PlanRefusedError).problems;
  }
  return [];
}

describe('findDisk: the names a disk answers to', () => {
  const facts = machine([disk('vda', 300), disk('nvme0n1', 300, { links: ['/dev/disk/by-id/nvme-SN1', '/dev/disk/by-path/pci-0000:00:04.0-nvme-1'] })]);
  it.each([
    ['/dev/nvme0n1', 'the device path'],
    ['nvme0n1', 'the kernel name'],
    ['/dev/disk/by-id/nvme-SN1', 'a by-id link'],
    ['/dev/disk/by-path/pci-0000:00:04.0-nvme-1', 'a by-path link'],
    ['/dev/nvme0n1/', 'the path with a trailing slash'],
    ['/dev/disk/by-id/nvme-SN1//', 'a link with trailing slashes'],
  ])('%s (%s) is the NVMe disk', (name) => {
    expect(findDisk(facts, name)?.path).toBe('/dev/nvme0n1');
  });
  it.each(['/dev/nvme0', 'nvme0n', '/dev/disk/by-id/nvme-SN', 'dev/nvme0n1', '/dev//nvme0n1', ''])('%j names no disk', (name) => {
    expect(findDisk(facts, name)).toBeUndefined();
  });
});

describe('partitionPath: kernel partition names', () => {
  it.each([
    ['/dev/sda', 1, '/dev/sda1'],
    ['/dev/vdb', 6, '/dev/vdb6'],
    ['/dev/nvme0n1', 2, '/dev/nvme0n1p2'],
    ['/dev/loop3', 5, '/dev/loop3p5'],
    ['/dev/mmcblk0', 1, '/dev/mmcblk0p1'],
    // A digit inside the name but a letter last: no "p" (the kernel adds it only after a digit).
    ['/dev/xvd1a', 3, '/dev/xvd1a3'],
  ])('%s partition %i is %s', (d, n, want) => {
    expect(partitionPath(d, n)).toBe(want);
  });
});

describe('disk size minimums, exactly at the limit', () => {
  it('a single disk of exactly 250 GiB is accepted; one byte less is refused with Harvester\'s message', () => {
    expect(() => planInstall(cfg(), machine([disk('vda', 250)]))).not.toThrow();
    const p = problemsOf(() => planInstall(cfg(), machine([disk('vda', 250, { sizeBytes: 250 * GiB - 512 })])));
    expect(p).toContain('installation disk size is too small. Minimum 250Gi is required (/dev/vda is 249Gi)');
  });
  it('with a data disk the install disk needs exactly 180 GiB, and the data disk exactly 50 GiB', () => {
    const ok = machine([disk('vda', 180), disk('vdb', 50)]);
    expect(planInstall(cfg({ dataDisk: '/dev/vdb' }), ok).dataDisk?.path).toBe('/dev/vdb');
    const small = machine([disk('vda', 180, { sizeBytes: 180 * GiB - 512 }), disk('vdb', 50, { sizeBytes: 50 * GiB - 512 })]);
    const p = problemsOf(() => planInstall(cfg({ dataDisk: '/dev/vdb' }), small));
    expect(p).toEqual([
      'installation disk size is too small. Minimum 180Gi is required (/dev/vda is 179Gi)',
      'data disk size is too small. Minimum 50Gi is required (/dev/vdb is 49Gi)',
    ]);
  });
  it('a witness node needs 180 GiB, not 250', () => {
    expect(() => planInstall(cfg({ role: 'witness' }), machine([disk('vda', 180)]))).not.toThrow();
    expect(problemsOf(() => planInstall(cfg({ role: 'witness' }), machine([disk('vda', 179)])))).toEqual([
      'installation disk size is too small. Minimum 180Gi is required (/dev/vda is 179Gi)',
    ]);
  });
  it('persistent_partition_size of exactly 150Gi is accepted; 153599Mi is refused', () => {
    const facts = machine([disk('vda', 400)]);
    const persistent = planInstall(cfg({ persistentPartitionSize: '150Gi' }), facts).partitions.find((x) => x.label === 'COS_PERSISTENT');
    expect(persistent?.sizeBytes).toBe(150 * GiB);
    expect(problemsOf(() => planInstall(cfg({ persistentPartitionSize: '153599Mi' }), facts))).toEqual([
      'partition size is too small. Minimum 150Gi is required (install.persistent_partition_size: 153599Mi)',
    ]);
  });
  it('the largest persistent size is the disk minus the fixed partitions and 50 GiB of VM data: at it passes, 1 MiB above fails', () => {
    // 300 GiB disk, UEFI: ESP 64 + OEM 50 + recovery 8192 + state 15360 MiB fixed, 51200 MiB kept for data.
    const maxMiB = 300 * 1024 - (64 + 50 + 8192 + 15360 + 51200);
    const facts = machine([disk('vda', 300)]);
    const at = planInstall(cfg({ persistentPartitionSize: `${maxMiB}Mi` }), facts).partitions.find((x) => x.label === 'COS_PERSISTENT');
    expect(at?.sizeBytes).toBe(maxMiB * MiB);
    expect(problemsOf(() => planInstall(cfg({ persistentPartitionSize: `${maxMiB + 1}Mi` }), facts))).toEqual([
      `partition size is too large. Maximum ${Math.floor(maxMiB / 1024)}Gi is allowed (install.persistent_partition_size: ${maxMiB + 1}Mi, /dev/vda is 300Gi)`,
    ]);
  });
});

describe('MBR: the size limit and what an msdos table holds', () => {
  const bios = (bytes: number) => machine([disk('vda', 0, { sizeBytes: bytes })], false);
  it('a disk of exactly the limit takes force_mbr; one sector more is refused naming the limit', () => {
    expect(planInstall(cfg({ forceMbr: true }), bios(MBR_LIMIT)).table).toBe('msdos');
    expect(problemsOf(() => planInstall(cfg({ forceMbr: true }), bios(MBR_LIMIT + 512)))).toEqual([
      `disk size too large for MBR partitioning table: ${MBR_LIMIT + 512} (/dev/vda; msdos tables address at most ${MBR_LIMIT} bytes, remove install.force_mbr)`,
    ]);
  });
  it('msdos: no boot partition, type 83, COS_STATE carries the boot flag, no data partition', () => {
    const plan = planInstall(cfg({ forceMbr: true }), bios(300 * GiB));
    expect(plan.partitions.map((p) => [p.role, p.name, p.label, p.typeCode, p.bootable ?? false])).toEqual([
      ['oem', 'oem', 'COS_OEM', '83', false],
      ['recovery', 'recovery', 'COS_RECOVERY', '83', false],
      ['state', 'state', 'COS_STATE', '83', true],
      ['persistent', 'persistent', 'COS_PERSISTENT', '83', false],
    ]);
    expect(plan.partitions[0]!.startBytes).toBe(MiB);
  });
  it('force_efi with force_mbr on a BIOS machine names force_efi as the reason', () => {
    expect(problemsOf(() => planInstall(cfg({ forceMbr: true, forceEfi: true }), bios(300 * GiB)))[0]).toBe(
      'cannot force MBR on UEFI system: force_efi is set (remove install.force_mbr or install.force_efi)',
    );
  });
});

describe('GPT: the boot partition each firmware gets, and every partition\'s identity', () => {
  it('UEFI: a 64 MiB ESP (EF00, vfat, COS_GRUB, /boot/efi) first', () => {
    const plan = planInstall(cfg(), machine([disk('vda', 300)], true));
    expect(plan.partitions.map((p) => [p.role, p.name, p.label, p.fs, p.typeCode, p.mount])).toEqual([
      ['efi', 'efi', 'COS_GRUB', 'vfat', 'EF00', '/boot/efi'],
      ['oem', 'oem', 'COS_OEM', 'ext4', '8300', '/oem'],
      ['recovery', 'recovery', 'COS_RECOVERY', 'ext4', '8300', undefined],
      ['state', 'state', 'COS_STATE', 'ext4', '8300', '/run/initramfs/cos-state'],
      ['persistent', 'persistent', 'COS_PERSISTENT', 'ext4', '8300', '/usr/local'],
      ['data', 'HARV_LH_DEFAULT', 'HARV_LH_DEFAULT', 'ext4', '8300', '/var/lib/harvester/defaultdisk'],
    ]);
    expect(plan.partitions[0]!.sizeBytes).toBe(64 * MiB);
    expect(plan.partitions.every((p) => !p.bootable)).toBe(true);
  });
  it('BIOS: a 1 MiB bios_grub partition (EF02, no filesystem, no label) first', () => {
    const plan = planInstall(cfg(), machine([disk('vda', 300)], false));
    const first = plan.partitions[0]!;
    expect([first.role, first.name, first.label, first.fs, first.typeCode, first.sizeBytes]).toEqual(['bios', 'bios', undefined, 'none', 'EF02', MiB]);
    expect(plan.partitions.some((p) => p.role === 'efi')).toBe(false);
  });
  it('force_efi on a BIOS machine lays out the ESP', () => {
    expect(planInstall(cfg({ forceEfi: true }), machine([disk('vda', 300)], false)).partitions[0]!.typeCode).toBe('EF00');
  });
});

describe('the wipe list', () => {
  const cosDisk = (name: string) => disk(name, 100, { partitions: [{ path: `/dev/${name}1`, number: 1, sizeBytes: GiB, label: 'COS_OEM', mountpoints: [] }] });
  it('never holds the install disk or the data disk, whichever name the list uses for them', () => {
    const facts = machine([disk('vda', 300), disk('vdb', 100), cosDisk('vdc')]);
    const plan = planInstall(cfg({ dataDisk: '/dev/vdb', wipeDisksList: ['vda', '/dev/disk/by-id/virtio-vdb', '/dev/vdc'] }), facts);
    expect(plan.wipeDisks).toEqual(['/dev/vdc']);
  });
  it('wipe_all_disks skips the data disk even when it carries an old install', () => {
    const facts = machine([disk('vda', 300), cosDisk('vdb'), cosDisk('vdc')]);
    expect(planInstall(cfg({ dataDisk: '/dev/vdb', wipeAllDisks: true }), facts).wipeDisks).toEqual(['/dev/vdc']);
  });
  it('is sorted by path and holds each disk once, whatever order and names the config uses', () => {
    const facts = machine([disk('vda', 300), cosDisk('vdd'), cosDisk('vdb'), cosDisk('vdc')]);
    const plan = planInstall(cfg({ wipeDisksList: ['/dev/vdd', 'vdb', '/dev/disk/by-id/virtio-vdd'], wipeAllDisks: true }), facts);
    expect(plan.wipeDisks).toEqual(['/dev/vdb', '/dev/vdc', '/dev/vdd']);
  });
});

describe('targetInUseProblems: the installer\'s own mounts', () => {
  const busy = disk('vda', 300, { inUse: { mountpoints: ['/run/hvinstall/run-1/mnt/oem'], swap: false, holders: [], bootMedium: false } });
  it('a mount under the run directory is the installer\'s own (a killed run left it) and is ignored', () => {
    expect(targetInUseProblems(busy, { ownMountPrefix: '/run/hvinstall/run-1/' })).toEqual([]);
  });
  it('without the prefix, or with another run\'s, the same mount refuses the disk', () => {
    expect(targetInUseProblems(busy)).toEqual(['/dev/vda is mounted (/run/hvinstall/run-1/mnt/oem): unmount it first']);
    expect(targetInUseProblems(busy, { ownMountPrefix: '/run/hvinstall/run-2/' })).toEqual(['/dev/vda is mounted (/run/hvinstall/run-1/mnt/oem): unmount it first']);
  });
  it('only a mount under the prefix is the installer\'s: the same path below another directory is not', () => {
    const other = disk('vda', 300, { inUse: { mountpoints: ['/mnt/backup/run/hvinstall/run-1/oem'], swap: false, holders: [], bootMedium: false } });
    expect(targetInUseProblems(other, { ownMountPrefix: '/run/hvinstall/run-1/' })).toEqual(['/dev/vda is mounted (/mnt/backup/run/hvinstall/run-1/oem): unmount it first']);
  });
  it('a mount of a partition of the disk counts too, listed once', () => {
    const d = disk('vda', 300, { partitions: [{ path: '/dev/vda1', number: 1, sizeBytes: GiB, mountpoints: ['/mnt/x'] }, { path: '/dev/vda2', number: 2, sizeBytes: GiB, mountpoints: ['/mnt/x'] }] });
    expect(targetInUseProblems(d)).toEqual(['/dev/vda is mounted (/mnt/x): unmount it first']);
  });
});

describe('what the boot partition costs, and the sizes that follow from it (the mutation run\'s survivors)', () => {
  // Harvester's fixed layout: the boot partition (64 MiB ESP on UEFI GPT, 1 MiB bios_grub on BIOS GPT,
  // none on msdos), 50 MiB COS_OEM, 8192 MiB COS_RECOVERY, 15360 MiB COS_STATE; a shared disk keeps
  // 51200 MiB for VM data. The largest persistent size is the disk's MiB less all of that, and
  // skipchecks clamps a larger one to it. On a 100 GiB (102400 MiB) disk:
  const clampNote = (maxMiB: number) => `persistent_partition_size clamped from 512000 to ${maxMiB} MiB (skipchecks)`;
  const huge = { skipchecks: true, persistentPartitionSize: '500Gi' };
  it('UEFI GPT: 102400 - (64 + 50 + 8192 + 15360 + 51200) = 27534 MiB', () => {
    expect(planInstall(cfg(huge), machine([disk('vda', 100)])).notes).toEqual([clampNote(27534)]);
  });
  it('BIOS GPT: 102400 - (1 + 50 + 8192 + 15360 + 51200) = 27597 MiB', () => {
    expect(planInstall(cfg(huge), machine([disk('vda', 100)], false)).notes).toEqual([clampNote(27597)]);
  });
  it('msdos: no boot partition, so the layout fits in 1 + 50 + 8192 + 15360 + 64 = 23667 MiB, and not in one MiB less', () => {
    // An msdos table has no data partition and no backup table at the end: COS_PERSISTENT takes the rest.
    const msdos = (mib: number) => planInstall(cfg({ skipchecks: true, forceMbr: true }), machine([disk('vda', 0, { sizeBytes: mib * MiB })], false));
    expect(msdos(23667).partitions.find((p) => p.label === 'COS_PERSISTENT')!.sizeBytes).toBe(64 * MiB);
    expect(problemsOf(() => msdos(23666))).toEqual(['the layout does not fit on /dev/vda: it needs at least 23667 MiB, the disk has 23666 MiB']);
  });
  it('skipchecks clamps down to exactly COS_PERSISTENT\'s 64 MiB minimum; one MiB less has nothing to clamp to', () => {
    const fixed = 64 + 50 + 8192 + 15360 + 51200;
    const plan = planInstall(cfg({ skipchecks: true }), machine([disk('vda', 0, { sizeBytes: (fixed + 64) * MiB })]));
    expect(plan.notes).toEqual([clampNote(64).replace('512000', '153600')]);
    expect(plan.partitions.find((p) => p.label === 'COS_PERSISTENT')!.sizeBytes).toBe(64 * MiB);
    expect(problemsOf(() => planInstall(cfg({ skipchecks: true }), machine([disk('vda', 0, { sizeBytes: (fixed + 63) * MiB })])))[0]).toMatch(/^partition size is too large\. Maximum 0Gi is allowed/);
  });
  it('the bios_grub partition has no filesystem, so no filesystem id; the ESP has a vfat serial, the ext4 ones a UUID', () => {
    const bios = planInstall(cfg(), machine([disk('vda', 300)], false)).partitions;
    expect(bios[0]!.role).toBe('bios');
    expect(bios[0]!.fsUuid).toBeUndefined();
    const efi = planInstall(cfg(), machine([disk('vda', 300)])).partitions;
    expect(efi[0]!.fsUuid).toMatch(/^[0-9A-F]{8}$/);
    for (const p of efi.slice(1)) expect(p.fsUuid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});

describe('size rules that apply to one table or one disk only (the mutation run\'s survivors)', () => {
  it('the MBR limit is not a GPT limit: a 4 TiB disk gets a GPT layout', () => {
    const plan = planInstall(cfg(), machine([disk('vda', 4096)]));
    expect(plan.table).toBe('gpt');
    expect(plan.deviceSizeBytes).toBe(4096 * GiB);
  });
  it('under the install-disk minimum, that one problem is reported, not also a persistent size the small disk cannot hold', () => {
    expect(problemsOf(() => planInstall(cfg(), machine([disk('vda', 200)])))).toEqual([
      'installation disk size is too small. Minimum 250Gi is required (/dev/vda is 200Gi)',
    ]);
  });
  it('at exactly the 250 GiB minimum the persistent size is checked: 256000 - 74866 = 181134 MiB, so at most 176Gi', () => {
    expect(problemsOf(() => planInstall(cfg({ persistentPartitionSize: '200Gi' }), machine([disk('vda', 250)])))).toEqual([
      'partition size is too large. Maximum 176Gi is allowed (install.persistent_partition_size: 200Gi, /dev/vda is 250Gi)',
    ]);
  });
  it('wipe_all_disks never lists the install disk, even when it carries the old install being replaced', () => {
    const oldInstall = (name: string, gib: number) => disk(name, gib, { partitions: [{ path: `/dev/${name}2`, number: 2, sizeBytes: GiB, label: 'COS_OEM', mountpoints: [] }] });
    const plan = planInstall(cfg({ wipeAllDisks: true }), machine([oldInstall('vda', 300), oldInstall('vdb', 100)]));
    expect(plan.wipeDisks).toEqual(['/dev/vdb']);
  });
});
