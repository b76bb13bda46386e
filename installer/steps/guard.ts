/** The guard's refusals: a disk that is gone, changed, busy, or still held by an earlier run. */
import { constants, open, readdir } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { partitionPath } from '../disk/commands.js';
import { findDisk, targetInUseProblems } from '../disk/plan.js';
import type { InstallPlan } from '../disk/types.js';
import type { MachineFacts } from '../preflight/types.js';
import { busyHolders } from './holders.js';

export async function guardProblems(plan: InstallPlan, facts: MachineFacts, runDir: string): Promise<void> {
  const problems: string[] = [];
  const target = findDisk(facts, plan.device);
  if (!target) {
    problems.push(`${plan.device} is gone`);
  } else {
    if (target.sizeBytes !== plan.deviceSizeBytes || target.logicalSectorSize !== plan.logicalSectorSize) {
      problems.push(`${plan.device} changed since it was planned (${target.sizeBytes} bytes, ${target.logicalSectorSize}-byte sectors; planned ${plan.deviceSizeBytes}, ${plan.logicalSectorSize})`);
    }
    problems.push(...targetInUseProblems(target, { ownMountPrefix: `${runDir}/`, busyHolders: await busyHolders(target.inUse.holders) }));
  }
  for (const other of [plan.dataDisk?.path, ...plan.wipeDisks]) {
    if (!other) continue;
    const d = findDisk(facts, other);
    if (d) problems.push(...targetInUseProblems(d, { ownMountPrefix: `${runDir}/`, busyHolders: await busyHolders(d.inUse.holders) }));
  }
  if (problems.length) {
    throw new HvError(problems.length === 1 ? `refusing to install: ${problems[0]}` : `refusing to install:\n${problems.map((p) => `  - ${p}`).join('\n')}`, {
      where: plan.device,
      hint: 'nothing was changed on any disk',
      exitCode: ExitCode.checkFailed,
    });
  }
}

/**
 * The target's partitions that something still holds open exclusively: a filesystem mounted (also
 * one lazily unmounted but kept alive by a process, which /proc/mounts no longer shows) or a tool.
 * The kernel refuses an exclusive open of such a block device (EBUSY), which is the one test that
 * sees them all. mkfs would refuse them mid-install; the guard refuses first, touching nothing.
 */
export async function heldPartitions(plan: InstallPlan): Promise<string[]> {
  const held: string[] = [];
  for (const p of plan.partitions) {
    const dev = partitionPath(plan.device, p.number);
    // A holder (an idle volume group, an md array) is the clear step's to deactivate, not a refusal.
    if ((await readdir(`/sys/class/block/${path.basename(dev)}/holders`).catch(() => [])).length > 0) continue;
    const fh = await open(dev, constants.O_RDONLY | constants.O_EXCL).catch((err: NodeJS.ErrnoException) => (err.code === 'EBUSY' ? 'busy' : undefined));
    if (fh === 'busy') held.push(dev);
    else await fh?.close();
  }
  return held;
}
