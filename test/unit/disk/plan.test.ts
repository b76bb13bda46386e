import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { planInstall, PlanRefusedError, targetInUseProblems, LONGHORN_DEFAULT_DISK } from '../../../installer/disk/plan.js';
import { gptCommand } from '../../../installer/disk/commands.js';
import { formatPlanText } from '../../../installer/disk/format-plan.js';
import type { HarvesterConfig } from '../../../config/types.js';
import type { InstallPlan } from '../../../installer/disk/types.js';
import { disk, machine, GiB } from './facts-fixture.js';

const execFileAsync = promisify(execFile);

/** Runs the plan's table command against a file in place of the disk. */
async function writeTable(plan: InstallPlan, file: string): Promise<void> {
  const cmd = gptCommand(plan);
  const run = execFileAsync(cmd.file, [...cmd.args.slice(0, -1), file]);
  run.child.stdin!.end(cmd.input);
  await run;
}

const MiB = 1024 * 1024;
/**
 * What GPT keeps at the end of a disk (UEFI spec, GPT disk layout): the backup entry array, 128
 * entries of 128 bytes, and the backup header, one sector. 33 sectors of 512, 5 of 4096.
 */
const GPT_BACKUP_BYTES: Record<number, number> = { 512: 33 * 512, 4096: 5 * 4096 };

function cfg(install: HarvesterConfig['install'] = {}, extra: Partial<HarvesterConfig> = {}): HarvesterConfig {
  return { schemeVersion: 1, token: 'secret-token', os: { hostname: 'node1' }, install: { mode: 'create', device: '/dev/vda', ...install }, ...extra };
}

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(PlanRefusedError);
    return (err as Error).message;
  }
  throw new Error('expected a refusal');
}

/** Invariants every plan must hold: aligned, contiguous, in bounds, labels unique. */
function checkGeometry(plan: InstallPlan): void {
  const sector = plan.logicalSectorSize;
  let prevEnd = MiB;
  for (const p of plan.partitions) {
    expect(p.startBytes % MiB).toBe(0);
    expect(p.sizeBytes % MiB).toBe(0);
    expect(p.startBytes).toBe(prevEnd);
    expect(p.startSector * sector).toBe(p.startBytes);
    expect((p.endSector + 1) * sector).toBe(p.startBytes + p.sizeBytes);
    prevEnd = p.startBytes + p.sizeBytes;
  }
  const limit = plan.table === 'gpt' ? plan.deviceSizeBytes - GPT_BACKUP_BYTES[sector]! : plan.deviceSizeBytes;
  expect(prevEnd).toBeLessThanOrEqual(limit);
  expect(limit - prevEnd).toBeLessThan(MiB);
  const labels = plan.partitions.map((p) => p.label).filter(Boolean);
  expect(new Set(labels).size).toBe(labels.length);
  const uuids = plan.partitions.map((p) => p.partUuid);
  expect(new Set(uuids).size).toBe(uuids.length);
}

const summary = (plan: InstallPlan) => plan.partitions.map((p) => [p.label ?? p.name, p.sizeBytes / MiB]);

