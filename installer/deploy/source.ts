import { createHash } from 'node:crypto';
import { lstat, mkdir, mkdtemp, opendir, readFile, readlink, rm, rmdir, statfs } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import { beforeStall, sampleProgress, StallError, StallWatchdog } from '../../lib/stall-watchdog.js';
import type { OsSource } from '../disk/contracts.js';
import { blocksFor, EXT2_BLOCK_SIZE, type TreeMeasure } from './image-size.js';
import { sampleIntervalMs, SOURCE_STALL_TIMEOUT_MS } from './image-build.js';

const MOUNT_PREFIX = 'hv-deploy-src-';
/** Where image-tree.ts mounts a built image to check its tree (beside the copy: a kill can leave it). */
export const IMAGE_MOUNT_PREFIX = 'hv-deploy-img-';

/** A source made ready to read as a plain directory tree, and how to let go of it. */
export interface PreparedSource {
  tree: string;
  release(): Promise<void>;
}

/**
 * Presents the source as a read-only directory:
 * - a directory is bind-mounted without its submounts (so `/` yields the root filesystem without
 *   /proc, /sys, /dev, /run, as Elemental's rsync excludes them) and with noatime, so reading it
 *   does not change the access times that end up in the image;
 * - a squashfs file is loop-mounted read-only (no copy), or unpacked with unsquashfs when the
 *   kernel cannot mount it (with the stall watch of every other read from the boot medium).
 */
export async function prepareSource(source: OsSource, workDir: string, stallTimeoutMs = SOURCE_STALL_TIMEOUT_MS): Promise<PreparedSource> {
  await mkdir(workDir, { recursive: true });
  await releaseStaleMounts(workDir);
  const st = await lstat(source.path).catch(() => undefined);
  if (source.kind === 'dir') {
    if (!st?.isDirectory()) {
      throw new HvError(`the OS source ${source.path} is not a directory`, {
        where: 'deploy: --source',
        hint: 'pass a directory tree, a squashfs file, or leave --source out to deploy the live root',
        exitCode: ExitCode.usage,
      });
    }
    const mnt = await mkdtemp(path.join(workDir, MOUNT_PREFIX));
    try {
      await run('mount', ['--bind', source.path, mnt]);
      await run('mount', ['-o', 'remount,bind,ro,noatime', mnt]);
    } catch (err) {
      await run('umount', [mnt], { allowFailure: true });
      await rmdir(mnt).catch(() => undefined);
      throw err;
    }
    return { tree: mnt, release: () => unmountAndRemove(mnt) };
  }
  if (!st?.isFile()) {
    throw new HvError(`the OS source ${source.path} is not a squashfs file`, {
      where: 'deploy: --source',
      hint: 'check the path; a squashfs image such as rootfs.squashfs is expected',
      exitCode: ExitCode.usage,
    });
  }
  const mnt = await mkdtemp(path.join(workDir, MOUNT_PREFIX));
  const mounted = await run('mount', ['-t', 'squashfs', '-o', 'loop,ro', source.path, mnt], { allowFailure: true });
  if (mounted.exitCode === 0) return { tree: mnt, release: () => unmountAndRemove(mnt) };
  await rmdir(mnt).catch(() => undefined);
  const unpacked = await mkdtemp(path.join(workDir, 'hv-deploy-unsquash-'));
  try {
    await unpackSquashfs(source.path, unpacked, stallTimeoutMs);
  } catch (err) {
    await rm(unpacked, { recursive: true, force: true });
    throw err;
  }
  return { tree: unpacked, release: () => rm(unpacked, { recursive: true, force: true }) };
}

/**
 * `unsquashfs` of `file` into the empty directory `dest`. The squashfs often sits on the boot
 * medium: when the filesystem under `dest` gains no byte for stallTimeoutMs, unsquashfs is stopped
 * and the read named as stalled. (Other writers on that filesystem can only hide a stall for as
 * long as they write, never fake one.)
 */
