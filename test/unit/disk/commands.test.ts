import { describe, expect, it } from 'vitest';
import { gptCommand, gptFirstUsableLba, gptTypeGuid, msdosCommand, mkfsCommand, partitionPath, dataDiskMkfsCommand } from '../../../installer/disk/commands.js';
import { parseBlkidExport } from '../../../installer/disk/block.js';
import { planInstall } from '../../../installer/disk/plan.js';
import { disk, machine } from './facts-fixture.js';

/** An sfdisk script's header lines (`key: value`) and partition lines (`key=value, …`), as sfdisk(8) reads them. */
function parseScript(text: string): { header: Record<string, string>; partitions: Array<Record<string, string>> } {
  const [head, body] = text.split('\n\n');
  const header = Object.fromEntries(head!.split('\n').map((l) => l.split(': ') as [string, string]));
  const partitions = body!.trimEnd().split('\n').map((l) => Object.fromEntries(l.split(', ').map((f) => f.split('=') as [string, string])));
  return { header, partitions };
}

describe('partition and filesystem command lines', () => {
  it('partition node names follow the kernel', () => {
    expect(partitionPath('/dev/sda', 2)).toBe('/dev/sda2');
    expect(partitionPath('/dev/nvme0n1', 2)).toBe('/dev/nvme0n1p2');
    expect(partitionPath('/dev/loop3', 6)).toBe('/dev/loop3p6');
  });

  it('GPT through sfdisk: the disk GUID, the first usable sector sgdisk --clear sets, and per partition its exact sectors, type GUID, name and planned GUID', () => {
    const plan = planInstall({ install: { device: '/dev/sda' } }, machine([disk('sda', 300)]));
    const c = gptCommand(plan);
    expect(c.file).toBe('sfdisk');
    // The kernel is told by rereadPartitions; --wipe clears the old boot code and signatures the new table would otherwise sit beside.
    expect(c.args).toEqual(['--no-reread', '--no-tell-kernel', '--wipe', 'always', '/dev/sda']);
    const script = parseScript(c.input!);
    expect(script.header).toEqual({ label: 'gpt', 'label-id': plan.diskGuid, 'table-length': '128', 'first-lba': '34', 'sector-size': '512' });
    expect(script.partitions).toHaveLength(plan.partitions.length);
    expect(script.partitions[0]).toEqual({ start: '2048', size: '131072', type: 'C12A7328-F81F-11D2-BA4B-00A0C93EC93B', name: '"efi"', uuid: plan.partitions[0]!.partUuid });
    plan.partitions.forEach((p, i) => {
      const row = script.partitions[i]!;
      expect(Number(row.start)).toBe(p.startSector);
      expect(Number(row.start) + Number(row.size) - 1).toBe(p.endSector);
      expect(row.name).toBe(`"${p.name}"`);
      expect(row.uuid).toBe(p.partUuid);
      expect(row.type).toBe(p.role === 'efi' ? 'C12A7328-F81F-11D2-BA4B-00A0C93EC93B' : '0FC63DAF-8483-4772-8E79-3D69D8477DE4');
    });
    expect(script.partitions.map((r) => r.name)).toEqual(['"efi"', '"oem"', '"recovery"', '"state"', '"persistent"', '"HARV_LH_DEFAULT"']);
  });

  it('GPT on 4Kn for legacy BIOS: sectors in 4096-byte units, the first usable sector 6 (two sectors and 16 KiB of entries), the BIOS boot type GUID', () => {
    const plan = planInstall({ install: { device: '/dev/sda' } }, machine([disk('sda', 300, { logicalSectorSize: 4096, physicalSectorSize: 4096 })], false));
    const script = parseScript(gptCommand(plan).input!);
    expect(script.header['first-lba']).toBe('6');
    expect(script.header['sector-size']).toBe('4096');
    expect(script.partitions[0]).toMatchObject({ start: '256', size: String(256), type: '21686148-6449-6E6F-744E-656564454649', name: '"bios"' });
  });

  it('type codes map to the GPT type GUIDs gdisk gives them; a code without one is refused, not written as some other type', () => {
    expect(gptTypeGuid('EF00')).toBe('C12A7328-F81F-11D2-BA4B-00A0C93EC93B');
    expect(gptTypeGuid('EF02')).toBe('21686148-6449-6E6F-744E-656564454649');
    expect(gptTypeGuid('8300')).toBe('0FC63DAF-8483-4772-8E79-3D69D8477DE4');
    expect(() => gptTypeGuid('83')).toThrow('no GPT type GUID for type code 83');
    expect(gptFirstUsableLba(512)).toBe(34);
    expect(gptFirstUsableLba(4096)).toBe(6);
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
