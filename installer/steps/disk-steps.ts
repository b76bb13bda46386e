/** Steps 2–3 of the install: clear, partition, format, verify labels. */
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { HvError, ExitCode } from '../../lib/errors.js';
import { dataDiskMkfsCommand, partitionPath } from '../disk/commands.js';
import {
  devicesByLabel,
  exists,
  filesystemMismatch,
  kernelPartitions,
  makeFilesystem,
  partitionMismatch,
  probeSignature,
  rereadPartitions,
  runCommand,
  wipeSignatures,
  writePartitionTable,
} from '../disk/block.js';
import { gptVerifyProblem } from '../disk/gpt-verify.js';
import { findDisk } from '../disk/plan.js';
import { zeroEnds } from '../disk/zero.js';
import type { InstallPlan } from '../disk/types.js';
import type { Step } from './context.js';

const STALE_LABEL = /^(COS_|HARV_)/;

/**
 * Wipes every partition's signatures, then the tables (`sgdisk --zap-all`'s protective MBR, both GPT
 * headers and entry arrays, as zeros over the disk's first and last MiB, read back: without gptfdisk's
 * whole-machine sync() and one-second sleep), then the disk's other signatures, and tells the kernel.
 */
async function zapDisk(device: string): Promise<string[]> {
  const done: string[] = [];
  for (const p of await kernelPartitions(device)) {
    const node = partitionPath(device, p.number);
    if (await exists(node)) {
      await wipeSignatures(node);
      done.push(node);
    }
  }
  const size = Number((await run('blockdev', ['--getsize64', device], { timeoutMs: 60_000 })).stdout.trim());
  const problems = await zeroEnds(device, size);
  if (problems.length) throw new HvError(`could not clear the partition tables of ${device}: ${problems.join('; ')}`, { where: device, hint: 'check dmesg and the disk; a disk that cannot be written cannot be installed', exitCode: ExitCode.installFailed });
  await wipeSignatures(device);
  await run('partprobe', [device], { allowFailure: true, timeoutMs: 60_000 });
  done.push(device);
  return done;
}

async function deactivateHolders(holders: string[]): Promise<string[]> {
  const done: string[] = [];
  for (const h of holders) {
    if (h.startsWith('dm-')) {
      const name = (await run('cat', [`/sys/class/block/${h}/dm/name`], { allowFailure: true })).stdout.trim() || h;
      await run('dmsetup', ['remove', '--retry', name], { timeoutMs: 120_000 });
    } else if (h.startsWith('md')) {
      await run('mdadm', ['--stop', `/dev/${h}`], { timeoutMs: 120_000 });
    } else {
      throw new HvError(`do not know how to deactivate ${h}, which holds the target disk`, { hint: `deactivate /dev/${h} by hand and run the install again`, exitCode: ExitCode.installFailed });
    }
    done.push(h);
  }
  return done;
}

export const clearStep: Step = {
  name: 'clear',
  async run(ctx) {
    const facts = await ctx.facts();
    const plan = ctx.plan;
    const target = findDisk(facts, plan.device);
    const deactivated = await deactivateHolders(target?.inUse.holders ?? []);
    const cleared: string[] = [];
    if (plan.dataDisk) {
      // Stale COS_*/HARV_* labels on the data disk confuse label lookups (harvester#8043).
      const data = findDisk(facts, plan.dataDisk.path);
      for (const p of data?.partitions ?? []) {
        if (p.label && STALE_LABEL.test(p.label)) cleared.push(`${p.path} (${p.label})`);
      }
      await zapDisk(plan.dataDisk.path);
    }
    const wiped: string[] = [];
    for (const w of plan.wipeDisks) {
      await zapDisk(w);
      wiped.push(w);
    }
    const zapped = await zapDisk(plan.device);
    // Read back: wipefs reports success over writes the disk failed.
    for (const disk of [plan.device, ...(plan.dataDisk ? [plan.dataDisk.path] : []), ...plan.wipeDisks]) {
      await flushBuffers(disk);
      const sig = await probeSignature(disk);
      const left = sig.PTTYPE ?? sig.TYPE;
      if (left) throw new HvError(`${disk} still carries a ${left} signature after it was cleared: the writes did not reach the disk`, { where: disk, hint: 'check dmesg and the disk; a disk that cannot be written cannot be installed', exitCode: ExitCode.installFailed });
    }
    return { deactivated, clearedLabels: cleared, wipedDisks: wiped, zapped };
  },
};

/** The table as the disk holds it: `sgdisk --verify` for GPT (both headers and tables), sfdisk's dump for msdos. */
async function tableProblems(plan: InstallPlan): Promise<string | undefined> {
  if (plan.table === 'gpt') {
    const v = await run('sgdisk', ['--verify', plan.device], { allowFailure: true, timeoutMs: 60_000 });
    return gptVerifyProblem(v.exitCode, v.stdout, v.stderr);
  }
  const d = await run('sfdisk', ['--dump', plan.device], { allowFailure: true, timeoutMs: 60_000 });
  const starts = [...d.stdout.matchAll(/start=\s*(\d+)/g)].map((m) => Number(m[1]));
  const want = plan.partitions.map((p) => p.startSector);
  return d.exitCode === 0 && JSON.stringify(starts) === JSON.stringify(want) ? undefined : `sfdisk --dump shows partitions at ${starts.join(', ') || 'none'}, planned at ${want.join(', ')}`;
}

/** Drops the block device's cached pages, so what is read next comes from the disk. */
export async function flushBuffers(device: string): Promise<void> {
  await run('blockdev', ['--flushbufs', device], { timeoutMs: 60_000 });
}

