/**
 * Copies the container image bundle (the ISO's bundle/) onto COS_PERSISTENT, where the installed
 * node's image-preload guard finds it at /var/lib/rancher/hvagent/bundle. Pure decisions (what to
 * copy, keep, remove; whether it fits) in planBundleCopy and bundleSpaceProblem; copyBundle is the
 * thin effect layer. Resumable: a destination file whose size and mtime equal the source's is kept,
 * every file is written to a temp name, fsynced and renamed, and whatever the source does not hold
 * (a stale bundle, a temp file a killed run left) is removed.
 */
import { randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, open, readdir, readlink, rename, rm, statfs, symlink, unlink, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { fsyncDir } from '../../lib/atomic-write.js';
import { settleLater } from '../deploy/checksum.js';
import { HvError, ExitCode } from '../../lib/errors.js';
import { formatBytes } from '../../config/disk-sizes.js';
import { beforeStall, closeAfterStuck, StallError, StallWatchdog } from '../../lib/stall-watchdog.js';
import { sleep } from '../../lib/wait.js';

/** The node path the agent looks at first (agent/preload/settings.ts DEFAULT_BUNDLE_DIRS[0]). */
export const BUNDLE_NODE_PATH = '/var/lib/rancher/hvagent/bundle';

export type EntryKind = 'dir' | 'file' | 'symlink' | 'other';

/** One entry of a tree, relative to its root ('' is never listed: the root itself). */
export interface TreeEntry {
  rel: string;
  kind: EntryKind;
  /** Permission bits (& 0o7777). */
  mode: number;
  size: number;
  /** Rounded to whole milliseconds: utimes takes float seconds, so what it sets reads back a hair off. */
  mtimeMs: number;
  /** Symlink target. */
  target?: string;
  /** For kind 'other': what it is (socket, FIFO, block device, character device). */
  what?: string;
}

export interface BundleCopyPlan {
  /** Destination entries to delete before copying (top-most only: a removed directory takes its contents). */
  remove: TreeEntry[];
  /** Directories to create, parents first; their modes are set after the files are in. */
  dirs: TreeEntry[];
  /** Files to (re)write. */
  copy: TreeEntry[];
  /** Files already complete in the destination. */
  keep: TreeEntry[];
  /** Kept files whose mode differs (chmod only). */
  fixMode: TreeEntry[];
  links: TreeEntry[];
  files: number;
  totalBytes: number;
  copyBytes: number;
  /** Bytes the removals free. */
  freedBytes: number;
}

function unsupported(e: TreeEntry, sourceRoot: string): HvError {
  return new HvError(`the image bundle holds ${path.join(sourceRoot, e.rel)}, a ${e.what ?? 'special file'}, which cannot be copied`, {
    where: sourceRoot,
    hint: 'a bundle holds only directories, regular files and symlinks: remove it from the bundle',
    exitCode: ExitCode.installFailed,
  });
}

const isBelow = (rel: string, dir: string): boolean => rel.startsWith(`${dir}/`);
/** Byte order, the same in every locale. */
const byPath = (a: TreeEntry, b: TreeEntry): number => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0);

/**
 * What to do to make dest hold exactly source. Throws HvError for a source entry that is neither a
 * directory, a regular file nor a symlink.
 */
export function planBundleCopy(source: TreeEntry[], dest: TreeEntry[], sourceRoot = 'the bundle'): BundleCopyPlan {
  const bad = source.find((e) => e.kind === 'other');
  if (bad) throw unsupported(bad, sourceRoot);
  const want = new Map(source.map((e) => [e.rel, e]));
  const have = new Map(dest.map((e) => [e.rel, e]));

  // A destination entry goes when the source has nothing there, or something of another kind, or
  // a symlink to somewhere else; a changed file is replaced by rename instead.
  const doomed = dest.filter((d) => {
    const s = want.get(d.rel);
    if (!s || s.kind !== d.kind) return true;
    return s.kind === 'symlink' && s.target !== d.target;
  });
  const doomedDirs = doomed.filter((d) => d.kind === 'dir').map((d) => d.rel);
  const remove = doomed.filter((d) => !doomedDirs.some((dir) => isBelow(d.rel, dir)));
  const doomedPaths = new Set(doomed.map((d) => d.rel));
  const gone = (rel: string): boolean => doomedPaths.has(rel) || doomedDirs.some((dir) => isBelow(rel, dir));
  const present = (rel: string): TreeEntry | undefined => (gone(rel) ? undefined : have.get(rel));
  const freedBytes = dest.filter((d) => d.kind === 'file' && gone(d.rel)).reduce((n, d) => n + d.size, 0);

  const byDepth = (a: TreeEntry, b: TreeEntry): number => a.rel.split('/').length - b.rel.split('/').length || byPath(a, b);
  const dirs = source.filter((e) => e.kind === 'dir').sort(byDepth);
  const files = source.filter((e) => e.kind === 'file').sort(byPath);
  const copy: TreeEntry[] = [];
  const keep: TreeEntry[] = [];
  const fixMode: TreeEntry[] = [];
  for (const f of files) {
    const d = present(f.rel);
    if (d && d.size === f.size && d.mtimeMs === f.mtimeMs) {
      keep.push(f);
      if (d.mode !== f.mode) fixMode.push(f);
    } else copy.push(f);
  }
  const links = source.filter((e) => e.kind === 'symlink' && !present(e.rel)).sort(byPath);
  return {
    remove: remove.sort(byPath),
    dirs,
    copy,
    keep,
    fixMode,
    links,
    files: files.length,
    totalBytes: files.reduce((n, f) => n + f.size, 0),
    copyBytes: copy.reduce((n, f) => n + f.size, 0),
    freedBytes,
  };
}

