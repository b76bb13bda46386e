import { mkdir, open, readFile, rename, rm, statfs } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { fsyncDir, writeFileAtomic } from '../../lib/atomic-write.js';
import type { DeployRequest, DeployResult, ImageRecord } from '../disk/contracts.js';
import { buildExt2Image, relabelExt2Image, SOURCE_STALL_TIMEOUT_MS } from './image-build.js';
import { MiB, planImageGeometry } from './image-size.js';
import { prepareSource, scanTree, type TreeScan } from './source.js';
import { copyImage, imageChunks } from './sparse-copy.js';
import { Sha256Pool } from './hash-pool.js';
import { settleLater } from './checksum.js';
import { settleWithin, StallError } from '../../lib/stall-watchdog.js';
import { ext2LabelOffsets } from './ext2-label.js';
import { parseStateYaml, renderStateYaml, STATE_FILE, type DeployState } from './state-file.js';
import { takeSourceDigests, type SourceDigests } from './source-digest.js';
import { checkImageTree } from './image-tree.js';
import { readBackFile, readBackImages } from './read-back.js';
import { beforeTargetStalls, TargetWatch, targetStalled } from './target-watch.js';
import { abs, imageTargets, keepVerifiedImages, partialOf, sidecarOf, type Role, type Sidecar, type Target } from './targets.js';

export { planImageGeometry, DEFAULT_SYSTEM_SIZE_MIB, IMAGE_HEADROOM_MIB } from './image-size.js';
export { renderStateYaml, parseStateYaml, STATE_FILE, type DeployState } from './state-file.js';
export { verifyDeployment, type ImageCheck } from './verify.js';
export { takeSourceDigests, type SourceDigests } from './source-digest.js';
export { beforeTargetStalls, TargetWatch } from './target-watch.js';
export { SOURCE_STALL_TIMEOUT_MS } from './image-build.js';
export { imageDigestOnDisk, imageDigestsOnDisk, readBackDigest, readBackDigests, readBackFile, readBackImage, readBackImages, readBackSha256, ReadBackMismatch, type ExpectedImage } from './read-back.js';

/** How long cleanup after a failure may take before the failure goes out without it. */
const CLEANUP_MS = 10_000;

/** What one image must be once written: its chunked digest and each chunk's sha256. */
interface Expected {
  digest: string;
  chunks: string[];
}

/** One deploy's state as its named steps pass it on. */
interface Deploy {
  req: DeployRequest;
  targets: Record<Role, Target>;
  digests: SourceDigests;
  scan: TreeScan;
  tree: string;
  sourceDigest: string;
  sizeBytes: number;
  inodes: number;
  pool: Sha256Pool;
  watch: TargetWatch;
  kept: Map<Role, Sidecar>;
  todo: Target[];
  report: (bytes: number) => void;
}

/**
 * Step 4 of the install: builds cOS/active.img from the source, copies it to cOS/passive.img and
 * COS_RECOVERY's cOS/recovery.img (relabelled, sparse), checks the tree in active.img against the
 * source's digests taken before the install began, reads every image back from the disk against
 * the digests of what was written, records them in state.yaml on both partitions (read back too),
 * and returns the digests as read back.
 *
 * Resumable: every image is written under a temporary name and renamed only once read back, with a
 * sidecar holding its digests. A re-run keeps an image only when it reads back as its sidecar says
 * and was built from the same source; rebuilding is reproducible (fixed UUID, hash seed and clock
 * derived from the source), so an interrupted deploy ends byte-identical to an uninterrupted one.
 */
export async function deployImages(req: DeployRequest): Promise<DeployResult> {
  const targets = imageTargets(req);
  await mkdir(path.join(req.stateDir, 'cOS'), { recursive: true });
  await mkdir(path.join(req.recoveryDir, 'cOS'), { recursive: true });
  for (const t of Object.values(targets)) await rm(partialOf(t), { force: true });
  const stall = req.stallTimeoutMs ?? SOURCE_STALL_TIMEOUT_MS;
  const digests = req.sourceDigests ?? (await takeSourceDigests(req.source, req.workDir, { signal: req.signal, stallTimeoutMs: stall }).catch((err: unknown) => { throw stalledSource(err, req.source.path); }));
  const prepared = await prepareSource(req.source, req.workDir, stall);
  const pool = new Sha256Pool();
  const watch = new TargetWatch([req.stateDevice, req.recoveryDevice], stall);
  try {
    const d = await planDeploy(req, targets, digests, prepared.tree, pool, watch);
    const written = await beforeTargetStalls(watch, 'writing the OS images', writeImages(d));
    const records = await beforeTargetStalls(watch, 'reading the OS images back', verifyAndPlace(d, written));
    const result: DeployResult = { ...records, sourceDigest: d.sourceDigest, contentDigest: digests.digest };
    await writeStateFiles(req, result);
    return result;
  } finally {
    // After a failure or an abort nothing half-written stays behind (after success these are gone).
    // Best effort: on a disk that failed, removing fails too (EROFS once ext4 gave up), and that
    // must not replace the error that explains why.
    // Bounded too: on a disk that stopped answering the unlink hangs with it.
    watch.stop();
    await settleWithin(Promise.all(Object.values(targets).map((t) => rm(partialOf(t), { force: true }))), CLEANUP_MS);
    await pool.close().catch(() => undefined);
    await settleWithin(prepared.release(), CLEANUP_MS);
  }
}

