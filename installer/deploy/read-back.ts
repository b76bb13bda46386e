/**
 * Read-back verification: what the install wrote, read again from the disk (O_DIRECT: not the page
 * cache, which still holds what was meant even where the disk stored something else or nothing)
 * and compared with digests known before the write. The one home of "verified from the target" for
 * the install's deploy and resume and for upgrades: images by their chunked digest (node/image-digest.ts),
 * small files by sha256.
 *
 * A mismatch names the file, the offset of its first bad 4 MiB chunk, the device and, where FIEMAP
 * maps it, the byte on that device.
 */
import { createHash } from 'node:crypto';
import { constants, open, type FileHandle } from 'node:fs/promises';
import { HvError, ExitCode } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import { alignedSharedBuffer, DIRECT_IO_ALIGN } from './aligned-buffer.js';
import { settleLater } from './checksum.js';
import { chunkCount, chunkRange, chunksWithData, combineChunkSha256s, DIGEST_CHUNK, zeroChunkSha256 } from '../../node/image-digest.js';
import { readDataExtents } from '../../node/file-extents.js';
import { Sha256Pool } from './hash-pool.js';

/** Chunks read ahead of hashing. */
const SLOTS = 4;

/** What a file must hold, known before it was written. */
export interface ExpectedImage {
  /** The file as mounted (e.g. /run/hvinstall/loop3/mnt/cos_state/cOS/active.img). */
  path: string;
  /** Its name for messages (cOS/active.img). */
  name: string;
  sizeBytes: number;
  /** Chunked digest (sha256-4m:…). */
  digest: string;
  /** Each 4 MiB chunk's sha256, when known: a mismatch then names the first bad chunk. */
  chunks?: readonly string[];
  /** The partition it lives on, named in a mismatch (default: ReadBackOptions.device). */
  device?: string;
}

export interface ReadBackOptions {
  pool: Sha256Pool;
  /** The partition the file lives on, named in a mismatch. */
  device?: string;
  signal?: AbortSignal;
  /** Bytes read so far, as each chunk is read. */
  onBytes?: (n: number) => void;
}

/** A file whose bytes on the disk are not the ones meant. */
export class ReadBackMismatch extends HvError {
  constructor(
    message: string,
    readonly file: string,
    readonly offset: number | undefined,
  ) {
    super(message, {
      where: file,
      hint: 'the disk did not store what was written: check dmesg and the disk (SMART, cabling, the controller), then run the same install again; a disk that keeps failing must be replaced',
      exitCode: ExitCode.installFailed,
    });
    this.name = 'ReadBackMismatch';
  }
}

/**
 * Reads an image back from the disk and returns its chunked digest as read; throws ReadBackMismatch
 * when it is not `expected` (size, or digest: naming the first bad chunk when the chunks are known).
 * Holes (no extent) are not read: they hash as zeros, so a hole where data belongs is a mismatch too.
 */
export async function readBackImage(expected: ExpectedImage, opts: ReadBackOptions): Promise<string> {
  return (await readBackImages([expected], opts))[0]!;
}

/**
 * readBackImage for several images at once, read together chunk by chunk (see readBackDigests):
 * returns each one's digest as read, or throws ReadBackMismatch for the first, in the order given,
 * that is not what was written.
 */
export async function readBackImages(expected: readonly ExpectedImage[], opts: ReadBackOptions): Promise<string[]> {
  const got = await readBackDigests(
    expected.map((e) => e.path),
    opts,
  );
  for (const [k, e] of expected.entries()) {
    const bad = await readBackProblem(e, got[k]!, e.device ?? opts.device);
    if (bad) throw bad;
  }
  return got.map((g) => g.digest);
}

/** The mismatch between an image as read back and what was written, or undefined when it is that. */
export async function readBackProblem(expected: ExpectedImage, got: ImageOnDisk, device: string | undefined): Promise<ReadBackMismatch | undefined> {
  if (got.sizeBytes !== expected.sizeBytes) return new ReadBackMismatch(`${expected.name} on ${device ?? 'the disk'} is ${got.sizeBytes} bytes, ${expected.sizeBytes} were written`, expected.name, undefined);
  if (got.digest === expected.digest) return undefined;
  const bad = expected.chunks?.findIndex((c, i) => c !== got.chunks[i]) ?? -1;
  const at = bad >= 0 ? bad * DIGEST_CHUNK : undefined;
  const where = at === undefined ? '' : ` from byte ${at} (4 MiB chunk ${bad})${await physicalNote(expected.path, at, device)}`;
  return new ReadBackMismatch(
    `${expected.name} read back from ${device ?? 'the disk'} differs from what was written${where}: digest ${got.digest}, expected ${expected.digest}`,
    expected.name,
    at,
  );
}

