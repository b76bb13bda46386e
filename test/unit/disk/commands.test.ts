import { describe, expect, it } from 'vitest';
import { gptCommand, msdosCommand, mkfsCommand, partitionPath, dataDiskMkfsCommand } from '../../../installer/disk/commands.js';
import { parseBlkidExport } from '../../../installer/disk/block.js';
import { planInstall } from '../../../installer/disk/plan.js';
import { disk, machine } from './facts-fixture.js';

describe('partition and filesystem command lines', () => {
  it('partition node names follow the kernel', () => {
    expect(partitionPath('/dev/sda', 2)).toBe('/dev/sda2');
    expect(partitionPath('/dev/nvme0n1', 2)).toBe('/dev/nvme0n1p2');
    expect(partitionPath('/dev/loop3', 6)).toBe('/dev/loop3p6');
  });

  it('sgdisk: one call with exact sectors, types, names and the planned GUIDs', () => {
    const plan = planInstall({ install: { device: '/dev/sda' } }, machine([disk('sda', 300)]));
    const c = gptCommand(plan);
    expect(c.file).toBe('sgdisk');
    expect(c.args.slice(0, 3)).toEqual(['--zap-all', '--clear', `--disk-guid=${plan.diskGuid}`]);
    expect(c.args).toContain('--new=1:2048:133119');
    expect(c.args).toContain('--typecode=1:EF00');
    expect(c.args).toContain('--change-name=2:oem');
    expect(c.args).toContain(`--partition-guid=4:${plan.partitions[3]!.partUuid}`);
    expect(c.args.at(-1)).toBe('/dev/sda');
  });

  it('sfdisk script for msdos: boot flag on COS_STATE, type 83, label id from the plan', () => {
    const plan = planInstall({ install: { device: '/dev/sda', forceMbr: true } }, machine([disk('sda', 300)], false));
    const c = msdosCommand(plan);
    expect(c.file).toBe('sfdisk');
    expect(c.input).toContain('label: dos');
    expect(c.input).toContain(`label-id: 0x${plan.diskGuid.replace(/-/g, '').slice(0, 8)}`);
    const lines = c.input!.split('\n').filter((l) => l.startsWith('start='));
    expect(lines).toHaveLength(4);
    expect(lines[2]).toMatch(/type=83, bootable$/);
    expect(lines[0]).toBe('start=2048, size=102400, type=83');
  });

  it('sfdisk script: the header lines, the blank line that ends the header, one line a partition, a final newline (sfdisk(8) script format)', () => {
    const plan = planInstall({ install: { device: '/dev/sda', forceMbr: true } }, machine([disk('sda', 300, { logicalSectorSize: 4096, physicalSectorSize: 4096 })], false));
    const text = msdosCommand(plan).input!;
    const rows = text.split('\n');
    expect(rows.slice(0, 4)).toEqual(['label: dos', `label-id: 0x${plan.diskGuid.replace(/-/g, '').slice(0, 8)}`, 'sector-size: 4096', '']);
    expect(rows.slice(4, -1)).toHaveLength(4);
    for (const r of rows.slice(4, -1)) expect(r).toMatch(/^start=\d+, size=\d+, type=83(, bootable)?$/);
    expect(rows.at(-1)).toBe('');
    expect(text.endsWith('\n\n')).toBe(false);
  });

  it('mkfs: labels and the planned UUIDs (ext4 hash seed too)', () => {
    expect(mkfsCommand({ fs: 'vfat', label: 'COS_GRUB', fsUuid: 'ABCD1234' }, '/dev/sda1')).toEqual({ file: 'mkfs.vfat', args: ['-n', 'COS_GRUB', '-i', 'ABCD1234', '/dev/sda1'] });
    const u = '11111111-2222-4333-8444-555555555555';
    expect(mkfsCommand({ fs: 'ext4', label: 'COS_OEM', fsUuid: u }, '/dev/sda2')!.args).toEqual(['-F', '-q', '-L', 'COS_OEM', '-U', u, '-E', `hash_seed=${u}`, '/dev/sda2']);
    expect(mkfsCommand({ fs: 'none' }, '/dev/sda1')).toBeUndefined();
    expect(dataDiskMkfsCommand({ path: '/dev/sdb', sizeBytes: 1, label: 'HARV_LH_DEFAULT', fs: 'ext4', fsUuid: u, mount: '/x' }).args).toContain('HARV_LH_DEFAULT');
  });

  it('parses blkid export output with several devices', () => {
    const sigs = parseBlkidExport('DEVNAME=/dev/sda1\nLABEL=COS_OEM\nTYPE=ext4\n\nDEVNAME=/dev/sdb\nTYPE=ext4\nLABEL=a=b\n');
    expect(sigs).toEqual([
      { DEVNAME: '/dev/sda1', LABEL: 'COS_OEM', TYPE: 'ext4' },
      { DEVNAME: '/dev/sdb', TYPE: 'ext4', LABEL: 'a=b' },
    ]);
  });
});