export async function unpackSquashfs(file: string, dest: string, stallTimeoutMs = SOURCE_STALL_TIMEOUT_MS): Promise<void> {
  const wd = new StallWatchdog(stallTimeoutMs);
  const stop = new AbortController();
  const stopSampling = sampleProgress(wd, async () => {
    const s = await statfs(dest);
    return (s.blocks - s.bfree) * s.bsize;
  }, sampleIntervalMs(stallTimeoutMs));
  const unpack = run('unsquashfs', ['-f', '-q', '-n', '-d', dest, file], { timeoutMs: 60 * 60_000, signal: stop.signal });
  try {
    await beforeStall(unpack, wd, (idle) => `unsquashfs wrote nothing under ${dest} for ${Math.round(idle / 1000)} s: reading the squashfs source ${file} stalled (a hung boot medium?)`);
  } catch (err) {
    stop.abort(err);
    unpack.catch(() => undefined);
    if (err instanceof StallError) {
      throw new HvError(err.message, {
        where: 'deploy: unsquashfs',
        hint: 'check the boot medium (virtual media over a BMC: its connection); the install resumes where it stopped when run again',
        exitCode: ExitCode.installFailed,
        cause: err,
      });
    }
    throw new HvError(`cannot read the squashfs source ${file}`, {
      where: 'deploy: unsquashfs',
      hint: 'the file may be truncated or not a squashfs image; check it with `unsquashfs -s`',
      exitCode: ExitCode.installFailed,
      cause: err,
    });
  } finally {
    stopSampling();
  }
}

async function unmountAndRemove(mnt: string): Promise<void> {
  await run('umount', [mnt], { allowFailure: true });
  // A busy mount: lazily detach rather than leave the source mounted under the work dir.
  if (await isMountPoint(mnt)) await run('umount', ['-l', mnt], { allowFailure: true });
  await rmdir(mnt).catch(() => undefined);
}

/** A killed earlier run may have left its source, or the image it was checking, mounted in the work dir: detach those. */
async function releaseStaleMounts(workDir: string): Promise<void> {
  const real = path.resolve(workDir);
  for (const m of await mountPoints()) {
    if (path.dirname(m) === real && [MOUNT_PREFIX, IMAGE_MOUNT_PREFIX].some((p) => path.basename(m).startsWith(p))) await unmountAndRemove(m);
  }
}

async function mountPoints(): Promise<string[]> {
  const text = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(' ')[4] ?? '')
    .map((p) => p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8))));
}

async function isMountPoint(p: string): Promise<boolean> {
  return (await mountPoints()).includes(path.resolve(p));
}

export interface TreeScan extends TreeMeasure {
  /** sha256 over a sorted manifest of every entry (path, type, mode, owner, size, mtime, link). */
  digest: string;
  /** Newest mtime in the tree, whole seconds: the fixed clock for a reproducible image. */
  newestMtime: number;
}

/**
 * Walks the tree once, measuring what the image must hold and fingerprinting it. The manifest
 * covers metadata, not file contents: reading every byte twice would double the deploy time, and
 * the images themselves are checksummed.
 */
export async function scanTree(root: string, signal?: AbortSignal): Promise<TreeScan> {
  const hash = createHash('sha256');
  let fileBytes = 0;
  let blockBytes = 0;
  let entries = 0;
  let newestMtime = 0;
  const walk = async (dir: string, rel: string): Promise<void> => {
    signal?.throwIfAborted();
    const names: string[] = [];
    const d = await opendir(dir);
    for await (const e of d) names.push(e.name);
    names.sort();
    for (const name of names) {
      const full = path.join(dir, name);
      const relPath = rel ? `${rel}/${name}` : name;
      const st = await lstat(full);
      entries++;
      newestMtime = Math.max(newestMtime, Math.floor(st.mtimeMs / 1000));
      let type: string;
      let link = '';
      if (st.isDirectory()) {
        type = 'd';
        blockBytes += EXT2_BLOCK_SIZE;
      } else if (st.isFile()) {
        type = 'f';
        fileBytes += st.size;
        blockBytes += blocksFor(st.size) + (st.size > 12 * EXT2_BLOCK_SIZE ? blocksFor((st.size / EXT2_BLOCK_SIZE) * 4) : 0);
      } else if (st.isSymbolicLink()) {
        type = 'l';
        link = await readlink(full);
        if (link.length >= 60) blockBytes += EXT2_BLOCK_SIZE; // longer targets leave the inode
      } else {
        type = st.isCharacterDevice() ? 'c' : st.isBlockDevice() ? 'b' : st.isFIFO() ? 'p' : 's';
      }
      hash.update(`${relPath}\0${type}\0${st.mode.toString(8)}\0${st.uid}:${st.gid}\0${st.size}\0${Math.floor(st.mtimeMs)}\0${st.rdev}\0${link}\n`);
      if (type === 'd') await walk(full, relPath);
    }
  };
  const rootSt = await lstat(root);
  hash.update(`.\0d\0${rootSt.mode.toString(8)}\0${rootSt.uid}:${rootSt.gid}\n`);
  await walk(root, '');
  return { fileBytes, blockBytes, entries, digest: hash.digest('hex'), newestMtime };
}