/** An image as the disk holds it: its chunked digest, its chunks' sha256s, its size. */
export interface ImageOnDisk {
  digest: string;
  chunks: string[];
  sizeBytes: number;
}

/** An image's chunked digest, chunks and size as the disk holds them. */
export async function readBackDigest(file: string, opts: ReadBackOptions): Promise<ImageOnDisk> {
  return (await readBackDigests([file], opts))[0]!;
}

/**
 * Several images as the disk holds them, read together: chunk i of every image, then chunk i+1.
 * Every byte of every image is read from the disk; a chunk whose bytes equal those of another
 * image's chunk i, read just before, takes that chunk's sha256 instead of hashing the same bytes
 * again (equal bytes, equal hash: passive and recovery are active's bytes but for their labels,
 * and comparing memory costs a fraction of a sha256). The result is what reading each alone gives.
 */
export async function readBackDigests(files: readonly string[], opts: ReadBackOptions): Promise<ImageOnDisk[]> {
  const handles: DirectFile[] = [];
  try {
    for (const file of files) handles.push(await openDirect(file));
    const sizes = await Promise.all(handles.map(async (fh) => (await fh.handle.stat()).size));
    const chunks = await chunkSums(handles, files, sizes, opts);
    return chunks.map((c, k) => ({ digest: combineChunkSha256s(c), chunks: c, sizeBytes: sizes[k]! }));
  } finally {
    await Promise.all(handles.map((fh) => fh.handle.close()));
  }
}

async function chunkSums(fhs: readonly DirectFile[], files: readonly string[], sizes: readonly number[], opts: ReadBackOptions): Promise<string[][]> {
  const hasData = await Promise.all(files.map(async (file, k) => chunksWithData(await readDataExtents(file, sizes[k]!), sizes[k]!)));
  const arena = alignedSharedBuffer(DIGEST_CHUNK * SLOTS * files.length);
  const region = (slot: number, k: number): Buffer => arena.subarray((slot * files.length + k) * DIGEST_CHUNK, (slot * files.length + k + 1) * DIGEST_CHUNK);
  const inFlight: Array<Promise<unknown> | undefined> = new Array(SLOTS).fill(undefined);
  const sums: Array<Array<Promise<string> | string>> = sizes.map((size) => new Array(chunkCount(size)));
  const n = Math.max(0, ...sums.map((s) => s.length));
  let slot = 0;
  for (let i = 0; i < n; i++) {
    const toRead: Array<{ k: number; buf: Buffer; view: Buffer; at: number }> = [];
    for (const [k, size] of sizes.entries()) {
      if (i >= sums[k]!.length) continue;
      const [at, end] = chunkRange(i, size);
      const buf = region(slot, k);
      if (hasData[k]![i]) toRead.push({ k, buf, view: buf.subarray(0, end - at), at });
      else sums[k]![i] = zeroChunkSha256(end - at);
    }
    if (toRead.length === 0) continue;
    await inFlight[slot]; // the slot's buffers are free once their hashes are done
    opts.signal?.throwIfAborted();
    await Promise.all(toRead.map(async (r) => {
      // The whole slot: a direct read of an unaligned tail is rounded up.
      await fhs[r.k]!.readFully(r.buf, r.view.length, r.at, files[r.k]!);
      opts.onBytes?.(r.view.length);
    }));
    const hashed: Array<{ view: Buffer; sum: Promise<string> }> = [];
    for (const r of toRead) {
      const same = hashed.find((h) => h.view.equals(r.view));
      const sum = same?.sum ?? settleLater(opts.pool.hash(r.view));
      if (!same) hashed.push({ view: r.view, sum });
      sums[r.k]![i] = sum;
    }
    inFlight[slot] = settleLater(Promise.all(hashed.map((h) => h.sum)));
    slot = (slot + 1) % SLOTS;
  }
  return Promise.all(sums.map((s) => Promise.all(s)));
}

