/** The OS source of an install (`--source`): a directory tree or a squashfs file, and its size. */
import { stat } from 'node:fs/promises';
import { run } from '../../lib/exec.js';
import { HvError, ExitCode } from '../../lib/errors.js';
import type { OsSource } from '../disk/contracts.js';

/** Elemental deploys the live system's root by default; dracut's dmsquash-live mounts it here. */
export const LIVE_ROOT = '/run/rootfsbase';

export async function resolveSource(arg: string | undefined): Promise<OsSource> {
  const p = arg ?? LIVE_ROOT;
  const s = await stat(p).catch(() => undefined);
  if (!s) {
    throw new HvError(arg ? `--source ${p} does not exist` : `no --source given and the live root ${LIVE_ROOT} does not exist`, {
      hint: 'pass --source with a directory tree or a squashfs file of the OS to install',
      exitCode: ExitCode.usage,
    });
  }
  if (s.isDirectory()) return { kind: 'dir', path: p };
  if (s.isFile()) return { kind: 'squashfs', path: p };
  throw new HvError(`--source ${p} is neither a directory nor a squashfs file`, { exitCode: ExitCode.usage });
}

/** Apparent bytes of the tree (what the image must hold), for sizing active.img. */
export async function sourceSizeBytes(src: OsSource): Promise<number> {
  if (src.kind === 'dir') {
    const r = await run('du', ['--summarize', '--bytes', '--one-file-system', src.path], { timeoutMs: 600_000 });
    return Number.parseInt(r.stdout, 10);
  }
  // squashfs: sum of the file sizes in its listing
  const r = await run('unsquashfs', ['-lls', '-no-progress', src.path], { timeoutMs: 600_000 });
  let total = 0;
  for (const line of r.stdout.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 6 && /^-/.test(f[0]!)) total += Number.parseInt(f[2]!, 10) || 0;
  }
  return total;
}
