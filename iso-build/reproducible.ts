/**
 * What makes the build reproducible (same inputs, same bytes; docs/iso.md "Reproducible"): one build
 * time (SOURCE_DATE_EPOCH, https://reproducible-builds.org/specs/source-date-epoch/) stamped on every
 * file, cpio archives in byte order with device and inode numbers renumbered and owners pinned, and
 * squashfs images with pinned times. The ISO's own pins (xorriso, mtools, mkfs.vfat) are in
 * live/iso-image.ts.
 */
import { HvError, ExitCode } from '../lib/errors.js';
import { run } from '../lib/exec.js';

/** Used when neither SOURCE_DATE_EPOCH nor a git commit gives a time (a source tarball). */
export const FALLBACK_EPOCH = 1_700_000_000;

/** SOURCE_DATE_EPOCH as the spec defines it: a decimal count of seconds. Pure. */
export function parseSourceDateEpoch(value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  if (!/^\d{1,12}$/.test(value)) {
    throw new HvError(`SOURCE_DATE_EPOCH=${value} is not a decimal number of seconds`, {
      where: 'environment',
      hint: 'unset it, or set it to a time such as $(git log -1 --format=%ct)',
      exitCode: ExitCode.usage,
    });
  }
  return Number(value);
}

/**
 * The build time: SOURCE_DATE_EPOCH when set, else the time of the repository's last commit (the
 * usual choice: a rebuild of the same commit gets the same time), else FALLBACK_EPOCH.
 */
export async function buildEpoch(repoDir: string, env: NodeJS.ProcessEnv = process.env): Promise<{ epoch: number; from: string }> {
  const given = parseSourceDateEpoch(env.SOURCE_DATE_EPOCH);
  if (given !== undefined) return { epoch: given, from: 'SOURCE_DATE_EPOCH' };
  const r = await run('git', ['-C', repoDir, 'log', '-1', '--format=%ct'], { allowFailure: true, timeoutMs: 30_000 }).catch(() => undefined);
  const t = r?.exitCode === 0 ? Number(r.stdout.trim()) : NaN;
  if (Number.isInteger(t) && t > 0) return { epoch: t, from: 'the last git commit' };
  return { epoch: FALLBACK_EPOCH, from: 'the fixed fallback (no SOURCE_DATE_EPOCH, no git commit)' };
}

/** Every mtime under dir (symlinks themselves included) set to epoch. */
export async function pinTimes(dir: string, epoch: number): Promise<void> {
  await run('find', [dir, '-exec', 'touch', '-h', '-d', `@${epoch}`, '{}', '+'], { timeoutMs: 10 * 60_000 });
}

export type CpioCompression = 'zstd' | 'gzip' | 'none';

/**
 * Packs dir as a newc cpio archive (the initramfs format), reproducibly: times pinned, entries in
 * byte order (LC_ALL=C), `--reproducible` (device and inode numbers renumbered) and owner 0:0.
 * gzip writes no name or time for stdin; zstd's output depends on the input and level only.
 */
export async function packCpio(dir: string, out: string, opts: { epoch: number; compression: CpioCompression; zstdLevel?: number }): Promise<void> {
  await pinTimes(dir, opts.epoch);
  const compress =
    opts.compression === 'zstd' ? `zstd -q -T0 -${opts.zstdLevel ?? 6} -c` : opts.compression === 'gzip' ? 'gzip -n -1' : 'cat';
  await run('sh', ['-c', `cd "$1" && find . | LC_ALL=C sort | cpio -o -H newc --reproducible -R 0:0 --quiet | ${compress} > "$2"`, 'pack-cpio', dir, out], {
    timeoutMs: 20 * 60_000,
  });
}

/**
 * mksquashfs's environment: it refuses to run when SOURCE_DATE_EPOCH is set next to -mkfs-time or
 * -all-time ("can't be used at the same time"), and a build started with SOURCE_DATE_EPOCH (the
 * convention buildEpoch honours) passes it on. The time is in the options, so the variable goes.
 */
export const MKSQUASHFS_ENV: Record<string, undefined> = { SOURCE_DATE_EPOCH: undefined };

/**
 * Packs dir into a reproducible squashfs: the filesystem and file times pinned, owners root.
 * (mksquashfs 4.4+ writes the same image whatever the number of threads; files go in name order.)
 */
export async function packSquashfs(dir: string, out: string, epoch: number, opts: { zstdLevel?: number; timeoutMs: number }): Promise<void> {
  await run('mksquashfs', [
    dir, out,
    '-noappend', '-no-progress', '-quiet', '-all-root',
    '-comp', 'zstd', ...(opts.zstdLevel ? ['-Xcompression-level', String(opts.zstdLevel)] : []),
    '-mkfs-time', String(epoch), '-all-time', String(epoch),
  ], { env: MKSQUASHFS_ENV, timeoutMs: opts.timeoutMs });
}