/** Left free on COS_PERSISTENT after the copy: the node writes there from its first boot. */
export const SPACE_HEADROOM_BYTES = 64 * 1024 * 1024;

/**
 * Why the copy would not fit, or undefined. Counts every file to write rounded up to whole blocks,
 * and the space the removals free; a file being replaced needs room for both copies until the
 * rename, so its old bytes are not counted as free.
 */
export interface CopyLabel {
  /** What is copied, in messages (default "the image bundle"). */
  what: string;
  /** What to do when it does not fit. */
  hint: string;
}

const BUNDLE_LABEL: CopyLabel = {
  what: 'the image bundle',
  hint: 'make COS_PERSISTENT larger (install.persistent_partition_size), or install without the bundle (--bundle none) and let RKE2 pull the images',
};

export function bundleSpaceProblem(plan: BundleCopyPlan, fs: { bsize: number; bavail: number }, where: string, label: CopyLabel = BUNDLE_LABEL): HvError | undefined {
  const bsize = Math.max(1, fs.bsize);
  const need = plan.copy.reduce((n, f) => n + Math.ceil(f.size / bsize) * bsize, 0) + plan.dirs.length * bsize;
  const free = fs.bavail * bsize + plan.freedBytes;
  if (need + SPACE_HEADROOM_BYTES <= free) return undefined;
  return new HvError(
    `${label.what} does not fit on COS_PERSISTENT: ${formatBytes(need)} to copy (${plan.copy.length} files) plus ${formatBytes(SPACE_HEADROOM_BYTES)} headroom, ${formatBytes(free)} free`,
    { where, hint: label.hint, exitCode: ExitCode.installFailed },
  );
}

const KIND_NAMES: Array<[keyof import('node:fs').Stats, string]> = [
  ['isSocket', 'socket'],
  ['isFIFO', 'FIFO'],
  ['isBlockDevice', 'block device'],
  ['isCharacterDevice', 'character device'],
];

/** Every entry under root (lstat, symlinks not followed), parents before children. */
export async function scanTree(root: string): Promise<TreeEntry[]> {
  const out: TreeEntry[] = [];
  async function walk(dir: string): Promise<void> {
    for (const name of (await readdir(dir)).sort()) {
      const full = path.join(dir, name);
      const rel = path.relative(root, full);
      const s = await lstat(full);
      const base = { rel, mode: s.mode & 0o7777, size: s.size, mtimeMs: Math.round(s.mtimeMs) };
      if (s.isDirectory()) {
        out.push({ ...base, kind: 'dir', size: 0 });
        await walk(full);
      } else if (s.isFile()) out.push({ ...base, kind: 'file' });
      else if (s.isSymbolicLink()) out.push({ ...base, kind: 'symlink', size: 0, target: await readlink(full) });
      else out.push({ ...base, kind: 'other', what: KIND_NAMES.find(([m]) => (s[m] as () => boolean).call(s))?.[1] ?? 'special file' });
    }
  }
  await walk(root);
  return out;
}

