/**
 * What `hvinstall plan` prints and the planner's refusals, word for word: an operator reads these
 * before a disk is destroyed. The plan texts were reviewed line by line (offsets: 1 MiB gap, then each
 * partition's start is the previous start plus its size; the last partition ends before the GPT
 * backup or, on msdos, at the end of the disk).
 */
import { describe, expect, it } from 'vitest';
import { planInstall, PlanRefusedError } from '../../../installer/disk/plan.js';
import { formatPlanText } from '../../../installer/disk/format-plan.js';
import { gptCommand, msdosCommand, mkfsCommand, partitionTableCommand, partitionPath } from '../../../installer/disk/commands.js';
import type { HarvesterConfig } from '../../../config/types.js';
import { disk, machine, GiB } from './facts-fixture.js';

const MiB = 1024 * 1024;

function cfg(install: HarvesterConfig['install'] = {}): HarvesterConfig {
  return { schemeVersion: 1, token: 'secret-token', install: { mode: 'create', device: '/dev/vda', ...install } };
}

function refusal(fn: () => unknown): PlanRefusedError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(PlanRefusedError);
    return err as PlanRefusedError;
  }
  throw new Error('expected a refusal');
}

const message = (fn: () => unknown) => refusal(fn).message;

describe('formatPlanText', () => {
  it('BIOS on a 4Kn disk with a data disk, a wiped disk and a note', () => {
    const facts = machine([disk('vda', 200, { logicalSectorSize: 4096, model: 'QEMU NVMe', serial: 'hv0001' }), disk('vdb', 100), disk('vdc', 50)], false);
    const plan = planInstall({ schemeVersion: 1, install: { mode: 'join', role: 'worker', device: '/dev/vda', dataDisk: '/dev/vdb', wipeDisksList: ['/dev/vdc'] } }, facts);
    expect(formatPlanText(plan)).toBe(PLAN_A);
  });

  it('msdos (force_mbr) on legacy BIOS: no boot partition, COS_STATE bootable, the Longhorn disk on COS_PERSISTENT', () => {
    const plan = planInstall(cfg({ forceMbr: true }), machine([disk('vda', 300)], false));
    expect(formatPlanText(plan)).toBe(PLAN_B);
  });
});

