/** Runs work with the plan's partitions mounted under the run directory; always unmounts. */
import { run } from '../../lib/exec.js';
import { HvError, ExitCode } from '../../lib/errors.js';
import { partitionPath } from '../disk/commands.js';
import type { InstallPlan } from '../disk/types.js';
import { mount, mountDir, unmount, mountsUnder } from './mounts.js';

export type MountLabel = 'COS_OEM' | 'COS_STATE' | 'COS_RECOVERY' | 'COS_PERSISTENT';

export function partitionDevice(plan: InstallPlan, label: string): string {
  const p = plan.partitions.find((x) => x.label === label);
  if (!p) throw new HvError(`the plan has no ${label} partition`, { exitCode: ExitCode.installFailed });
  return partitionPath(plan.device, p.number);
}

export async function withMounted<T>(
  plan: InstallPlan,
  runDir: string,
  labels: MountLabel[],
  fn: (dirs: Record<MountLabel, string>) => Promise<T>,
  opts: { readOnly?: boolean } = {},
): Promise<T> {
  const dirs = {} as Record<MountLabel, string>;
  const mounted: string[] = [];
  let failed = false;
  try {
    for (const label of labels) {
      const dir = mountDir(runDir, label.toLowerCase());
      // A mount left by a killed run of this same install is reused rather than stacked.
      if (!(await mountsUnder(dir)).includes(dir)) {
        await mount(partitionDevice(plan, label), dir, opts.readOnly ? ['ro'] : []);
        mounted.push(dir);
      }
      dirs[label] = dir;
    }
    const out = await fn(dirs);
    // The step's writes reach the disk here: a write-back error (EIO) fails it, naming the partition.
    for (const [label, dir] of Object.entries(dirs)) {
      const r = await run('sync', ['-f', dir], { allowFailure: true, timeoutMs: 600_000 });
      if (r.exitCode !== 0 && !opts.readOnly) {
        throw new HvError(`writing ${label} (${partitionDevice(plan, label)}) back to the disk failed: ${r.stderr.trim() || `sync exited with ${r.exitCode}`}`, {
          where: partitionDevice(plan, label),
          hint: 'check dmesg and the disk; the install can be re-run once the disk is sound',
          exitCode: ExitCode.installFailed,
        });
      }
    }
    return out;
  } catch (err) {
    failed = true;
    throw err;
  } finally {
    // After a failure the disk may have stopped answering: a bounded try, then a lazy unmount,
    // so that the error goes out now (the filesystem lets go once its I/O ends).
    for (const dir of mounted.reverse()) await unmount(dir, failed ? 10_000 : undefined, failed ? 0 : undefined).catch(() => run('umount', ['-l', dir], { allowFailure: true }));
  }
}