/** Measures the tree, sizes the image, keeps what an earlier run verified, checks the space for the rest. */
async function planDeploy(req: DeployRequest, targets: Record<Role, Target>, digests: SourceDigests, tree: string, pool: Sha256Pool, watch: TargetWatch): Promise<Deploy> {
  req.signal?.throwIfAborted();
  const scan = await scanTree(tree, req.signal);
  const sourceDigest = digests.fileSha256 ?? scan.digest;
  const geometry = planImageGeometry(scan, req.systemSizeMiB);
  const sizeBytes = geometry.sizeBytes;
  const kept = await keepVerifiedImages(targets, { sourceDigest, contentDigest: digests.digest, sizeBytes }, pool, req.signal);
  const todo = Object.values(targets).filter((t) => !kept.has(t.role));
  await checkFreeSpace(todo, sizeBytes);
  // Progress: the data written, then the same again read back.
  let total = scan.blockBytes * todo.length * 2;
  let done = 0;
  const report = (bytes: number): void => {
    done += bytes;
    total = Math.max(total, done);
    req.onProgress?.(done, total);
  };
  req.onProgress?.(0, total);
  return { req, targets, digests, scan, tree, sourceDigest, sizeBytes, inodes: geometry.inodes, pool, watch, kept, todo, report };
}

/** What writeImages leaves: each image's expected digests, and the tree check of a new active.img under way. */
interface Written {
  expected: Map<Role, Expected>;
  tree?: Promise<void>;
}

/**
 * Builds active (unless kept) and copies it to the images still to do; returns what each must hold.
 * The tree a new active.img holds is checked against the source (checkImageTree) while the copies
 * are written and read back: it reads and hashes on its own, where the copy and the read-back wait
 * for the disk; verifyAndPlace waits for it before anything is placed.
 */
async function writeImages(d: Deploy): Promise<Written> {
  const activeBuilt = !d.kept.has('active');
  const activeSource = activeBuilt ? partialOf(d.targets.active) : abs(d.targets.active);
  if (activeBuilt) await buildActive(d, activeSource);
  d.req.signal?.throwIfAborted();
  const tree = activeBuilt ? settleLater(checkImageTree(activeSource, d.targets.active.file, d.digests, d.req.workDir, { tree: d.tree, device: d.targets.active.device, signal: d.req.signal })) : undefined;
  try {
    return { expected: await copyImages(d, activeSource, activeBuilt), tree };
  } catch (err) {
    await tree?.catch(() => undefined);
    throw err;
  }
}

/** Copies active to the images still to do (relabelled); returns what each image must hold. */
async function copyImages(d: Deploy, activeSource: string, activeBuilt: boolean): Promise<Map<Role, Expected>> {
  const expected = new Map<Role, Expected>([...d.kept].map(([role, s]) => [role, { digest: s.digest, chunks: s.chunks }]));
  const copies = d.todo.filter((t) => t.role !== 'active');
  if (copies.length === 0 && !activeBuilt) return expected;
  const offsets = ext2LabelOffsets(await readSuperblock(activeSource));
  const copied = await copyImage(
    activeSource,
    copies.map((t) => ({ path: partialOf(t), relabel: offsets ? { label: t.label, offsets } : undefined })),
    { signal: d.req.signal, onBytes: d.report, pool: d.pool },
  );
  const keptActive = d.kept.get('active');
  if (keptActive && copied.sourceDigest !== keptActive.digest) {
    throw new HvError(`cOS/active.img changed while it was being copied (digest ${copied.sourceDigest}, expected ${keptActive.digest})`, {
      where: abs(d.targets.active),
      hint: 'something else is writing to COS_STATE; stop it and re-run the install',
      exitCode: ExitCode.installFailed,
    });
  }
  expected.set('active', { digest: copied.sourceDigest, chunks: copied.sourceChunks });
  if (offsets) copies.forEach((t, i) => expected.set(t.role, { digest: copied.targetDigests[i]!, chunks: copied.targetChunks[i]! }));
  else {
    for (const t of copies) {
      await relabelExt2Image(partialOf(t), t.label, d.scan.newestMtime);
      expected.set(t.role, await imageChunks(partialOf(t), { signal: d.req.signal, pool: d.pool }));
    }
  }
  return expected;
}