describe('planInstall refusals, word for word', () => {
  const facts = machine([disk('vda', 300)]);

  it('one problem is the message; several are listed; the hint says what to do next', () => {
    const one = refusal(() => planInstall(cfg({ device: '/dev/sdz' }), facts));
    expect(one.message).toBe('/dev/sdz is not a disk on this machine (known: /dev/vda)');
    expect(one.hint).toBe('fix the config (or choose another disk) and run `hvinstall plan` again');
    expect(one.where).toBe('install plan');
    expect(one.name).toBe('PlanRefusedError');
    expect(one.exitCode).toBe(1);
    const many = refusal(() => planInstall(cfg({ forceMbr: true, dataDisk: '/dev/vdb' }), machine([disk('vda', 100), disk('vdb', 10)], true)));
    expect(many.message).toBe(
      'the install cannot proceed:\n' +
        '  - cannot force MBR on UEFI system: UEFI (remove install.force_mbr)\n' +
        '  - installation disk size is too small. Minimum 180Gi is required (/dev/vda is 100Gi)\n' +
        '  - data disk size is too small. Minimum 50Gi is required (/dev/vdb is 10Gi)',
    );
    expect(many.problems).toHaveLength(3);
  });

  it('the target disk', () => {
    expect(message(() => planInstall(cfg({ device: undefined }), facts))).toBe('install.device is required: name the disk to install onto (or pass --device)');
    expect(message(() => planInstall(cfg({ device: '   ' }), facts))).toBe('install.device is required: name the disk to install onto (or pass --device)');
    expect(message(() => planInstall(cfg(), machine([])))).toBe('/dev/vda is not a disk on this machine (known: none)');
    expect(message(() => planInstall(cfg(), machine([disk('vda', 300), disk('vdb', 300)]), { device: '/dev/vdb' }))).toBe(
      '--device /dev/vdb is not the disk named in the config (install.device: /dev/vda); refusing to touch a disk the config does not name',
    );
    expect(message(() => planInstall(cfg({ device: '/dev/nope' }), machine([disk('vda', 300)]), { device: '/dev/vda' }))).toBe(
      '--device /dev/vda is not the disk named in the config (install.device: /dev/nope); refusing to touch a disk the config does not name',
    );
    expect(message(() => planInstall(cfg(), machine([disk('vda', 300, { logicalSectorSize: 520 })])))).toBe('/dev/vda has 520-byte logical sectors; only 512 and 4096 are supported');
    expect(message(() => planInstall(cfg(), machine([disk('vda', 300, { logicalSectorSize: 4096, sizeBytes: 300 * GiB + 512 })])))).toBe(
      `/dev/vda size ${300 * GiB + 512} is not a multiple of its 4096-byte sectors`,
    );
  });

  it('finds the disk by path, kernel name, /dev/name, a by-id link, with spaces or a trailing slash', () => {
    for (const device of ['/dev/vda', 'vda', '/dev/vda/', '  /dev/vda  ', '/dev/disk/by-id/virtio-vda']) {
      expect(planInstall(cfg({ device }), facts).device, device).toBe('/dev/vda');
    }
    expect(planInstall(cfg({ device: undefined }), facts, { device: ' vda ' }).device).toBe('/dev/vda');
    const two = machine([disk('vda', 300), disk('vdb', 100)]);
    expect(planInstall(cfg({ dataDisk: ' vdb ' }), two).dataDisk?.path).toBe('/dev/vdb');
  });

  it('firmware and table', () => {
    expect(message(() => planInstall(cfg({ forceMbr: true, forceEfi: true }), machine([disk('vda', 300)], false)))).toBe(
      'cannot force MBR on UEFI system: force_efi is set (remove install.force_mbr or install.force_efi)',
    );
    // msdos addresses 2^32 sectors of 512 bytes: up to 2^41 - 512 bytes is accepted.
    const limit = 2 ** 41 - 512;
    expect(planInstall(cfg({ forceMbr: true }), machine([disk('vda', 300, { sizeBytes: limit })], false)).table).toBe('msdos');
    expect(message(() => planInstall(cfg({ forceMbr: true }), machine([disk('vda', 300, { sizeBytes: limit + 512 })], false)))).toBe(
      `disk size too large for MBR partitioning table: ${limit + 512} (/dev/vda; msdos tables address at most ${limit} bytes, remove install.force_mbr)`,
    );
  });

  it('the data disk', () => {
    const two = (gib: number) => machine([disk('vda', 300), disk('vdb', gib)]);
    expect(message(() => planInstall(cfg({ dataDisk: '/dev/vdq' }), facts))).toBe('install.data_disk /dev/vdq is not a disk on this machine');
    expect(message(() => planInstall(cfg({ role: 'witness', dataDisk: '/dev/vdb' }), two(100)))).toBe(
      'a witness node holds no Longhorn data, but install.data_disk is /dev/vdb: remove it',
    );
    expect(planInstall(cfg({ dataDisk: '/dev/vdb' }), two(50)).dataDisk?.sizeBytes).toBe(50 * GiB);
    expect(message(() => planInstall(cfg({ dataDisk: '/dev/vdb' }), machine([disk('vda', 300), disk('vdb', 50, { sizeBytes: 50 * GiB - 512 })])))).toBe(
      'data disk size is too small. Minimum 50Gi is required (/dev/vdb is 49Gi)',
    );
  });

  it('the install disk minimum, at its boundary', () => {
    expect(planInstall(cfg(), machine([disk('vda', 250)])).device).toBe('/dev/vda');
    expect(message(() => planInstall(cfg(), machine([disk('vda', 250, { sizeBytes: 250 * GiB - 512 })])))).toBe(
      'installation disk size is too small. Minimum 250Gi is required (/dev/vda is 249Gi)',
    );
  });

  it('persistent_partition_size', () => {
    expect(message(() => planInstall(cfg({ persistentPartitionSize: '150GB' }), facts))).toBe("partition size must end with 'Mi' or 'Gi'. Decimals and negatives are not allowed");
    expect(message(() => planInstall(cfg({ persistentPartitionSize: '153599Mi' }), facts))).toBe('partition size is too small. Minimum 150Gi is required (install.persistent_partition_size: 153599Mi)');
    expect(planInstall(cfg({ persistentPartitionSize: '153600Mi' }), facts).partitions[4]!.sizeBytes).toBe(150 * GiB);
    expect(message(() => planInstall(cfg({ persistentPartitionSize: '227Gi' }), facts))).toBe(
      'partition size is too large. Maximum 226Gi is allowed (install.persistent_partition_size: 227Gi, /dev/vda is 300Gi)',
    );
    // skipchecks on a disk without room for the VM data share: nothing to clamp to.
    expect(refusal(() => planInstall(cfg({ skipchecks: true }), machine([disk('vda', 70)]))).problems).toEqual([
      'partition size is too large. Maximum 0Gi is allowed (install.persistent_partition_size: 150Gi default, /dev/vda is 70Gi)',
      'the layout does not fit on /dev/vda: it needs at least 177332 MiB, the disk has 71680 MiB',
    ]);
  });

  it('the layout must physically fit, at its boundary (witness, skipchecks: 23666 MiB fixed, 64 MiB for COS_PERSISTENT)', () => {
    const witness = cfg({ role: 'witness', skipchecks: true });
    const at = (mib: number) => machine([disk('vda', 30, { sizeBytes: mib * MiB })]);
    expect(planInstall(witness, at(23732)).partitions.at(-1)!.sizeBytes).toBe(64 * MiB);
    expect(message(() => planInstall(witness, at(23731)))).toBe('the layout does not fit on /dev/vda: it needs at least 23732 MiB, the disk has 23731 MiB');
  });
});