export interface CopyBundleOptions {
  signal?: AbortSignal;
  onProgress?: (done: number, total: number) => void;
  /** Injected in tests; default node:fs statfs. */
  statfs?: (p: string) => Promise<{ bsize: number; bavail: number }>;
  /** How messages name what is copied (default: the image bundle). */
  label?: CopyLabel;
  /**
   * No byte read from the source for this long is a stall (the bundle comes from the boot medium:
   * virtual media over a BMC stops answering): the file is tried again, up to `attempts` times.
   * The same defaults as hvagent's image preload.
   */
  stallTimeoutMs?: number;
  attempts?: number;
  retryDelayMs?: number;
  /**
   * Checks a file's content: a copied one at its temp name while it is fsynced (it gets its name
   * only once both are done), a kept one where it is; the next files are copied meanwhile. Its
   * rejection fails the copy, and the file checked does not stay.
   */
  check?: (rel: string, file: string) => Promise<void>;
}

export const COPY_STALL_TIMEOUT_MS = 120_000;
export const COPY_ATTEMPTS = 3;

export interface CopyBundleResult {
  files: number;
  bytes: number;
  copied: number;
  copiedBytes: number;
  kept: number;
  removed: string[];
}

const CHUNK = 4 * 1024 * 1024;
/** Files written while earlier ones are still being fsynced and renamed (their fsyncs share journal commits). */
const SYNC_AHEAD = 8;
const tempName = (file: string): string => path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(6).toString('hex')}.hvbundle-tmp`);

/** A file written to its temp name; `durable` settles once it is fsynced, checked and renamed over its name (or removed after a failure). */
interface Written {
  durable: Promise<void>;
}

/**
 * Writes src to a temp file next to dst with src's mode and mtime; then, in the background
 * (`durable`), fsyncs and checks it and renames it over dst, so the disk writes one file back
 * while the next is read. Every read is watched: no byte for stallTimeoutMs rejects with StallError (the stuck
 * read and its file handle are left behind, the handle closed once the read returns: closing
 * earlier would wait).
 */
async function copyFileAtomic(src: string, dst: string, e: TreeEntry, onBytes: (n: number) => void, stallTimeoutMs: number, signal?: AbortSignal, check?: (file: string) => Promise<void>): Promise<Written> {
  const tmp = tempName(dst);
  const wd = new StallWatchdog(stallTimeoutMs);
  const opening = open(src, 'r');
  const input = await beforeStall(opening, wd, (idle) => `opening ${src} did not return for ${Math.round(idle / 1000)} s`).catch((err: unknown) => {
    closeAfterStuck(opening, opening);
    throw err;
  });
  let output;
  let stalled = false;
  let reading: Promise<unknown> = Promise.resolve();
  let done = 0;
  try {
    output = await open(tmp, 'wx', 0o600);
    const buf = Buffer.allocUnsafe(Math.min(CHUNK, Math.max(e.size, 1)));
    for (;;) {
      signal?.throwIfAborted();
      wd.observe(done);
      const read = input.read(buf, 0, buf.length, null);
      reading = read;
      const { bytesRead } = await beforeStall(read, wd, (idle) => `no byte read from ${src} for ${Math.round(idle / 1000)} s at ${formatBytes(done)} of ${formatBytes(e.size)}`).catch((err: unknown) => {
        stalled = err instanceof StallError;
        throw err;
      });
      if (bytesRead === 0) break;
      done += bytesRead;
      let off = 0;
      while (off < bytesRead) off += (await output.write(buf, off, bytesRead - off)).bytesWritten;
      onBytes(bytesRead);
    }
    await output.chmod(e.mode);
    await output.utimes(new Date(e.mtimeMs), new Date(e.mtimeMs));
    const written = output;
    output = undefined;
    return { durable: settleLater(syncCheckAndRename(written, tmp, dst, check)) };
  } catch (err) {
    await output?.close().catch(() => undefined);
    await unlink(tmp).catch(() => undefined);
    throw err;
  } finally {
    if (stalled) closeAfterStuck(reading, input);
    else await input.close();
  }
}

async function syncCheckAndRename(output: FileHandle, tmp: string, dst: string, check?: (file: string) => Promise<void>): Promise<void> {
  const done = await Promise.allSettled([output.sync(), check?.(tmp)]);
  const failed = done.find((r) => r.status === 'rejected');
  try {
    await output.close();
    if (failed) throw failed.reason;
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw failed ? failed.reason : err;
  }
  await rename(tmp, dst).catch(async (err: unknown) => {
    await unlink(tmp).catch(() => undefined);
    throw err;
  });
}

/** copyFileAtomic, tried again after a stall; the last stall becomes an error naming the medium. */
async function copyFileWatched(src: string, dst: string, e: TreeEntry, onBytes: (n: number) => void, opts: CopyBundleOptions): Promise<Written> {
  const attempts = opts.attempts ?? COPY_ATTEMPTS;
  const timeout = opts.stallTimeoutMs ?? COPY_STALL_TIMEOUT_MS;
  let delay = opts.retryDelayMs ?? 2_000;
  for (let attempt = 1; ; attempt++) {
    let moved = 0;
    try {
      return await copyFileAtomic(src, dst, e, (n) => {
        moved += n;
        onBytes(n);
      }, timeout, opts.signal, opts.check && ((file) => opts.check!(e.rel, file)));
    } catch (err) {
      if (!(err instanceof StallError)) throw err;
      // What the failed attempt counted is counted again by the next one.
      onBytes(-moved);
      if (attempt >= attempts) {
        throw new HvError(`${(opts.label ?? BUNDLE_LABEL).what}'s source stopped delivering data: ${err.message} (${attempts} attempt${attempts === 1 ? '' : 's'})`, {
          where: src,
          hint: 'the boot medium hangs (virtual media over a BMC often does under load): check dmesg for I/O errors, attach the ISO another way (USB, a local copy, PXE), then run the same install again to resume',
          exitCode: ExitCode.installFailed,
          cause: err,
        });
      }
      await sleep(delay, opts.signal);
      delay *= 2;
    }
  }
}