async function buildActive(d: Deploy, file: string): Promise<void> {
  let allocated = 0;
  try {
    await buildExt2Image(
      { tree: d.tree, file, label: 'COS_ACTIVE', sizeBytes: d.sizeBytes, inodes: d.inodes, sourceDigest: d.sourceDigest, epoch: d.scan.newestMtime },
      (bytes) => {
        if (bytes > allocated) d.report(bytes - allocated);
        allocated = Math.max(allocated, bytes);
      },
      d.req.stallTimeoutMs,
    );
  } catch (err) {
    await settleWithin(rm(file, { force: true }), CLEANUP_MS);
    // mke2fs's image stops growing whichever side stalls: the target's counters tell which.
    const stuck = err instanceof StallError ? d.watch.stuck() : undefined;
    if (stuck) throw targetStalled('writing cOS/active.img', stuck);
    if (err instanceof StallError) throw stalledSource(err, d.req.source.path);
    throw new HvError(`building cOS/active.img (${d.sizeBytes / MiB} MiB ext2) from ${d.req.source.path} failed: ${(err as Error).message}`, {
      where: abs(d.targets.active),
      hint: 'check free space on COS_STATE and that the source is readable; the step can be re-run',
      exitCode: ExitCode.installFailed,
      cause: err,
    });
  }
}

/**
 * Flushes the new images, reads each back from the disk against what it must hold, then records
 * it (sidecar) and renames it into place, once active.img's tree check is done too. Returns every
 * image's record, digests as read back.
 */
async function verifyAndPlace(d: Deploy, { expected, tree }: Written): Promise<Record<Role, ImageRecord>> {
  // A failed tree check stops the read-back: its error is the one reported (it was found first
  // when the two ran one after the other); both have ended before anything is placed or removed.
  const stop = new AbortController();
  tree?.catch(() => stop.abort());
  const reading = settleLater(readBack(d, expected, d.req.signal ? AbortSignal.any([d.req.signal, stop.signal]) : stop.signal));
  const [treeChecked, readBackDone] = await Promise.allSettled([tree, reading]);
  if (treeChecked.status === 'rejected') throw treeChecked.reason;
  if (readBackDone.status === 'rejected') throw readBackDone.reason;
  const read = readBackDone.value;
  for (const [i, t] of d.todo.entries()) {
    const side: Sidecar = { sourceDigest: d.sourceDigest, contentDigest: d.digests.digest, sizeBytes: d.sizeBytes, label: t.label, digest: read[i]!, chunks: expected.get(t.role)!.chunks };
    await writeFileAtomic(sidecarOf(t), JSON.stringify(side) + '\n');
    await rename(partialOf(t), abs(t));
  }
  await fsyncDir(path.join(d.req.stateDir, 'cOS'));
  await fsyncDir(path.join(d.req.recoveryDir, 'cOS'));
  const record = (t: Target): ImageRecord => ({ file: t.file, label: t.label, fs: 'ext2', sizeBytes: d.sizeBytes, digest: expected.get(t.role)!.digest });
  return { active: record(d.targets.active), passive: record(d.targets.passive), recovery: record(d.targets.recovery) };
}

/** Flushes the new images and reads them back from the disk against what each must hold; their digests as read. */
async function readBack(d: Deploy, expected: Map<Role, Expected>, signal: AbortSignal): Promise<string[]> {
  for (const t of d.todo) await fsyncFile(partialOf(t));
  return readBackImages(
    d.todo.map((t) => ({ path: partialOf(t), name: t.file, sizeBytes: d.sizeBytes, device: t.device, ...expected.get(t.role)! })),
    { pool: d.pool, signal, onBytes: d.report },
  );
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

/**
 * state.yaml on COS_STATE and COS_RECOVERY, read back from the disk; an existing one describing the
 * same images is kept as it is (and read back all the same).
 */
async function writeStateFiles(req: DeployRequest, result: DeployResult): Promise<void> {
  for (const [root, device] of [[req.stateDir, req.stateDevice], [req.recoveryDir, req.recoveryDevice]] as const) {
    const file = path.join(root, STATE_FILE);
    const existingText = await readFile(file, 'utf8').catch(() => '');
    const existing = parseStateYaml(existingText);
    const state: DeployState = { date: new Date().toISOString(), source: req.source, ...result };
    const text = existing && sameDeployment(existing, state) ? existingText : renderStateYaml(state);
    if (text !== existingText) await writeFileAtomic(file, text);
    await readBackFile(file, STATE_FILE, text, device);
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