describe('planInstall notes', () => {
  it('a plain UEFI single-disk plan has none', () => {
    expect(planInstall(cfg(), machine([disk('vda', 300)])).notes).toEqual([]);
  });

  it('COS_STATE and COS_RECOVERY grow only past Harvester sizes: 4700 MiB fits 15 GiB exactly, 3700 MiB fits 8 GiB exactly', () => {
    const facts = machine([disk('vda', 300)]);
    const at4700 = planInstall(cfg(), facts, { systemSizeMiB: 4700 });
    expect(at4700.partitions.find((p) => p.label === 'COS_STATE')!.sizeBytes).toBe(15360 * MiB);
    expect(at4700.notes.filter((n) => n.startsWith('COS_STATE'))).toEqual([]);
    const at3700 = planInstall(cfg(), facts, { systemSizeMiB: 3700 });
    expect(at3700.partitions.find((p) => p.label === 'COS_RECOVERY')!.sizeBytes).toBe(8192 * MiB);
    expect(at3700.notes).toEqual([]);
    const at6144 = planInstall(cfg(), facts, { systemSizeMiB: 6144 });
    expect(at6144.notes).toEqual([
      "COS_STATE grown from 15360 to 20480 MiB to hold active, passive and an upgrade's transition image of 6144 MiB each (harvester#7457)",
      'COS_RECOVERY grown from 8192 to 13312 MiB to hold recovery.img and its upgrade transition image',
    ]);
  });

  it('witness: the Longhorn default disk lives on COS_PERSISTENT; a clamp says from what to what', () => {
    expect(planInstall(cfg({ role: 'witness' }), machine([disk('vda', 300)])).notes).toEqual([
      'no Longhorn data partition (witness role): /var/lib/harvester/defaultdisk lives on COS_PERSISTENT',
    ]);
    expect(planInstall(cfg({ skipchecks: true, persistentPartitionSize: '500Gi' }), machine([disk('vda', 100)])).notes).toEqual([
      'persistent_partition_size clamped from 512000 to 27534 MiB (skipchecks)',
    ]);
  });

  it('the role defaults to default, the mode to create', () => {
    const plan = planInstall({ install: { device: '/dev/vda' } }, machine([disk('vda', 300)]));
    expect([plan.role, plan.mode]).toEqual(['default', 'create']);
  });

  it('os.persistent_state_paths are added once, after Harvester\'s', () => {
    const plan = planInstall({ ...cfg(), os: { persistentStatePaths: ['/var/lib/extra', '/etc/ssh', '/var/lib/extra'] } }, machine([disk('vda', 300)]));
    expect(plan.persistentStatePaths.slice(-2)).toEqual(['/var/lib/longhorn', '/var/lib/extra']);
    expect(plan.persistentStatePaths.filter((p) => p === '/etc/ssh')).toHaveLength(1);
  });

  it('extra OEM files from the renderer are listed on COS_OEM between harvester.config and the install record', () => {
    const plan = planInstall(cfg(), machine([disk('vda', 300)]), { extraOemFiles: [{ path: '90_custom.yaml', mode: 0o600, what: 'yip' }] });
    expect(plan.files.map((f) => `${f.on}:${f.path}`)).toEqual(['COS_OEM:harvester.config', 'COS_OEM:90_custom.yaml', 'COS_OEM:install/install.log', 'COS_OEM:install/journal.json']);
  });

  it('destroys describes what is on each disk: model, serial, partitions, a whole-disk filesystem', () => {
    const target = disk('vda', 300, {
      model: 'Samsung',
      serial: 'S1',
      partitions: [
        { path: '/dev/vda1', sizeBytes: 64 * MiB, label: 'EFI', fsType: 'vfat', mountpoints: [] },
        { path: '/dev/vda2', sizeBytes: 10 * GiB, mountpoints: [] },
      ],
    });
    const data = disk('vdb', 100, { wholeDiskFs: { fsType: 'ext4', label: 'OLD' } });
    const plan = planInstall(cfg({ dataDisk: '/dev/vdb' }), machine([target, data]));
    expect(plan.destroys).toEqual(['/dev/vda (300 GiB, Samsung S1): /dev/vda1 EFI vfat 64 MiB; /dev/vda2 10 GiB', '/dev/vdb (100 GiB) ext4 OLD on the whole disk']);
  });
});