describe('planInstall layout matrix', () => {
  const firmwares = [
    { name: 'EFI', uefi: true, forceMbr: false },
    { name: 'BIOS', uefi: false, forceMbr: false },
    { name: 'MBR', uefi: false, forceMbr: true },
  ];
  const shapes = ['single', 'data-disk', 'witness'] as const;
  const sectors = [512, 4096];
  const persistentSizes = [undefined, '150Gi', '200Gi', '163840Mi'];

  for (const fw of firmwares) {
    for (const shape of shapes) {
      for (const sector of sectors) {
        for (const pSize of persistentSizes) {
          it(`${fw.name} × ${shape} × ${sector} × persistent ${pSize ?? 'default'}`, () => {
            const target = disk('vda', 500, { logicalSectorSize: sector, physicalSectorSize: sector });
            const data = disk('vdb', 100, { logicalSectorSize: sector });
            const facts = machine([target, data], fw.uefi);
            const plan = planInstall(
              cfg({
                forceMbr: fw.forceMbr,
                role: shape === 'witness' ? 'witness' : 'default',
                mode: shape === 'witness' ? 'join' : 'create',
                dataDisk: shape === 'data-disk' ? '/dev/vdb' : undefined,
                persistentPartitionSize: pSize,
              }),
              facts,
            );
            checkGeometry(plan);
            expect(plan.logicalSectorSize).toBe(sector);
            expect(plan.table).toBe(fw.forceMbr ? 'msdos' : 'gpt');
            const labels = plan.partitions.map((p) => p.label ?? p.name);
            const boot = fw.forceMbr ? [] : fw.uefi ? ['COS_GRUB'] : ['bios'];
            const sharesDisk = shape === 'single' && !fw.forceMbr;
            expect(labels).toEqual([...boot, 'COS_OEM', 'COS_RECOVERY', 'COS_STATE', 'COS_PERSISTENT', ...(sharesDisk ? ['HARV_LH_DEFAULT'] : [])]);
            const byLabel = Object.fromEntries(plan.partitions.map((p) => [p.label ?? p.name, p]));
            expect(byLabel.COS_OEM!.sizeBytes).toBe(50 * MiB);
            expect(byLabel.COS_RECOVERY!.sizeBytes).toBe(8192 * MiB);
            expect(byLabel.COS_STATE!.sizeBytes).toBe(15360 * MiB);
            if (fw.uefi) expect(byLabel.COS_GRUB).toMatchObject({ sizeBytes: 64 * MiB, fs: 'vfat', typeCode: 'EF00', startBytes: MiB });
            if (!fw.uefi && !fw.forceMbr) expect(byLabel.bios).toMatchObject({ sizeBytes: MiB, fs: 'none', typeCode: 'EF02' });
            if (fw.forceMbr) {
              expect(byLabel.COS_STATE!.bootable).toBe(true);
              expect(plan.partitions.every((p) => p.typeCode === '83')).toBe(true);
            }
            const persistent = byLabel.COS_PERSISTENT!;
            if (sharesDisk) {
              const wantMiB = pSize === undefined ? 150 * 1024 : pSize.endsWith('Gi') ? Number.parseInt(pSize) * 1024 : Number.parseInt(pSize);
              expect(persistent.sizeBytes).toBe(wantMiB * MiB);
              expect(byLabel.HARV_LH_DEFAULT!.mount).toBe(LONGHORN_DEFAULT_DISK);
            } else {
              // the rest of the disk; persistent_partition_size only applies to a shared disk
              expect(persistent.number).toBe(plan.partitions.length);
            }
            if (shape === 'data-disk') expect(plan.dataDisk).toMatchObject({ path: '/dev/vdb', label: 'HARV_LH_DEFAULT', fs: 'ext4' });
            else expect(plan.dataDisk).toBeUndefined();
            const noDataPartition = !sharesDisk && shape !== 'data-disk';
            expect(plan.persistentStatePaths.includes(LONGHORN_DEFAULT_DISK)).toBe(noDataPartition);
          });
        }
      }
    }
  }

  it('prints the table, images, files and steps', () => {
    const plan = planInstall(cfg(), machine([disk('vda', 300)]));
    const text = formatPlanText(plan);
    expect(text).toContain('COS_GRUB');
    expect(text).toContain('HARV_LH_DEFAULT');
    expect(text).toContain('cOS/active.img');
    expect(text).toContain('COS_OEM:/harvester.config');
    expect(text).toMatch(/1\. guard/);
    expect(text).not.toContain('secret-token');
  });

  it('exact layout of a 300 GiB UEFI single disk', () => {
    const plan = planInstall(cfg(), machine([disk('vda', 300)]));
    // 300 GiB is 307200 MiB; the first MiB is the alignment gap, the GPT backup takes part of the last MiB.
    expect(summary(plan)).toEqual([
      ['COS_GRUB', 64],
      ['COS_OEM', 50],
      ['COS_RECOVERY', 8192],
      ['COS_STATE', 15360],
      ['COS_PERSISTENT', 153600],
      ['HARV_LH_DEFAULT', 307200 - 1 - 1 - 64 - 50 - 8192 - 15360 - 153600],
    ]);
    expect(plan.partitions[0]!.startSector).toBe(2048);
  });

  // The sgdisk call the install made before it wrote its GPT with sfdisk: the reference for the table Harvester's tools read.
  it.concurrent.for([
    ['EFI', true],
    ['BIOS', false],
  ] as const)('%s: the sfdisk script writes over an old one byte for byte the table sgdisk --zap-all --clear wrote (protective MBR, both headers and entry arrays), the old boot code zeroed', async ([, efi], { expect }) => {
    const dir = mkdtempSync(path.join(tmpdir(), 'hvplan-sfdisk-'));
    try {
      const sizeBytes = 300 * GiB + 20 * 1024;
      const plan = planInstall(cfg(), machine([disk('vda', 300, { sizeBytes })], efi));
      const files = [path.join(dir, 'sgdisk.raw'), path.join(dir, 'sfdisk.raw')];
      const junk = Buffer.alloc(64 * 1024, 0xa5);
      for (const f of files) {
        await execFileAsync('truncate', ['-s', String(sizeBytes), f]);
        writeFileSync(f, junk, { flag: 'r+' });
        const fd = openSync(f, 'r+');
        writeSync(fd, junk, 0, junk.length, sizeBytes - junk.length);
        closeSync(fd);
      }
      const sg = ['--zap-all', '--clear', `--disk-guid=${plan.diskGuid}`];
      for (const p of plan.partitions) sg.push(`--new=${p.number}:${p.startSector}:${p.endSector}`, `--typecode=${p.number}:${p.typeCode}`, `--change-name=${p.number}:${p.name}`, `--partition-guid=${p.number}:${p.partUuid}`);
      await execFileAsync('sgdisk', [...sg, files[0]!]);
      await writeTable(plan, files[1]!);
      const [head, tail] = [34 * 512, 33 * 512];
      const ends = files.map((f) => {
        const fd = openSync(f, 'r');
        const b = Buffer.alloc(head + tail);
        readSync(fd, b, 0, head, 0);
        readSync(fd, b, head, tail, sizeBytes - tail);
        closeSync(fd);
        return b;
      });
      expect(ends[1]!.subarray(512, 520).toString()).toBe('EFI PART');
      // Byte for byte from the MBR's partition records on; before them (the boot code) sgdisk kept the
      // old bytes, sfdisk's --wipe leaves zeros (the clear step has zeroed them already, grub writes its own).
      expect(ends[1]!.subarray(440).equals(ends[0]!.subarray(440))).toBe(true);
      expect(ends[1]!.subarray(0, 440).every((b) => b === 0)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // Sizes a few KiB either side of a MiB boundary: where the GPT backup decides whether the last MiB is usable.
  it.concurrent.for([300 * GiB, 300 * GiB + 10 * 1024, 300 * GiB + 20 * 1024, 300 * GiB + MiB - 512])(
    'sgdisk itself accepts the planned table on a sparse disk of %d bytes; the last partition ends within a MiB of its last usable sector',
    async (sizeBytes, { expect }) => {
      const dir = mkdtempSync(path.join(tmpdir(), 'hvplan-sgdisk-'));
      try {
        const file = path.join(dir, 'disk.raw');
        await execFileAsync('truncate', ['-s', String(sizeBytes), file]);
        const plan = planInstall(cfg(), machine([disk('vda', 300, { sizeBytes })]));
        await writeTable(plan, file);
        expect((await execFileAsync('sgdisk', ['--verify', file], { encoding: 'utf8' })).stdout).toContain('No problems found');
        const printed = (await execFileAsync('sgdisk', ['-p', file], { encoding: 'utf8' })).stdout;
        const lastUsable = Number(/last usable sector is (\d+)/.exec(printed)![1]);
        const last = plan.partitions.at(-1)!;
        const info = (await execFileAsync('sgdisk', ['-i', String(last.number), file], { encoding: 'utf8' })).stdout;
        expect(Number(/Last sector: (\d+)/.exec(info)![1])).toBe(last.endSector);
        expect(last.endSector).toBeLessThanOrEqual(lastUsable);
        expect((lastUsable + 1) * 512 - (last.endSector + 1) * 512).toBeLessThan(MiB);
        expect(printed).toContain(`Disk identifier (GUID): ${plan.diskGuid.toUpperCase()}`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it('4Kn sectors: sector numbers are in 4096-byte units; legacy BIOS on 4Kn gets a warning note', () => {
    const bios = planInstall(cfg(), machine([disk('vda', 300, { logicalSectorSize: 4096 })], false));
    expect(bios.notes.join('\n')).toContain('most legacy BIOS firmware cannot boot');
    const plan = planInstall(cfg(), machine([disk('vda', 300, { logicalSectorSize: 4096 })]));
    expect(plan.notes.join('\n')).not.toContain('legacy BIOS');
    expect(plan.partitions[0]!.startSector).toBe(256);
    expect(plan.partitions[0]!.endSector).toBe(256 + 64 * 256 - 1);
  });

  it('resolves the device through a /dev/disk/by-id link', () => {
    const plan = planInstall(cfg({ device: '/dev/disk/by-id/virtio-vda' }), machine([disk('vda', 300)]));
    expect(plan.device).toBe('/dev/vda');
  });

  it('is deterministic: the same inputs give the same digest and UUIDs; another config does not', () => {
    const facts = machine([disk('vda', 300)]);
    const a = planInstall(cfg(), facts);
    const b = planInstall(cfg(), facts);
    expect(b).toEqual(a);
    const c = planInstall(cfg({}, { os: { hostname: 'node2' } }), facts);
    expect(c.digest).not.toBe(a.digest);
    expect(c.partitions[1]!.fsUuid).not.toBe(a.partitions[1]!.fsUuid);
    expect(a.partitions[0]!.fsUuid).toMatch(/^[0-9A-F]{8}$/);
    expect(a.partitions[1]!.fsUuid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('a data_disk equal to the device is ignored (Harvester clears it)', () => {
    const plan = planInstall(cfg({ dataDisk: '/dev/vda' }), machine([disk('vda', 300)]));
    expect(plan.dataDisk).toBeUndefined();
    expect(plan.partitions.at(-1)!.label).toBe('HARV_LH_DEFAULT');
  });

  it('wipe_disks_list and wipe_all_disks pick other disks only; missing ones are skipped with a note', () => {
    const oldInstall = disk('vdc', 300, { partitions: [{ path: '/dev/vdc2', sizeBytes: 50 * MiB, label: 'COS_OEM', mountpoints: [] }] });
    const facts = machine([disk('vda', 300), disk('vdb', 100), oldInstall, disk('vdd', 100)]);
    const listed = planInstall(cfg({ wipeDisksList: ['/dev/vdd', '/dev/vda', '/dev/nope'] }), facts);
    expect(listed.wipeDisks).toEqual(['/dev/vdd']);
    expect(listed.notes.join('\n')).toContain('/dev/nope does not exist');
    const all = planInstall(cfg({ wipeAllDisks: true, dataDisk: '/dev/vdb' }), facts);
    expect(all.wipeDisks).toEqual(['/dev/vdc']);
    expect(all.destroys.some((d) => d.startsWith('/dev/vdc') && d.includes('COS_OEM'))).toBe(true);
  });

  it('wipe_all_disks wipes old installs only: a disk with partitions but no COS_OEM is kept', () => {
    const oldInstall = disk('vdc', 300, { partitions: [{ path: '/dev/vdc2', sizeBytes: 50 * MiB, label: 'COS_OEM', mountpoints: [] }] });
    const someoneElses = disk('vde', 300, { partitions: [{ path: '/dev/vde1', sizeBytes: 100 * GiB, label: 'backups', mountpoints: [] }] });
    const plan = planInstall(cfg({ wipeAllDisks: true }), machine([disk('vda', 300), oldInstall, someoneElses]));
    expect(plan.wipeDisks).toEqual(['/dev/vdc']);
  });

  it('grows COS_STATE and COS_RECOVERY for an OS image larger than Harvester assumes (harvester#7457)', () => {
    const plan = planInstall(cfg(), machine([disk('vda', 300)]), { systemSizeMiB: 6144 });
    const state = plan.partitions.find((p) => p.label === 'COS_STATE')!;
    const recovery = plan.partitions.find((p) => p.label === 'COS_RECOVERY')!;
    // active + passive + transition, with room for ext4 metadata
    expect(state.sizeBytes / MiB).toBeGreaterThanOrEqual(3 * 6144 * 1.05);
    expect(recovery.sizeBytes / MiB).toBeGreaterThanOrEqual(2 * 6144 * 1.05);
    expect(plan.images.every((i) => i.sizeMiB === 6144)).toBe(true);
    expect(plan.notes.join('\n')).toContain('harvester#7457');
    checkGeometry(plan);
  });

  it('sizes active.img from the source tree when it is larger than 3 GiB', () => {
    const small = planInstall(cfg(), machine([disk('vda', 300)]), { sourceSizeBytes: 100 * MiB });
    expect(small.systemSizeMiB).toBe(3072);
    const big = planInstall(cfg(), machine([disk('vda', 300)]), { sourceSizeBytes: 4 * GiB });
    expect(big.systemSizeMiB).toBeGreaterThan(4096);
    expect(big.systemSizeMiB % 256).toBe(0);
  });

  it('skipchecks: small disks are allowed when the layout fits, and a too-large persistent size is clamped', () => {
    const plan = planInstall(cfg({ skipchecks: true, persistentPartitionSize: '500Gi' }), machine([disk('vda', 100)]));
    checkGeometry(plan);
    expect(plan.notes.join('\n')).toContain('clamped');
    const data = plan.partitions.find((p) => p.label === 'HARV_LH_DEFAULT')!;
    expect(data.sizeBytes / MiB).toBeGreaterThanOrEqual(51200 - 2);
  });
});

describe('planInstall refusals', () => {
  it('no device', () => {
    expect(refusal(() => planInstall(cfg({ device: undefined }), machine([disk('vda', 300)])))).toContain('install.device is required');
  });
  it('a device that is not on the machine', () => {
    expect(refusal(() => planInstall(cfg({ device: '/dev/sdz' }), machine([disk('vda', 300)])))).toMatch(/\/dev\/sdz is not a disk on this machine \(known: \/dev\/vda\)/);
  });
  it('--device naming a disk the config does not name', () => {
    const m = refusal(() => planInstall(cfg(), machine([disk('vda', 300), disk('vdb', 300)]), { device: '/dev/vdb' }));
    expect(m).toContain('not the disk named in the config');
  });
  it('--device may name the configured disk by another path, and supplies a device the config lacks', () => {
    const facts = machine([disk('vda', 300)]);
    expect(planInstall(cfg(), facts, { device: '/dev/disk/by-id/virtio-vda' }).device).toBe('/dev/vda');
    expect(planInstall(cfg({ device: undefined }), facts, { device: '/dev/vda' }).device).toBe('/dev/vda');
  });
  it('single disk below 250 GiB', () => {
    expect(refusal(() => planInstall(cfg(), machine([disk('vda', 249)])))).toContain('installation disk size is too small. Minimum 250Gi is required');
  });
  it('install disk below 180 GiB with a data disk, and witness below 180 GiB', () => {
    expect(refusal(() => planInstall(cfg({ dataDisk: '/dev/vdb' }), machine([disk('vda', 179), disk('vdb', 100)])))).toContain('Minimum 180Gi is required');
    expect(refusal(() => planInstall(cfg({ role: 'witness' }), machine([disk('vda', 179)])))).toContain('Minimum 180Gi is required');
    expect(planInstall(cfg({ role: 'witness' }), machine([disk('vda', 180)])).partitions.at(-1)!.label).toBe('COS_PERSISTENT');
  });
  it('data disk below 50 GiB', () => {
    expect(refusal(() => planInstall(cfg({ dataDisk: '/dev/vdb' }), machine([disk('vda', 200), disk('vdb', 49)])))).toContain('data disk size is too small. Minimum 50Gi is required');
  });
  it('data disk that does not exist', () => {
    expect(refusal(() => planInstall(cfg({ dataDisk: '/dev/vdq' }), machine([disk('vda', 300)])))).toContain('install.data_disk /dev/vdq is not a disk');
  });
  it('witness with a data disk', () => {
    expect(refusal(() => planInstall(cfg({ role: 'witness', dataDisk: '/dev/vdb' }), machine([disk('vda', 300), disk('vdb', 100)])))).toContain('witness node holds no Longhorn data');
  });
  it('persistent size: format, too small, too large', () => {
    const facts = machine([disk('vda', 300)]);
    expect(refusal(() => planInstall(cfg({ persistentPartitionSize: '150GB' }), facts))).toContain("partition size must end with 'Mi' or 'Gi'");
    expect(refusal(() => planInstall(cfg({ persistentPartitionSize: '1.5Gi' }), facts))).toContain("partition size must end with 'Mi' or 'Gi'");
    expect(refusal(() => planInstall(cfg({ persistentPartitionSize: '149Gi' }), facts))).toContain('partition size is too small. Minimum 150Gi is required');
    // 300 GiB = 307200 MiB; max = 307200 - 74866 = 232334 MiB = 226 GiB
    expect(refusal(() => planInstall(cfg({ persistentPartitionSize: '227Gi' }), facts))).toContain('partition size is too large. Maximum 226Gi is allowed');
    expect(planInstall(cfg({ persistentPartitionSize: '226Gi' }), facts).partitions[4]!.sizeBytes).toBe(226 * GiB);
  });
  it('force_mbr on UEFI', () => {
    expect(refusal(() => planInstall(cfg({ forceMbr: true }), machine([disk('vda', 300)], true)))).toContain('cannot force MBR on UEFI system');
    expect(refusal(() => planInstall(cfg({ forceMbr: true, forceEfi: true }), machine([disk('vda', 300)], false)))).toContain('cannot force MBR on UEFI system');
  });
  it('force_mbr on a disk above 2 TiB', () => {
    const m = refusal(() => planInstall(cfg({ forceMbr: true }), machine([disk('vda', 2048)], false)));
    expect(m).toContain('disk size too large for MBR partitioning table: 2199023255552');
  });
  it('several problems are reported together', () => {
    const m = refusal(() => planInstall(cfg({ forceMbr: true, dataDisk: '/dev/vdb' }), machine([disk('vda', 100), disk('vdb', 10)], true)));
    expect(m).toContain('cannot force MBR');
    expect(m).toContain('Minimum 180Gi');
    expect(m).toContain('data disk size is too small');
  });
  it('a layout that does not fit, even with skipchecks', () => {
    const m = refusal(() => planInstall(cfg({ skipchecks: true, role: 'witness' }), machine([disk('vda', 20)])));
    expect(m).toMatch(/the layout does not fit on \/dev\/vda: it needs at least \d+ MiB, the disk has 20480 MiB/);
  });
  it('unsupported sector size and a size that is not whole sectors', () => {
    expect(refusal(() => planInstall(cfg(), machine([disk('vda', 300, { logicalSectorSize: 520 })])))).toContain('520-byte logical sectors');
    expect(refusal(() => planInstall(cfg(), machine([disk('vda', 300, { logicalSectorSize: 4096, sizeBytes: 300 * GiB + 512 })])))).toContain('not a multiple');
  });
});

describe('targetInUseProblems', () => {
  it('a free disk has none', () => {
    expect(targetInUseProblems(disk('vda', 300))).toEqual([]);
  });
  it('mounted, swap, held, boot medium, read-only each refuse with what to do', () => {
    const d = disk('vda', 300, {
      readOnly: true,
      partitions: [{ path: '/dev/vda1', sizeBytes: GiB, mountpoints: ['/mnt/x'] }],
      inUse: { mountpoints: [], swap: true, holders: ['dm-0'], bootMedium: true },
    });
    const p = targetInUseProblems(d).join('\n');
    expect(p).toContain('/dev/vda is mounted (/mnt/x): unmount it first');
    expect(p).toContain('active swap: run swapoff');
    expect(p).toContain('held by dm-0');
    expect(p).toContain('boot medium');
    expect(p).toContain('read-only');
  });
  it("ignores the installer's own mounts (left by a killed run)", () => {
    const d = disk('vda', 300, { partitions: [{ path: '/dev/vda2', sizeBytes: GiB, mountpoints: ['/run/hvinstall/mnt/oem'] }] });
    expect(targetInUseProblems(d, { ownMountPrefix: '/run/hvinstall/' })).toEqual([]);
  });
});