/** Why the disk's table is not the planned one (the kernel view plus the table's own GUID). */
async function tableMismatch(plan: InstallPlan): Promise<string | undefined> {
  const kernel = await partitionMismatch(plan);
  if (kernel) return kernel;
  const sig = await probeSignature(plan.device);
  const want = plan.table === 'gpt' ? plan.diskGuid : plan.diskGuid.replace(/-/g, '').slice(0, 8);
  if (sig.PTTYPE !== (plan.table === 'gpt' ? 'gpt' : 'dos')) return `${plan.device} has a ${sig.PTTYPE ?? 'missing'} partition table, planned ${plan.table}`;
  if (sig.PTUUID?.toLowerCase() !== want) return `${plan.device} has table id ${sig.PTUUID ?? '(none)'}, planned ${want}`;
  return undefined;
}

export const partitionStep: Step = {
  name: 'partition',
  async run(ctx) {
    await writePartitionTable(ctx.plan);
    // Read back before waiting on the kernel: a disk can take a write and keep other bytes.
    await flushBuffers(ctx.plan.device);
    const broken = await tableProblems(ctx.plan);
    if (broken) throw new HvError(`the partition table written to ${ctx.plan.device} does not read back: ${broken}`, { where: ctx.plan.device, hint: 'check dmesg and the disk; a disk that cannot be written cannot be installed', exitCode: ExitCode.installFailed });
    await rereadPartitions(ctx.plan, { signal: ctx.signal });
    const problem = await tableMismatch(ctx.plan);
    if (problem) throw new HvError(`the partition table on ${ctx.plan.device} is not the one written: ${problem}`, { exitCode: ExitCode.installFailed });
    return { partitions: ctx.plan.partitions.length };
  },
  check: (ctx) => tableMismatch(ctx.plan),
};

async function formatMismatch(plan: InstallPlan): Promise<string | undefined> {
  for (const p of plan.partitions) {
    const why = await filesystemMismatch(p, partitionPath(plan.device, p.number));
    if (why) return why;
  }
  if (plan.dataDisk) return filesystemMismatch({ fs: 'ext4', label: plan.dataDisk.label, fsUuid: plan.dataDisk.fsUuid }, plan.dataDisk.path);
  return undefined;
}

export const formatStep: Step = {
  name: 'format',
  async run(ctx) {
    const made: string[] = [];
    for (const p of ctx.plan.partitions) {
      const dev = partitionPath(ctx.plan.device, p.number);
      ctx.bus.emit({ type: 'message', level: 'info', step: 'format', message: p.fs === 'none' ? `${dev}: bios_grub, no filesystem` : `${dev}: ${p.fs} ${p.label}` });
      await makeFilesystem(p, dev);
      made.push(`${dev} ${p.fs} ${p.label ?? p.name}`);
    }
    if (ctx.plan.dataDisk) {
      ctx.bus.emit({ type: 'message', level: 'info', step: 'format', message: `${ctx.plan.dataDisk.path}: ext4 ${ctx.plan.dataDisk.label} (whole disk)` });
      await runCommand(dataDiskMkfsCommand(ctx.plan.dataDisk), 30 * 60_000);
      made.push(`${ctx.plan.dataDisk.path} ext4 ${ctx.plan.dataDisk.label}`);
    }
    await run('sync', [], { timeoutMs: 600_000 });
    for (const p of ctx.plan.partitions) await flushBuffers(partitionPath(ctx.plan.device, p.number));
    if (ctx.plan.dataDisk) await flushBuffers(ctx.plan.dataDisk.path);
    const problem = await formatMismatch(ctx.plan);
    if (problem) throw new HvError(`a filesystem is not as made: ${problem}`, { exitCode: ExitCode.installFailed });
    return { filesystems: made };
  },
  check: (ctx) => formatMismatch(ctx.plan),
};

export function installDisks(plan: InstallPlan): string[] {
  return [plan.device, ...(plan.dataDisk ? [plan.dataDisk.path] : [])];
}

/** Every planned label must resolve to exactly the planned device, on the whole machine. */
export async function labelProblems(plan: InstallPlan): Promise<string[]> {
  const byLabel = await devicesByLabel(installDisks(plan));
  const problems: string[] = [];
  const want = new Map<string, string>();
  for (const p of plan.partitions) if (p.label) want.set(p.label, partitionPath(plan.device, p.number));
  if (plan.dataDisk) want.set(plan.dataDisk.label, plan.dataDisk.path);
  for (const [label, dev] of want) {
    const found = byLabel.get(label) ?? [];
    if (found.length === 1 && path.resolve(found[0]!) === dev) continue;
    if (found.length === 0) problems.push(`label ${label} is not found on any device (expected ${dev})`);
    else if (found.length > 1) problems.push(`label ${label} is on ${found.length} devices (${found.join(', ')}): grub and the initramfs find partitions by label, so the node could boot the wrong one`);
    else problems.push(`label ${label} is on ${found[0]}, expected ${dev}`);
  }
  return problems;
}

export const verifyStep: Step = {
  name: 'verify',
  async run(ctx) {
    const problems = await labelProblems(ctx.plan);
    if (problems.length) {
      throw new HvError(`labels do not resolve to exactly one device each:\n${problems.map((p) => `  - ${p}`).join('\n')}`, {
        where: 'blkid',
        hint: 'wipe the other disks carrying COS_*/HARV_* labels (install.wipe_disks_list or install.wipe_all_disks), or detach them',
        exitCode: ExitCode.installFailed,
      });
    }
    return { labels: ctx.plan.partitions.filter((p) => p.label).length + (ctx.plan.dataDisk ? 1 : 0) };
  },
  check: async (ctx) => (await labelProblems(ctx.plan))[0],
};
