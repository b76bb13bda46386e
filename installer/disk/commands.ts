/**
 * The command lines the install runs against block devices, built from the plan. Pure, so the exact
 * sgdisk/sfdisk/mkfs arguments are unit-tested; installer/disk/block.ts runs them.
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

/** One sgdisk call: new GPT, fixed disk GUID, every partition with exact sectors, type, name and GUID. */
export function gptCommand(plan: InstallPlan): CommandLine {
  const args = ['--zap-all', '--clear', `--disk-guid=${plan.diskGuid}`];
  for (const p of plan.partitions) {
    args.push(
      `--new=${p.number}:${p.startSector}:${p.endSector}`,
      `--typecode=${p.number}:${p.typeCode}`,
      `--change-name=${p.number}:${p.name}`,
      `--partition-guid=${p.number}:${p.partUuid}`,
    );
  }
  args.push(plan.device);
  return { file: 'sgdisk', args };
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