describe('partition and filesystem commands, word for word', () => {
  it('partition nodes get a p after a disk name that ends in a digit', () => {
    expect(partitionPath('/dev/mmcblk0', 1)).toBe('/dev/mmcblk0p1');
    expect(partitionPath('/dev/sdb', 12)).toBe('/dev/sdb12');
  });

  it('the table command follows the plan: a GPT or an msdos sfdisk script', () => {
    const gpt = planInstall(cfg(), machine([disk('vda', 300)]));
    const mbr = planInstall(cfg({ forceMbr: true }), machine([disk('vda', 300)], false));
    expect(partitionTableCommand(gpt)).toEqual(gptCommand(gpt));
    expect(partitionTableCommand(mbr)).toEqual(msdosCommand(mbr));
    expect(partitionTableCommand(gpt).input).toMatch(/^label: gpt\n/);
    expect(partitionTableCommand(mbr).input).toMatch(/^label: dos\n/);
  });

  it('sfdisk: its flags, the label id from the disk GUID, one line per partition', () => {
    const plan = planInstall(cfg({ forceMbr: true }), machine([disk('vda', 300)], false));
    const c = msdosCommand(plan);
    expect(c.args).toEqual(['--no-reread', '--no-tell-kernel', '--wipe', 'always', '/dev/vda']);
    const lines = c.input!.trimEnd().split('\n');
    expect(lines[0]).toBe('label: dos');
    expect(lines[1]).toBe(`label-id: 0x${plan.diskGuid.replace(/-/g, '').slice(0, 8)}`);
    expect(lines[1]).toMatch(/^label-id: 0x[0-9a-f]{8}$/);
  });

  it('mkfs: vfat and ext4 with and without a planned UUID', () => {
    expect(mkfsCommand({ fs: 'vfat', label: 'COS_GRUB' }, '/dev/vda1')).toEqual({ file: 'mkfs.vfat', args: ['-n', 'COS_GRUB', '/dev/vda1'] });
    expect(mkfsCommand({ fs: 'ext4', label: 'COS_OEM' }, '/dev/vda2')).toEqual({ file: 'mkfs.ext4', args: ['-F', '-q', '-L', 'COS_OEM', '/dev/vda2'] });
  });
});

const PLAN_A = `Target /dev/vda: 200 GiB, 4096-byte sectors, GPT, legacy BIOS boot
Mode join, role worker; active.img 3072 MiB

Partitions:
  #  start      size       label           fs    type  mount
  1  1 MiB      1 MiB      (bios)          -     EF02  -
  2  2 MiB      50 MiB     COS_OEM         ext4  8300  /oem
  3  52 MiB     8 GiB      COS_RECOVERY    ext4  8300  -
  4  8244 MiB   15 GiB     COS_STATE       ext4  8300  /run/initramfs/cos-state
  5  23604 MiB  176.9 GiB  COS_PERSISTENT  ext4  8300  /usr/local

Data disk /dev/vdb (100 GiB): formatted whole, ext4 HARV_LH_DEFAULT, mounted at /var/lib/harvester/defaultdisk

Wiped (partition table zapped): /dev/vdc

Images:
  file              on            label        fs    size
  cOS/active.img    COS_STATE     COS_ACTIVE   ext2  3072 MiB
  cOS/passive.img   COS_STATE     COS_PASSIVE  ext2  3072 MiB
  cOS/recovery.img  COS_RECOVERY  COS_SYSTEM   ext2  3072 MiB

Files:
  COS_OEM:/harvester.config      0600  the config in Harvester's lowercase form (holds the token)
  COS_OEM:/install/install.log   0600  the install log, secrets redacted
  COS_OEM:/install/journal.json  0644  the step journal of this install
  COS_PERSISTENT:/.state/<path>.bind for 21 persistent paths

Boot chain: hvinstall's own grub (no --source to look at)

Steps:
   1. guard      lock the disk; refuse a mounted, swap, held or boot-medium disk
   2. clear      deactivate holders, clear stale COS_*/HARV_* labels, wipe signatures
   3. partition  write the partition table and wait until the kernel shows every partition
   4. format     make the filesystems with their labels (and the data disk)
   5. verify     check every label resolves to exactly one device
   6. deploy     build active.img, copy passive.img and recovery.img, write state.yaml
   7. bootloader install grub with active/passive/recovery entries and grubenv
   8. oem        write /oem: harvester.config and the node configuration files
   9. persistent create the persistent state layout under COS_PERSISTENT/.state; copy the image bundle (if any) to /var/lib/rancher/hvagent/bundle there
  10. agent      copy the self-contained hvagent to COS_PERSISTENT (/usr/local/lib/hvagent), link its units (hvagent.service, hvagent-console.service) into the persistent /etc/systemd and enable them
  11. chroot     in a chroot of active.img (/dev /proc /sys /run, /oem and /usr/local bound): SELinux relabel when the image has a policy and setfiles, then os.after_install_chroot_commands
  12. finish     write the install log, sync, unmount, release the disk

Notes:
  - /dev/vda has 4096-byte sectors: most legacy BIOS firmware cannot boot from such a disk; prefer UEFI (install.force_efi)

Destroys everything on:
  - /dev/vda (200 GiB, QEMU NVMe hv0001): no partitions
  - /dev/vdb (100 GiB): no partitions
  - /dev/vdc (50 GiB): no partitions (partition table wiped)
`;

