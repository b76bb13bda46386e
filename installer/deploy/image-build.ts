import { createHash } from 'node:crypto';
import { open, rm, stat } from 'node:fs/promises';
import { run } from '../../lib/exec.js';
import type { ImageRecord } from '../disk/contracts.js';
import { flushWhileWriting } from './flush-behind.js';
import { beforeStall, sampleProgress, StallWatchdog } from '../../lib/stall-watchdog.js';

export interface Ext2ImageSpec {
  tree: string;
  file: string;
  label: ImageRecord['label'];
  sizeBytes: number;
  inodes: number;
  /** Seeds the filesystem UUID and directory hash seed, so the same source gives the same image. */
  sourceDigest: string;
  /** The clock mke2fs stamps into the superblock and new directories (the tree's newest mtime). */
  epoch: number;
}

/** A UUID (version 4 layout) derived from a digest and a purpose, so rebuilds are byte-identical. */
export function derivedUuid(digest: string, purpose: string): string {
  const h = createHash('sha256').update(`${purpose}\0${digest}`).digest();
  h[6] = (h[6] & 0x0f) | 0x40;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/** The mke2fs arguments for an image: pure, so tests can check them. */
export function mkfsExt2Args(spec: Ext2ImageSpec): string[] {
  return [
    '-t', 'ext2',
    '-F', '-q',
    '-b', '4096',
    '-I', '256',
    '-N', String(spec.inodes),
    '-L', spec.label,
    '-U', derivedUuid(spec.sourceDigest, 'fs-uuid'),
    '-E', `hash_seed=${derivedUuid(spec.sourceDigest, 'hash-seed')}`,
    '-d', spec.tree,
    spec.file,
    `${Math.floor(spec.sizeBytes / 1024)}k`,
  ];
}

/** Environment that makes e2fsprogs stamp a fixed time instead of the wall clock. */
export function e2fsprogsEnv(epoch: number): Record<string, string> {
  return { E2FSPROGS_FAKE_TIME: String(epoch) };
}

/** The default stall timeout for reads of the OS source (as hvagent's image preload). */
export const SOURCE_STALL_TIMEOUT_MS = 120_000;

/** How often a stall watch samples its counter: often enough to see a stall within an eighth of its timeout. */
export function sampleIntervalMs(stallTimeoutMs: number): number {
  return Math.max(20, Math.min(500, Math.floor(stallTimeoutMs / 8)));
}

/**
 * Builds an ext2 image straight from a directory with `mke2fs -d` (no loop mount, no copy through
 * a mounted filesystem) into a sparse file: only the tree's blocks and ext2 metadata are written.
 * onAllocated reports the bytes allocated so far while mke2fs runs. mke2fs reads the source tree,
 * which often sits on the boot medium: when the image stops growing for stallTimeoutMs, mke2fs is
 * stopped and the build fails as stalled, even if mke2fs hangs in a read that cannot be killed.
 */
export async function buildExt2Image(spec: Ext2ImageSpec, onAllocated?: (bytes: number) => void, stallTimeoutMs = SOURCE_STALL_TIMEOUT_MS): Promise<void> {
  await rm(spec.file, { force: true });
  const fh = await open(spec.file, 'wx', 0o644);
  try {
    await fh.truncate(spec.sizeBytes);
  } finally {
    await fh.close();
  }
  const wd = new StallWatchdog(stallTimeoutMs);
  const stop = new AbortController();
  let allocated = 0;
  const stopSampling = sampleProgress(wd, async () => (await stat(spec.file)).blocks * 512, sampleIntervalMs(stallTimeoutMs), (v) => {
    allocated = v;
    onAllocated?.(v);
  });
  try {
    // Flushed while mke2fs writes, so the disk works while mke2fs and then the copy use the CPU;
    // the caller still fsyncs the image before renaming it into place.
    const built = flushWhileWriting(spec.file, run('mke2fs', mkfsExt2Args(spec), { env: e2fsprogsEnv(spec.epoch), timeoutMs: 60 * 60_000, signal: stop.signal }));
    await beforeStall(built, wd, (idle) => `mke2fs wrote nothing to ${spec.file} for ${Math.round(idle / 1000)} s at ${Math.round(allocated / 1048576)} MiB: reading the OS source ${spec.tree} stalled (a hung boot medium?)`).catch((err: unknown) => {
      stop.abort(err);
      built.catch(() => undefined);
      throw err;
    });
  } finally {
    stopSampling();
  }
  if (onAllocated) onAllocated((await stat(spec.file)).blocks * 512);
}

/** Relabels a copied image (tune2fs -L), with the same fixed clock so the result is reproducible. */
export async function relabelExt2Image(file: string, label: ImageRecord['label'], epoch: number): Promise<void> {
  await run('tune2fs', ['-L', label, file], { env: e2fsprogsEnv(epoch) });
}
