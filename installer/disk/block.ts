/**
 * Effects on block devices: write the partition table, make the kernel see it, make filesystems,
 * probe signatures, wipe. Every tool runs through lib/exec run() (full command + stderr on failure)
 * and every wait has a deadline.
 */
import { access, readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { HvError, ExitCode } from '../../lib/errors.js';
import { waitUntil } from '../../lib/wait.js';
import { partitionPath, partitionTableCommand, mkfsCommand, type CommandLine } from './commands.js';
import type { InstallPlan, PlannedPartition } from './types.js';

export async function runCommand(c: CommandLine, timeoutMs?: number): Promise<string> {
  const r = await run(c.file, c.args, { input: c.input, timeoutMs });
  return r.stdout;
}

export async function writePartitionTable(plan: InstallPlan): Promise<void> {
  await runCommand(partitionTableCommand(plan));
}

interface KernelPartition {
  number: number;
  startBytes: number;
  sizeBytes: number;
}

/** The partitions the kernel currently shows for a disk (sysfs counts 512-byte units). */
export async function kernelPartitions(disk: string): Promise<KernelPartition[]> {
  const name = path.basename(disk);
  const dir = `/sys/class/block/${name}`;
  const entries = await readdir(dir).catch(() => [] as string[]);
  const out: KernelPartition[] = [];
  for (const e of entries) {
    if (!e.startsWith(name)) continue;
    const num = await readFile(`${dir}/${e}/partition`, 'utf8').catch(() => undefined);
    if (num === undefined) continue;
    const start = Number((await readFile(`${dir}/${e}/start`, 'utf8')).trim());
    const size = Number((await readFile(`${dir}/${e}/size`, 'utf8')).trim());
    out.push({ number: Number(num.trim()), startBytes: start * 512, sizeBytes: size * 512 });
  }
  return out.sort((a, b) => a.number - b.number);
}

/**
 * Asks the kernel to re-read the table (partprobe, then BLKRRPART) until it shows exactly the
 * planned partitions and every partition node exists: a busy disk or slow device can need retries.
 */
export async function rereadPartitions(plan: InstallPlan, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<void> {
  let attempt = 0;
  await waitUntil(
    async () => {
      attempt++;
      const tool = attempt % 2 === 1 ? run('partprobe', [plan.device], { allowFailure: true, timeoutMs: 60_000 }) : run('blockdev', ['--rereadpt', plan.device], { allowFailure: true, timeoutMs: 60_000 });
      const r = await tool;
      const reason = await partitionMismatch(plan);
      if (!reason) return { done: true, value: undefined };
      return { done: false, reason: `${reason}${r.exitCode !== 0 ? ` (${r.command}: ${r.stderr.trim() || `status ${r.exitCode}`})` : ''}` };
    },
    { what: `waiting for the kernel to show the new partitions of ${plan.device}`, timeoutMs: opts.timeoutMs ?? 60_000, intervalMs: 500, backoff: 1.5, maxIntervalMs: 5_000, signal: opts.signal },
  );
}

/** Why the kernel's view differs from the plan, or undefined when it matches and nodes exist. */
export async function partitionMismatch(plan: InstallPlan): Promise<string | undefined> {
  const seen = await kernelPartitions(plan.device);
  if (seen.length !== plan.partitions.length) return `the kernel shows ${seen.length} partitions, the plan has ${plan.partitions.length}`;
  for (const p of plan.partitions) {
    const k = seen.find((s) => s.number === p.number);
    if (!k || k.startBytes !== p.startBytes || k.sizeBytes !== p.sizeBytes) {
      return `partition ${p.number} is ${k ? `at ${k.startBytes}+${k.sizeBytes}` : 'missing'}, planned at ${p.startBytes}+${p.sizeBytes}`;
    }
    const node = partitionPath(plan.device, p.number);
    if (!(await exists(node))) return `${node} does not exist yet`;
  }
  return undefined;
}

export interface Signature {
  TYPE?: string;
  LABEL?: string;
  UUID?: string;
  PART_ENTRY_UUID?: string;
  PART_ENTRY_NAME?: string;
  [k: string]: string | undefined;
}

/** Probes a device directly (`blkid -p`, no cache: there is no udev to keep one fresh). */
export async function probeSignature(device: string): Promise<Signature> {
  const r = await run('blkid', ['-p', '-o', 'export', device], { allowFailure: true, timeoutMs: 60_000 });
  // blkid: 2 = nothing found
  if (r.exitCode !== 0 && r.exitCode !== 2) {
    throw new HvError(`cannot probe ${device}: ${r.stderr.trim() || `blkid exited with ${r.exitCode}`}`, { where: r.command, exitCode: ExitCode.installFailed });
  }
  return parseBlkidExport(r.stdout)[0] ?? {};
}

export function parseBlkidExport(text: string): Signature[] {
  const out: Signature[] = [];
  for (const block of text.split(/\n\s*\n/)) {
    const sig: Signature = {};
    for (const line of block.split('\n')) {
      const i = line.indexOf('=');
      if (i > 0) sig[line.slice(0, i)] = line.slice(i + 1);
    }
    if (Object.keys(sig).length) out.push(sig);
  }
  return out;
}

export async function makeFilesystem(p: PlannedPartition, device: string): Promise<void> {
  const c = mkfsCommand(p, device);
  if (c) await runCommand(c, 30 * 60_000);
  else await wipeSignatures(device); // bios_grub: no filesystem, and no stale one either
}

export async function wipeSignatures(device: string): Promise<void> {
  await run('wipefs', ['--all', '--force', device], { timeoutMs: 120_000 });
}

/** Why a formatted partition differs from the plan (type, label, UUID), or undefined. */
export async function filesystemMismatch(p: Pick<PlannedPartition, 'fs' | 'label' | 'fsUuid'>, device: string): Promise<string | undefined> {
  const sig = await probeSignature(device);
  if (p.fs === 'none') return sig.TYPE ? `${device} carries a ${sig.TYPE} signature` : undefined;
  if (sig.TYPE !== p.fs) return `${device} is ${sig.TYPE ?? 'unformatted'}, planned ${p.fs}`;
  if (sig.LABEL !== p.label) return `${device} is labelled ${sig.LABEL ?? '(none)'}, planned ${p.label}`;
  const uuid = p.fs === 'vfat' && p.fsUuid ? `${p.fsUuid.slice(0, 4)}-${p.fsUuid.slice(4)}` : p.fsUuid;
  if (uuid && sig.UUID?.toUpperCase() !== uuid.toUpperCase()) return `${device} has UUID ${sig.UUID ?? '(none)'}, planned ${uuid}`;
  return undefined;
}

/**
 * Every device on the machine carrying a label, by label. Loop devices other than the install's own
 * disks are left out: they are image files attached by tools, absent at boot, so they cannot confuse
 * grub's or the initramfs's search by label.
 */
export async function devicesByLabel(installDisks: string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for (const sig of await bootVisibleSignatures(installDisks)) {
    if (!sig.LABEL) continue;
    out.set(sig.LABEL, [...(out.get(sig.LABEL) ?? []), sig.DEVNAME!]);
  }
  return out;
}

/**
 * The devices the installed node will see at boot: every probed device except loop devices that are
 * not among the install's own disks (target, data disk).
 */
export async function bootVisibleSignatures(installDisks: string[]): Promise<Signature[]> {
  const r = await run('blkid', ['-c', '/dev/null', '-o', 'export'], { allowFailure: true, timeoutMs: 120_000 });
  const ours = installDisks.map((d) => path.basename(d));
  return parseBlkidExport(r.stdout).filter((sig) => {
    const name = sig.DEVNAME ? path.basename(sig.DEVNAME) : undefined;
    if (!name) return false;
    return !name.startsWith('loop') || ours.some((d) => name === d || name.startsWith(`${d}p`));
  });
}

export async function exists(p: string): Promise<boolean> {
  return access(p).then(
    () => true,
    () => false,
  );
}

export { partitionPath };