const PLAN_B = `Target /dev/vda: 300 GiB, 512-byte sectors, msdos (MBR), legacy BIOS boot
Mode create, role default; active.img 3072 MiB

Partitions:
  #  start      size       label           fs    type     mount
  1  1 MiB      50 MiB     COS_OEM         ext4  83       /oem
  2  51 MiB     8 GiB      COS_RECOVERY    ext4  83       -
  3  8243 MiB   15 GiB     COS_STATE       ext4  83 boot  /run/initramfs/cos-state
  4  23603 MiB  277.0 GiB  COS_PERSISTENT  ext4  83       /usr/local

Images:
  file              on            label        fs    size
  cOS/active.img    COS_STATE     COS_ACTIVE   ext2  3072 MiB
  cOS/passive.img   COS_STATE     COS_PASSIVE  ext2  3072 MiB
  cOS/recovery.img  COS_RECOVERY  COS_SYSTEM   ext2  3072 MiB

Files:
  COS_OEM:/harvester.config      0600  the config in Harvester's lowercase form (holds the token)
  COS_OEM:/install/install.log   0600  the install log, secrets redacted
  COS_OEM:/install/journal.json  0644  the step journal of this install
  COS_PERSISTENT:/.state/<path>.bind for 22 persistent paths

Boot chain: hvinstall's own grub (no --source to look at)

Steps:
   1. guard      lock the disk; refuse a mounted, swap, held or boot-medium disk
   2. clear      deactivate holders, clear stale COS_*/HARV_* labels, wipe signatures
   3. partition  write the partition table and wait until the kernel shows every partition
   4. format     make the filesystems with their labels (and the data disk)
   5. verify     check every label resolves to exactly one device
   6. deploy     build active.img, copy passive.img and recovery.img, write state.yaml
   7. bootloader install grub with active/passive/recovery entries and grubenv
   8. oem        write /oem: harvester.config and the node configuration files
   9. persistent create the persistent state layout under COS_PERSISTENT/.state; copy the image bundle (if any) to /var/lib/rancher/hvagent/bundle there
  10. agent      copy the self-contained hvagent to COS_PERSISTENT (/usr/local/lib/hvagent), link its units (hvagent.service, hvagent-console.service) into the persistent /etc/systemd and enable them
  11. chroot     in a chroot of active.img (/dev /proc /sys /run, /oem and /usr/local bound): SELinux relabel when the image has a policy and setfiles, then os.after_install_chroot_commands
  12. finish     write the install log, sync, unmount, release the disk

Notes:
  - no Longhorn data partition (msdos table without data_disk): /var/lib/harvester/defaultdisk lives on COS_PERSISTENT

Destroys everything on:
  - /dev/vda (300 GiB): no partitions
`;

describe('formatPlanText: the target line on UEFI (the mutation run\'s survivors)', () => {
  it('says GPT and UEFI boot for a UEFI machine, and prints no empty Notes: heading when there are none', () => {
    const text = formatPlanText(planInstall(cfg(), machine([disk('vda', 300)])));
    expect(text.split('\n')[0]).toBe('Target /dev/vda: 300 GiB, 512-byte sectors, GPT, UEFI boot');
    expect(text).not.toContain('Notes:');
  });
});