/** Makes destRoot hold exactly the bundle at sourceRoot. destRoot is created when missing. */
export async function copyBundle(sourceRoot: string, destRoot: string, opts: CopyBundleOptions = {}): Promise<CopyBundleResult> {
  const source = await scanTree(sourceRoot);
  const rootStat = await lstat(destRoot).catch(() => undefined);
  if (rootStat && !rootStat.isDirectory()) await rm(destRoot, { recursive: true, force: true });
  await mkdir(destRoot, { recursive: true, mode: 0o755 });
  const dest = await scanTree(destRoot);
  const plan = planBundleCopy(source, dest, sourceRoot);
  const fs = await (opts.statfs ?? statfs)(destRoot);
  const space = bundleSpaceProblem(plan, fs, destRoot, opts.label);
  if (space) throw space;

  // A read-only directory an earlier run finished would refuse removals and new files (without root).
  for (const d of dest) if (d.kind === 'dir') await chmod(path.join(destRoot, d.rel), (d.mode | 0o700) & 0o7777);
  const touched = new Set<string>([destRoot]);
  for (const e of plan.remove) {
    opts.signal?.throwIfAborted();
    await rm(path.join(destRoot, e.rel), { recursive: true, force: true });
    touched.add(path.dirname(path.join(destRoot, e.rel)));
  }
  // Writable while filling; the source's modes are applied once the files are in.
  for (const d of plan.dirs) await mkdir(path.join(destRoot, d.rel), { recursive: true, mode: 0o755 });

  let done = 0;
  opts.onProgress?.(0, plan.copyBytes);
  const checked = plan.keep.map((f) => settleLater(opts.check?.(f.rel, path.join(destRoot, f.rel)) ?? Promise.resolve()));
  const durable: Array<Promise<void>> = [];
  try {
    for (const [k, f] of plan.copy.entries()) {
      if (k >= SYNC_AHEAD) await durable[k - SYNC_AHEAD];
      const dst = path.join(destRoot, f.rel);
      const written = await copyFileWatched(path.join(sourceRoot, f.rel), dst, f, (n) => {
        done += n;
        opts.onProgress?.(done, plan.copyBytes);
      }, opts);
      durable.push(written.durable);
      touched.add(path.dirname(dst));
    }
  } finally {
    // No file is left between its write and its rename, and no check running, whatever failed.
    await Promise.allSettled([...durable, ...checked]);
  }
  await Promise.all([...durable, ...checked]);
  for (const f of plan.fixMode) await chmod(path.join(destRoot, f.rel), f.mode);
  for (const l of plan.links) {
    opts.signal?.throwIfAborted();
    const dst = path.join(destRoot, l.rel);
    const tmp = tempName(dst);
    await symlink(l.target!, tmp);
    await rename(tmp, dst);
    touched.add(path.dirname(dst));
  }
  await Promise.all([...touched].map(fsyncDir));
  // Deepest first, so a read-only parent does not stop its children's chmod.
  for (const d of [...plan.dirs].reverse()) await chmod(path.join(destRoot, d.rel), d.mode);
  opts.signal?.throwIfAborted();
  return {
    files: plan.files,
    bytes: plan.totalBytes,
    copied: plan.copy.length,
    copiedBytes: plan.copyBytes,
    kept: plan.keep.length,
    removed: plan.remove.map((e) => e.rel),
  };
}
