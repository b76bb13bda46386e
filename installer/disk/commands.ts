/**
 * The command lines the install runs against block devices, built from the plan. Pure, so the exact
 * sfdisk scripts and mkfs arguments are unit-tested; installer/disk/block.ts runs them.
 */
import type { InstallPlan, PlannedDataDisk, PlannedPartition } from './types.js';

export interface CommandLine {
  file: string;
  args: string[];
  input?: string;
}

/** Partition device node: /dev/sda → /dev/sda1, /dev/nvme0n1 and /dev/loop3 → …p1 (kernel naming). */
export function partitionPath(disk: string, n: number): string {
  return /\d$/.test(disk) ? `${disk}p${n}` : `${disk}${n}`;
}

/**
 * The GPT partition type GUID of each type code the plan uses (gdisk's codes, as Elemental's
 * partitioner names them): the one place they are mapped.
 */
export const GPT_TYPE_GUIDS: Readonly<Record<string, string>> = {
  EF00: 'C12A7328-F81F-11D2-BA4B-00A0C93EC93B', // EFI system partition
  EF02: '21686148-6449-6E6F-744E-656564454649', // BIOS boot partition (grub's core.img)
  '8300': '0FC63DAF-8483-4772-8E79-3D69D8477DE4', // Linux filesystem
};

export function gptTypeGuid(typeCode: string): string {
  const guid = GPT_TYPE_GUIDS[typeCode];
  if (!guid) throw new Error(`no GPT type GUID for type code ${typeCode}`);
  return guid;
}

/** Entries in each GPT partition array, as gdisk and sfdisk make them. */
const GPT_ENTRIES = 128;
const GPT_ENTRY_BYTES = 128;

/**
 * The first usable sector of a new GPT as `sgdisk --clear` sets it: right after the protective
 * MBR, the primary header and the entry array (34 on 512-byte sectors, 6 on 4Kn). sfdisk's own
 * default is the first aligned MiB, which would change the table's header.
 */
export function gptFirstUsableLba(sectorSize: number): number {
  return 2 + Math.ceil((GPT_ENTRIES * GPT_ENTRY_BYTES) / sectorSize);
}

/**
 * sfdisk script for a new GPT: the plan's disk GUID, every partition with exact sectors, type,
 * name and GUID. Byte for byte the table `sgdisk --zap-all --clear` wrote for the same plan, without
 * gptfdisk's whole-machine sync() and one-second sleep after the write; sfdisk fsyncs each of its
 * writes and fails on an error, and leaves telling the kernel to rereadPartitions.
 */
export function gptCommand(plan: InstallPlan): CommandLine {
  const lines = [
    'label: gpt',
    `label-id: ${plan.diskGuid}`,
    `table-length: ${GPT_ENTRIES}`,
    `first-lba: ${gptFirstUsableLba(plan.logicalSectorSize)}`,
    `sector-size: ${plan.logicalSectorSize}`,
    '',
  ];
  for (const p of plan.partitions) {
    lines.push(`start=${p.startSector}, size=${p.endSector - p.startSector + 1}, type=${gptTypeGuid(p.typeCode)}, name="${p.name}", uuid=${p.partUuid}`);
  }
  return { file: 'sfdisk', args: ['--no-reread', '--no-tell-kernel', '--wipe', 'always', plan.device], input: lines.join('\n') + '\n' };
}

/** sfdisk script for an msdos table; the disk identifier comes from the plan's disk GUID. */
export function msdosCommand(plan: InstallPlan): CommandLine {
  const lines = ['label: dos', `label-id: 0x${plan.diskGuid.replace(/-/g, '').slice(0, 8)}`, `sector-size: ${plan.logicalSectorSize}`, ''];
  for (const p of plan.partitions) {
    lines.push(`start=${p.startSector}, size=${p.endSector - p.startSector + 1}, type=${p.typeCode}${p.bootable ? ', bootable' : ''}`);
  }
  return { file: 'sfdisk', args: ['--no-reread', '--no-tell-kernel', '--wipe', 'always', plan.device], input: lines.join('\n') + '\n' };
}

export function partitionTableCommand(plan: InstallPlan): CommandLine {
  return plan.table === 'gpt' ? gptCommand(plan) : msdosCommand(plan);
}

/**
 * mkfs for a planned partition with its label and the plan's UUID. The ext4 hash seed is pinned to
 * the UUID too, so a re-run builds the same filesystem identity.
 */
export function mkfsCommand(p: Pick<PlannedPartition, 'fs' | 'label' | 'fsUuid'>, device: string): CommandLine | undefined {
  if (p.fs === 'vfat') {
    return { file: 'mkfs.vfat', args: ['-n', p.label!, ...(p.fsUuid ? ['-i', p.fsUuid] : []), device] };
  }
  if (p.fs === 'ext4') {
    const ext = p.fsUuid ? ['-U', p.fsUuid, '-E', `hash_seed=${p.fsUuid}`] : [];
    return { file: 'mkfs.ext4', args: ['-F', '-q', '-L', p.label!, ...ext, device] };
  }
  return undefined;
}

export function dataDiskMkfsCommand(d: PlannedDataDisk): CommandLine {
  return mkfsCommand({ fs: 'ext4', label: d.label, fsUuid: d.fsUuid }, d.path)!;
}
