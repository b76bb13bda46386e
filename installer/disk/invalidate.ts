/**
 * Makes a half-installed disk unbootable, and says so only where it is true. For each partition the
 * install touched (all but COS_OEM, which keeps the failed install's record), at the planned
 * offsets: its signatures wiped, its first and last MiB overwritten with zeros, then both MiBs read
 * back from the disk (O_DIRECT) and the partition probed (`blkid -p`). Tools report success over
 * failed writes (wipefs prints "2 bytes were erased" and exits 0), so only the read-back counts.
 * When the partition table is not the planned one, the disk's own first and last MiB (the tables)
 * are invalidated instead. What could not be invalidated is named: `could not invalidate /dev/X:
 * …; do not boot this disk`.
 */
import { constants, open } from 'node:fs/promises';
import { describeError } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import { exists, kernelPartitions, probeSignature } from './block.js';
import { partitionPath } from './commands.js';
import type { InstallPlan } from './types.js';
import { zeroEnds } from './zero.js';

export interface Invalidation {
  device: string;
  /** The filesystem label it carried (or "partition table"). */
  what: string;
  ok: boolean;
  /** Why it could not be invalidated. */
  problem?: string;
}

/** The targets: the planned partitions the kernel shows at their planned offsets, else the disk. */
export async function invalidationTargets(plan: InstallPlan): Promise<Array<{ device: string; what: string; sizeBytes: number }>> {
  const seen = await kernelPartitions(plan.device);
  const asPlanned = plan.partitions.every((p) => seen.some((k) => k.number === p.number && k.startBytes === p.startBytes && k.sizeBytes === p.sizeBytes));
  if (!asPlanned) return [{ device: plan.device, what: 'partition table', sizeBytes: plan.deviceSizeBytes }];
  const out = [];
  for (const p of plan.partitions.filter((x) => x.role !== 'oem')) {
    const device = partitionPath(plan.device, p.number);
    if (await exists(device)) out.push({ device, what: p.label ?? p.name, sizeBytes: p.sizeBytes });
  }
  return out;
}

export async function invalidateDisk(plan: InstallPlan): Promise<Invalidation[]> {
  const results: Invalidation[] = [];
  for (const t of await invalidationTargets(plan)) results.push(await invalidateOne(t.device, t.what, t.sizeBytes));
  await run('sync', [], { allowFailure: true, timeoutMs: 60_000 }).catch(() => undefined);
  return results;
}

async function invalidateOne(device: string, what: string, sizeBytes: number): Promise<Invalidation> {
  const problems: string[] = [];
  // A filesystem still mounted (lazily, by a process that did not end) would write its metadata back over the zeros.
  const held = await open(device, constants.O_RDONLY | constants.O_EXCL).then(
    (fh) => fh.close().then(() => false),
    (err: NodeJS.ErrnoException) => err.code === 'EBUSY',
  );
  if (held) problems.push('still held open (a filesystem or process that did not let go)');
  const wipe = await run('wipefs', ['--all', '--force', device], { allowFailure: true, timeoutMs: 120_000 }).catch((e: unknown) => ({ exitCode: -1, stderr: describeError(e) }));
  if (wipe.exitCode !== 0) problems.push(`wipefs: ${wipe.stderr.trim() || `status ${wipe.exitCode}`}`);
  problems.push(...(await zeroEnds(device, sizeBytes)));
  await run('blockdev', ['--flushbufs', device], { allowFailure: true, timeoutMs: 60_000 }).catch(() => undefined);
  const sig = await probeSignature(device).catch((e: unknown) => ({ TYPE: `unknown (${describeError(e)})` }) as Record<string, string | undefined>);
  const left = sig.TYPE ?? sig.PTTYPE;
  if (left) problems.push(`blkid -p still finds a ${left} signature${sig.LABEL ? ` labelled ${sig.LABEL}` : ''}`);
  if (problems.length === 0) return { device, what, ok: true };
  return { device, what, ok: false, problem: `could not invalidate ${device} (${what}): ${problems.join('; ')}; do not boot this disk` };
}

/** The journal's and report's lines: what was invalidated, and what could not be. */
export function describeInvalidation(results: readonly Invalidation[]): string[] {
  return results.map((r) => (r.ok ? `${r.device} (${r.what})` : r.problem!));
}
