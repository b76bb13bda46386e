/**
 * One OS image built from a source, as the install builds active.img (the same source handling,
 * sizing, reproducible mke2fs and chunked digest), for `hvinstall upgrade`'s transition image.
 * Resumable the same way: a finished image keeps a sidecar naming its source, size and digest, and
 * a re-run keeps it only when the digest read back still matches.
 */
import { readFile, rename, rm, stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import { ExitCode, HvError } from '../../lib/errors.js';
import { fsyncDir, writeFileAtomic } from '../../lib/atomic-write.js';
import type { ByteProgress, ImageRecord, OsSource } from '../disk/contracts.js';
import { sha256File } from './checksum.js';
import { buildExt2Image, SOURCE_STALL_TIMEOUT_MS } from './image-build.js';
import { MiB, planImageGeometry } from './image-size.js';
import { prepareSource, scanTree } from './source.js';
import { imageDigest } from './sparse-copy.js';

export interface ImageBuildRequest {
  /** The partition root the image goes on (mounted COS_STATE). */
  root: string;
  /** Its path there, e.g. cOS/transition.img. */
  file: string;
  label: ImageRecord['label'];
  source: OsSource;
  systemSizeMiB?: number;
  workDir: string;
  onProgress?: ByteProgress;
  signal?: AbortSignal;
  stallTimeoutMs?: number;
}

export interface BuiltImage {
  record: ImageRecord;
  sourceDigest: string;
  /** The tree's /etc/os-release (or /usr/lib/os-release), for naming the image; '' when absent. */
  osRelease: string;
  /** True when a finished image of an earlier run was kept. */
  kept: boolean;
}

interface Sidecar {
  sourceDigest: string;
  sizeBytes: number;
  label: string;
  digest: string;
}

export const sidecarPath = (root: string, file: string): string => path.join(root, path.dirname(file), `.${path.basename(file)}.deploy.json`);

/** Builds `file` from the source (or keeps an intact one from an earlier run), digested, fsynced. */
export async function buildImageFile(req: ImageBuildRequest): Promise<BuiltImage> {
  const target = path.join(req.root, req.file);
  const partial = path.join(req.root, path.dirname(req.file), `.${path.basename(req.file)}.partial`);
  await rm(partial, { force: true });
  const stallMs = req.stallTimeoutMs ?? SOURCE_STALL_TIMEOUT_MS;
  const prepared = await prepareSource(req.source, req.workDir, stallMs);
  try {
    const scan = await scanTree(prepared.tree, req.signal);
    const osRelease = await readOsRelease(prepared.tree);
    const sourceDigest = req.source.kind === 'squashfs' ? await sha256File(req.source.path, { signal: req.signal, stallTimeoutMs: stallMs }) : scan.digest;
    const geometry = planImageGeometry(scan, req.systemSizeMiB);
    const sizeBytes = geometry.sizeBytes;
    const record = (digest: string): ImageRecord => ({ file: req.file, label: req.label, fs: 'ext2', sizeBytes, digest });
    const keptDigest = await intactDigest(req, sourceDigest, sizeBytes);
    if (keptDigest) return { record: record(keptDigest), sourceDigest, osRelease, kept: true };
    await rm(target, { force: true });
    await checkRoom(req.root, sizeBytes);
    let allocated = 0;
    req.onProgress?.(0, scan.blockBytes);
    await buildExt2Image({ tree: prepared.tree, file: partial, label: req.label, sizeBytes, inodes: geometry.inodes, sourceDigest, epoch: scan.newestMtime }, (bytes) => {
      allocated = Math.max(allocated, bytes);
      req.onProgress?.(Math.min(allocated, scan.blockBytes), scan.blockBytes);
    }, stallMs);
    req.signal?.throwIfAborted();
    const digest = await imageDigest(partial, { signal: req.signal });
    await writeFileAtomic(sidecarPath(req.root, req.file), JSON.stringify({ sourceDigest, sizeBytes, label: req.label, digest } satisfies Sidecar) + '\n');
    await rename(partial, target);
    await fsyncDir(path.dirname(target));
    req.onProgress?.(scan.blockBytes, scan.blockBytes);
    return { record: record(digest), sourceDigest, osRelease, kept: false };
  } finally {
    await rm(partial, { force: true });
    await prepared.release();
  }
}

/** The digest of a finished image from an earlier run, if it is for this source and still intact. */
async function intactDigest(req: ImageBuildRequest, sourceDigest: string, sizeBytes: number): Promise<string | undefined> {
  const side = await readFile(sidecarPath(req.root, req.file), 'utf8').then((t) => JSON.parse(t) as Sidecar).catch(() => undefined);
  if (!side || side.sourceDigest !== sourceDigest || side.sizeBytes !== sizeBytes || side.label !== req.label) return undefined;
  const st = await stat(path.join(req.root, req.file)).catch(() => undefined);
  if (st?.size !== sizeBytes) return undefined;
  const digest = await imageDigest(path.join(req.root, req.file), { signal: req.signal });
  return digest === side.digest ? digest : undefined;
}

async function checkRoom(root: string, sizeBytes: number): Promise<void> {
  const fs = await statfs(root);
  const free = fs.bavail * fs.bsize;
  if (free >= sizeBytes) return;
  throw new HvError(`not enough space on ${root} for the new OS image: need ${Math.ceil(sizeBytes / MiB)} MiB, ${Math.floor(free / MiB)} MiB free`, {
    where: root,
    hint: 'COS_STATE holds active.img, passive.img and the new image while it is built (harvester#7457); remove what else is there or lower --system-size',
    exitCode: ExitCode.installFailed,
  });
}

async function readOsRelease(tree: string): Promise<string> {
  for (const p of ['etc/os-release', 'usr/lib/os-release']) {
    const text = await readFile(path.join(tree, p), 'utf8').catch(() => undefined);
    if (text !== undefined) return text;
  }
  return '';
}
