import { mkdir, open, readFile, rename, rm, stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { fsyncDir, writeFileAtomic } from '../../lib/atomic-write.js';
import type { DeployRequest, DeployResult, ImageRecord } from '../disk/contracts.js';
import { sha256File } from './checksum.js';
import { buildExt2Image, relabelExt2Image, SOURCE_STALL_TIMEOUT_MS } from './image-build.js';
import { MiB, planImageGeometry } from './image-size.js';
import { prepareSource, scanTree } from './source.js';
import { copyImage, imageDigest } from './sparse-copy.js';
import { Sha256Pool } from './hash-pool.js';
import { StallError } from '../../lib/stall-watchdog.js';
import { ext2LabelOffsets } from './ext2-label.js';
import { parseStateYaml, renderStateYaml, STATE_FILE, type DeployState } from './state-file.js';

export { planImageGeometry, DEFAULT_SYSTEM_SIZE_MIB, IMAGE_HEADROOM_MIB } from './image-size.js';
export { renderStateYaml, parseStateYaml, STATE_FILE, type DeployState } from './state-file.js';
export { verifyDeployment, type ImageCheck } from './verify.js';

type Role = 'active' | 'passive' | 'recovery';

interface Target {
  role: Role;
  /** Partition mount (COS_STATE or COS_RECOVERY). */
  root: string;
  file: string;
  label: ImageRecord['label'];
}

/** The record kept next to each finished image, so a re-run can trust it after checking its digest. */
interface Sidecar {
  sourceDigest: string;
  sizeBytes: number;
  label: string;
  digest: string;
}

const abs = (t: Target): string => path.join(t.root, t.file);
const partialOf = (t: Target): string => path.join(t.root, 'cOS', `.${path.basename(t.file)}.partial`);
const sidecarOf = (t: Target): string => path.join(t.root, 'cOS', `.${path.basename(t.file)}.deploy.json`);

/**
 * Step 4 of the install: builds cOS/active.img from the source, copies it to cOS/passive.img and
 * COS_RECOVERY's cOS/recovery.img (relabelled, sparse), records all three in state.yaml on both
 * partitions, and returns their digests (chunk-digest.ts).
 *
 * Resumable: every image is written under a temporary name and renamed only when complete, with a
 * sidecar holding its digest. A re-run keeps each image whose digest still matches the same
 * source, and rebuilds the rest; rebuilding is reproducible (fixed UUID, hash seed and clock
 * derived from the source), so an interrupted deploy ends byte-identical to an uninterrupted one.
 */
export async function deployImages(req: DeployRequest): Promise<DeployResult> {
  const targets: Record<Role, Target> = {
    active: { role: 'active', root: req.stateDir, file: 'cOS/active.img', label: 'COS_ACTIVE' },
    passive: { role: 'passive', root: req.stateDir, file: 'cOS/passive.img', label: 'COS_PASSIVE' },
    recovery: { role: 'recovery', root: req.recoveryDir, file: 'cOS/recovery.img', label: 'COS_SYSTEM' },
  };
  await mkdir(path.join(req.stateDir, 'cOS'), { recursive: true });
  await mkdir(path.join(req.recoveryDir, 'cOS'), { recursive: true });
  for (const t of Object.values(targets)) await rm(partialOf(t), { force: true });

  const prepared = await prepareSource(req.source, req.workDir, req.stallTimeoutMs ?? SOURCE_STALL_TIMEOUT_MS);
  const pool = new Sha256Pool();
  try {
    req.signal?.throwIfAborted();
    const scan = await scanTree(prepared.tree, req.signal);
    const sourceDigest = req.source.kind === 'squashfs' ? await sha256File(req.source.path, { signal: req.signal, stallTimeoutMs: req.stallTimeoutMs ?? SOURCE_STALL_TIMEOUT_MS }).catch((err: unknown) => { throw stalledSource(err, req.source.path); }) : scan.digest;
    const geometry = planImageGeometry(scan, req.systemSizeMiB);
    const sizeBytes = geometry.sizeBytes;

    // Keep what a previous run finished for this same source, if its digest still holds.
    const kept = new Map<Role, string>();
    const trusted = await Promise.all(Object.values(targets).map((t) => trustedDigest(t, sourceDigest, sizeBytes, pool, req.signal)));
    for (const [k, t] of Object.values(targets).entries()) {
      const sha = trusted[k];
      if (sha) kept.set(t.role, sha);
      else await Promise.all([rm(abs(t), { force: true }), rm(sidecarOf(t), { force: true })]);
    }
    const todo = Object.values(targets).filter((t) => !kept.has(t.role));
    await checkFreeSpace(todo, sizeBytes);

    const perImageData = scan.blockBytes;
    let total = perImageData * todo.length;
    let done = 0;
    const report = (bytes: number): void => {
      done += bytes;
      total = Math.max(total, done);
      req.onProgress?.(done, total);
    };
    req.onProgress?.(0, total);

    const digests = new Map<Role, string>(kept);
    const epoch = scan.newestMtime;
    let activeSource = abs(targets.active);
    if (!kept.has('active')) {
      activeSource = partialOf(targets.active);
      let allocated = 0;
      try {
        await buildExt2Image(
          { tree: prepared.tree, file: activeSource, label: 'COS_ACTIVE', sizeBytes, inodes: geometry.inodes, sourceDigest, epoch },
          (bytes) => {
            if (bytes > allocated) report(bytes - allocated);
            allocated = Math.max(allocated, bytes);
          },
          req.stallTimeoutMs,
        );
      } catch (err) {
        await rm(activeSource, { force: true });
        if (err instanceof StallError) throw stalledSource(err, req.source.path);
        throw new HvError(`building cOS/active.img (${sizeBytes / MiB} MiB ext2) from ${req.source.path} failed: ${(err as Error).message}`, {
          where: abs(targets.active),
          hint: 'check free space on COS_STATE and that the source is readable; the step can be re-run',
          exitCode: ExitCode.installFailed,
          cause: err,
        });
      }
    }
    req.signal?.throwIfAborted();

    const copies = todo.filter((t) => t.role !== 'active');
    if (copies.length > 0 || !kept.has('active')) {
      // Relabel in the stream when the superblock layout is one we know, so each copy is digested
      // as it is written; otherwise copy as is, then tune2fs and digest the result.
      const offsets = ext2LabelOffsets(await readSuperblock(activeSource));
      const copied = await copyImage(
        activeSource,
        copies.map((t) => ({ path: partialOf(t), relabel: offsets ? { label: t.label, offsets } : undefined })),
        { signal: req.signal, onBytes: report, pool },
      );
      if (kept.has('active') && copied.sourceDigest !== kept.get('active')) {
        throw new HvError(`cOS/active.img changed while it was being copied (digest ${copied.sourceDigest}, expected ${kept.get('active')})`, {
          where: abs(targets.active),
          hint: 'something else is writing to COS_STATE; stop it and re-run the install',
          exitCode: ExitCode.installFailed,
        });
      }
      digests.set('active', copied.sourceDigest);
      if (offsets) {
        copies.forEach((t, i) => digests.set(t.role, copied.targetDigests[i]));
      } else {
        for (const t of copies) await relabelExt2Image(partialOf(t), t.label, epoch);
        const sums = await Promise.all(copies.map((t) => imageDigest(partialOf(t), { signal: req.signal, pool })));
        copies.forEach((t, i) => digests.set(t.role, sums[i]));
      }
    }

    if (!kept.has('active')) await fsyncFile(activeSource);
    for (const t of todo) {
      const digest = digests.get(t.role)!;
      await writeFileAtomic(sidecarOf(t), JSON.stringify({ sourceDigest, sizeBytes, label: t.label, digest } satisfies Sidecar) + '\n');
      await rename(partialOf(t), abs(t));
    }
    await fsyncDir(path.join(req.stateDir, 'cOS'));
    await fsyncDir(path.join(req.recoveryDir, 'cOS'));

    const record = (t: Target): ImageRecord => ({ file: t.file, label: t.label, fs: 'ext2', sizeBytes, digest: digests.get(t.role)! });
    const result: DeployResult = {
      active: record(targets.active),
      passive: record(targets.passive),
      recovery: record(targets.recovery),
      sourceDigest,
    };
    await writeStateFiles(req, result);
    req.onProgress?.(total, total);
    return result;
  } finally {
    // After a failure or an abort nothing half-written stays behind (after success these are gone).
    await Promise.all(Object.values(targets).map((t) => rm(partialOf(t), { force: true })));
    await pool.close();
    await prepared.release();
  }
}

/** A stall reading the OS source, as an error that points at the medium; other errors pass through. */
function stalledSource(err: unknown, source: string): unknown {
  if (!(err instanceof StallError)) return err;
  return new HvError(`reading the OS source stalled: ${err.message}`, {
    where: source,
    hint: 'the boot medium hangs (virtual media over a BMC often does under load): check dmesg for I/O errors, attach the ISO another way (USB, a local copy, PXE), then run the same install again to resume',
    exitCode: ExitCode.installFailed,
    cause: err,
  });
}

/** The digest of a finished image from an earlier run, if it is for this source and still intact. */
async function trustedDigest(t: Target, sourceDigest: string, sizeBytes: number, pool: Sha256Pool, signal?: AbortSignal): Promise<string | undefined> {
  let side: Sidecar;
  try {
    side = JSON.parse(await readFile(sidecarOf(t), 'utf8')) as Sidecar;
  } catch {
    return undefined;
  }
  if (side.sourceDigest !== sourceDigest || side.sizeBytes !== sizeBytes || side.label !== t.label) return undefined;
  const st = await stat(abs(t)).catch(() => undefined);
  if (!st || st.size !== sizeBytes) return undefined;
  const digest = await imageDigest(abs(t), { signal, pool });
  return digest === side.digest ? digest : undefined;
}

/**
 * Refuses to start when the images could not be fully allocated later: a sparse image "fits" at
 * creation and fails with I/O errors once the system writes to it (harvester#7457).
 */
async function checkFreeSpace(todo: Target[], sizeBytes: number): Promise<void> {
  const need = new Map<string, number>();
  for (const t of todo) need.set(t.root, (need.get(t.root) ?? 0) + sizeBytes);
  for (const [root, bytes] of need) {
    const fs = await statfs(root);
    const free = fs.bavail * fs.bsize;
    if (free < bytes) {
      throw new HvError(
        `not enough space on ${root} for the OS images: need ${Math.ceil(bytes / MiB)} MiB, ${Math.floor(free / MiB)} MiB free`,
        {
          where: root,
          hint: 'make the partition larger (COS_STATE holds active and passive, COS_RECOVERY holds recovery) or lower system.size',
          exitCode: ExitCode.installFailed,
        },
      );
    }
  }
}

/** state.yaml on COS_STATE and COS_RECOVERY; an existing one describing the same images is kept as is. */
async function writeStateFiles(req: DeployRequest, result: DeployResult): Promise<void> {
  for (const root of [req.stateDir, req.recoveryDir]) {
    const file = path.join(root, STATE_FILE);
    const existing = parseStateYaml(await readFile(file, 'utf8').catch(() => ''));
    const state: DeployState = { date: new Date().toISOString(), source: req.source, ...result };
    if (existing && sameDeployment(existing, state)) continue;
    await writeFileAtomic(file, renderStateYaml(state));
  }
}

function sameDeployment(a: DeployState, b: DeployState): boolean {
  const strip = (s: DeployState): string => JSON.stringify({ ...s, date: '' });
  return strip(a) === strip(b);
}

async function readSuperblock(image: string): Promise<Buffer> {
  const fh = await open(image, 'r');
  try {
    const sb = Buffer.alloc(1024);
    await fh.read(sb, 0, 1024, 1024);
    return sb;
  } finally {
    await fh.close();
  }
}

async function fsyncFile(file: string): Promise<void> {
  const fh = await open(file, 'r+');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
export { buildImageFile, sidecarPath, type BuiltImage, type ImageBuildRequest } from './single-image.js';
export { imageDigest } from './sparse-copy.js';