/** An image's chunked digest as the disk holds it (a pool of its own). */
export async function imageDigestOnDisk(file: string, signal?: AbortSignal): Promise<string> {
  return (await imageDigestsOnDisk([file], signal))[0]!;
}

/** Several images' chunked digests as the disk holds them, read together (readBackDigests; a pool of its own). */
export async function imageDigestsOnDisk(files: readonly string[], signal?: AbortSignal): Promise<string[]> {
  const pool = new Sha256Pool();
  try {
    return (await readBackDigests(files, { pool, signal })).map((d) => d.digest);
  } finally {
    await pool.close();
  }
}

/** The sha256 (hex) of a small file as the disk holds it. */
export async function readBackSha256(file: string): Promise<string> {
  const fh = await openDirect(file);
  try {
    const size = (await fh.handle.stat()).size;
    const h = createHash('sha256');
    const buf = alignedSharedBuffer(DIGEST_CHUNK);
    for (let at = 0; at < size; at += DIGEST_CHUNK) {
      const n = Math.min(DIGEST_CHUNK, size - at);
      await fh.readFully(buf, n, at, file);
      h.update(buf.subarray(0, n));
    }
    return h.digest('hex');
  } finally {
    await fh.handle.close();
  }
}

/** Checks a small file written just before against the bytes meant (read back from the disk). */
export async function readBackFile(file: string, name: string, meant: string | Uint8Array, device?: string): Promise<void> {
  const want = createHash('sha256').update(meant).digest('hex');
  const got = await readBackSha256(file);
  if (got !== want) throw new ReadBackMismatch(`${name} read back from ${device ?? 'the disk'} differs from what was written: sha256 ${got}, expected ${want}`, name, undefined);
}

interface DirectFile {
  handle: FileHandle;
  readFully(buf: Buffer, length: number, position: number, file: string): Promise<void>;
}

/**
 * Opens for direct reads. A filesystem without O_DIRECT (tmpfs) has no disk under it to bypass:
 * the page cache is the file there. Direct reads want aligned lengths: the last piece is read
 * rounded up and the file's end returns the short count.
 */
async function openDirect(file: string): Promise<DirectFile> {
  const handle = await open(file, constants.O_RDONLY | constants.O_DIRECT).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'EINVAL') throw err;
    return open(file, 'r');
  });
  return {
    handle,
    async readFully(buf, length, position, name) {
      let done = 0;
      while (done < length) {
        const want = Math.ceil((length - done) / DIRECT_IO_ALIGN) * DIRECT_IO_ALIGN;
        const { bytesRead } = await handle.read(buf, done, Math.min(want, buf.length - done), position + done);
        if (bytesRead === 0) throw new ReadBackMismatch(`${name} ended at byte ${position + done} while being read back`, name, position + done);
        done += bytesRead;
      }
    },
  };
}

/** " (byte N of /dev/X)" for a file offset FIEMAP maps, else "". */
async function physicalNote(file: string, offset: number, device: string | undefined): Promise<string> {
  const r = await run('filefrag', ['-v', file], { allowFailure: true, timeoutMs: 60_000 }).catch(() => undefined);
  const physical = r ? physicalOffset(r.stdout, offset) : undefined;
  return physical === undefined ? '' : `, byte ${physical} of ${device ?? 'its partition'}`;
}

/** The partition byte holding a file's byte `offset`, from `filefrag -v` output; undefined for a hole. */
export function physicalOffset(filefrag: string, offset: number): number | undefined {
  const unit = Number(/blocks? of (\d+) bytes/.exec(filefrag)?.[1]);
  if (!Number.isInteger(unit) || unit <= 0) return undefined;
  for (const line of filefrag.split('\n')) {
    const m = /^\s*\d+:\s+(\d+)\.\.\s*(\d+):\s+(\d+)\.\.\s*(\d+):/.exec(line);
    if (!m) continue;
    const [first, last, phys] = [Number(m[1]), Number(m[2]), Number(m[3])];
    const block = Math.floor(offset / unit);
    if (block >= first && block <= last) return (phys + block - first) * unit + (offset % unit);
  }
  return undefined;
}
