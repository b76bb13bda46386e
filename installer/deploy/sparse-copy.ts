import { constants, open, type FileHandle } from 'node:fs/promises';
import { alignedSharedBuffer, DIRECT_IO_ALIGN } from './aligned-buffer.js';
import { settleLater } from './checksum.js';
import { chunkCount, chunkRange, chunksWithData, combineChunkSha256s, DIGEST_CHUNK, zeroChunkSha256 } from '../../node/image-digest.js';
import { encodeExt2Label, EXT2_LABEL_LENGTH } from './ext2-label.js';
import { readDataExtents } from '../../node/file-extents.js';
import { FlushBehind } from './flush-behind.js';
import { Sha256Pool } from './hash-pool.js';

/** Chunks in flight: reading runs ahead of hashing and writing by this much. */
const SLOTS = 8;
/** Granularity of hole detection: an all-zero run this long is left unwritten (a hole). */
const HOLE_GRAIN = 64 * 1024;
const ZERO = Buffer.alloc(HOLE_GRAIN);

export interface CopyTarget {
  path: string;
  /** Rewrite the label field at these image offsets while copying (see ext2LabelOffsets). */
  relabel?: { label: string; offsets: readonly number[] };
}

export interface CopyResult {
  /** Chunked digest (see node/image-digest.ts) of the source as read. */
  sourceDigest: string;
  /** Chunked digest of each target as written, in the order given. */
  targetDigests: string[];
  /** Each 4 MiB chunk's sha256 (hex) of the source, and of each target: a read-back names the first bad one. */
  sourceChunks: string[];
  targetChunks: string[][];
}

export interface CopyOptions {
  signal?: AbortSignal;
  /** Data bytes written so far (all targets together), reported as each chunk lands. */
  onBytes?: (n: number) => void;
  /** A pool to share with other work; one is made (and closed) otherwise. */
  pool?: Sha256Pool;
}

/**
 * Copies one image to several targets in a single read pass and digests source and targets.
 * Only the chunks FIEMAP shows data in are read (a fresh 3 GiB image is two thirds holes, and
 * reading a hole is not free: the kernel fills page cache with zeros); all-zero runs inside them
 * stay holes too (64 KiB at a time: finer would cost more writes than the blocks it saves). Each target can be relabelled
 * in the stream; a target chunk that is the source's bytes shares its hash, a patched one is hashed
 * on its own. Targets are truncated to the source size, written (flushed behind the writes, so the
 * disk works while the CPU hashes) and fsynced.
 */
export async function copyImage(src: string, targets: readonly CopyTarget[], opts: CopyOptions = {}): Promise<CopyResult> {
  const input = await open(src, 'r');
  const outputs: TargetFile[] = [];
  const flushers: FlushBehind[] = [];
  const pool = opts.pool ?? new Sha256Pool();
  try {
    const size = (await input.stat()).size;
    const n = chunkCount(size);
    const hasData = chunksWithData(await readDataExtents(src, size), size);
    const labels = targets.map((t) => (t.relabel ? encodeExt2Label(t.relabel.label) : undefined));
    for (const t of targets) {
      for (const o of t.relabel?.offsets ?? []) {
        for (const at of [o, o + EXT2_LABEL_LENGTH - 1]) if (at < size) hasData[Math.floor(at / DIGEST_CHUNK)] = true;
      }
      const out = await openTarget(t.path);
      outputs.push(out);
      flushers.push(new FlushBehind(out.fh));
      await out.fh.truncate(size);
    }

    const sourceSums: Array<Promise<string> | string> = new Array(n);
    const targetSums: Array<Array<Promise<string> | string>> = targets.map(() => new Array(n));
    // One aligned arena for the whole copy (WebAssembly memories are few and costly to map): a
    // read buffer per slot, and per slot and target a buffer for a relabelled chunk. A slot's
    // buffers are reused only once its hashes and writes are done.
    const arena = alignedSharedBuffer(DIGEST_CHUNK * SLOTS * (1 + targets.length));
    const region = (k: number): Buffer => arena.subarray(k * DIGEST_CHUNK, (k + 1) * DIGEST_CHUNK);
    const slots = Array.from({ length: SLOTS }, (_, i) => region(i));
    const patchBuffers = Array.from({ length: SLOTS }, (_, i) => targets.map((_t, k) => region(SLOTS + i * targets.length + k)));
    const inFlight: Array<Promise<unknown> | undefined> = new Array(SLOTS).fill(undefined);
    let slot = 0;
    for (let i = 0; i < n; i++) {
      const [at, end] = chunkRange(i, size);
      const len = end - at;
      if (!hasData[i]) {
        sourceSums[i] = zeroChunkSha256(len);
        for (const sums of targetSums) sums[i] = sourceSums[i];
        continue;
      }
      await inFlight[slot]; // the slot is free once its hashes and writes are done
      opts.signal?.throwIfAborted();
      const buf = slots[slot];
      await readFully(input, buf, len, at, src);
      const runs = dataRuns(buf, len);
      const hashed = settleLater(pool.hash(buf.subarray(0, len)));
      sourceSums[i] = hashed;
      const jobs: Array<Promise<unknown>> = [hashed];
      targets.forEach((t, k) => {
        const out = patchedChunk(buf, len, at, t.relabel?.offsets, labels[k], patchBuffers[slot][k]);
        const sum = out === buf ? hashed : settleLater(pool.hash(out.subarray(0, len)));
        targetSums[k][i] = sum;
        jobs.push(sum);
        for (const [s, e] of runs) jobs.push(outputs[k].write(out, s, e - s, at + s).then(() => flushers[k].wrote(e - s)));
      });
      const written = runs.reduce((sum, [s, e]) => sum + e - s, 0) * targets.length;
      inFlight[slot] = settleLater(Promise.all(jobs).then(() => opts.onBytes?.(written)));
      slot = (slot + 1) % SLOTS;
    }
    await Promise.all(inFlight);
    await Promise.all(flushers.map((f) => f.finish()));
    const sourceChunks = await Promise.all(sourceSums);
    const targetChunks = await Promise.all(targetSums.map((sums) => Promise.all(sums)));
    return { sourceDigest: combineChunkSha256s(sourceChunks), targetDigests: targetChunks.map(combineChunkSha256s), sourceChunks, targetChunks };
  } finally {
    await input.close();
    await Promise.all(outputs.map((o) => o.close().catch(() => undefined)));
    if (!opts.pool) await pool.close();
  }
}

/** The chunked digest of an image file (reads only the chunks that hold data). */
export async function imageDigest(file: string, opts: Omit<CopyOptions, 'onBytes'> = {}): Promise<string> {
  return (await copyImage(file, [], opts)).sourceDigest;
}

/** The chunked digest of an image file and its chunks' sha256s. */
export async function imageChunks(file: string, opts: Omit<CopyOptions, 'onBytes'> = {}): Promise<{ digest: string; chunks: string[] }> {
  const r = await copyImage(file, [], opts);
  return { digest: r.sourceDigest, chunks: r.sourceChunks };
}

/** The chunk as the target gets it: the same memory, or a copy (in `spare`) with the label fields replaced. */
function patchedChunk(buf: Buffer, n: number, at: number, offsets: readonly number[] | undefined, label: Buffer | undefined, spare: Buffer): Buffer {
  if (!offsets || !label) return buf;
  const inChunk = offsets.filter((o) => o >= at && o + EXT2_LABEL_LENGTH <= at + n);
  if (inChunk.length === 0) return buf;
  buf.copy(spare, 0, 0, n);
  for (const o of inChunk) label.copy(spare, o - at);
  return spare;
}

/** [start, end) ranges of buf that hold non-zero data, at HOLE_GRAIN granularity, merged. */
export function dataRuns(buf: Buffer, length: number): Array<[number, number]> {
  const runs: Array<[number, number]> = [];
  for (let off = 0; off < length; off += HOLE_GRAIN) {
    const end = Math.min(off + HOLE_GRAIN, length);
    if (buf.subarray(off, end).equals(ZERO.subarray(0, end - off))) continue;
    const last = runs[runs.length - 1];
    if (last && last[1] === off) last[1] = end;
    else runs.push([off, end]);
  }
  return runs;
}

async function readFully(fh: FileHandle, buf: Buffer, length: number, position: number, file: string): Promise<void> {
  let done = 0;
  while (done < length) {
    const { bytesRead } = await fh.read(buf, done, length - done, position + done);
    if (bytesRead === 0) throw new Error(`${file} ended at ${position + done} bytes while being copied (it was ${position + length} or more): something truncated it`);
    done += bytesRead;
  }
}

/**
 * A target opened for direct I/O where the filesystem allows it: the copy's writes then skip the
 * page cache (one memory copy less per byte, and no dirty pages for the kernel to write back
 * later). Pieces that are not aligned (an image size that is not a multiple of 4 KiB) go through
 * a second, buffered descriptor; the kernel keeps the two coherent.
 */
interface TargetFile {
  fh: FileHandle;
  write(buf: Buffer, offset: number, length: number, position: number): Promise<void>;
  close(): Promise<void>;
}

async function openTarget(file: string): Promise<TargetFile> {
  let direct = true;
  const fh = await open(file, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_DIRECT, 0o644).catch(async (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EINVAL') throw err; // a filesystem without O_DIRECT (older tmpfs): write through the cache
    direct = false;
    return open(file, 'w', 0o644);
  });
  let buffered: Promise<FileHandle> | undefined;
  const aligned = (n: number): boolean => n % DIRECT_IO_ALIGN === 0;
  return {
    fh,
    async write(buf, offset, length, position) {
      const via = !direct || (aligned(offset) && aligned(length) && aligned(position)) ? fh : await (buffered ??= open(file, 'r+'));
      await writeFully(via, buf, offset, length, position);
    },
    async close() {
      if (buffered) {
        const b = await buffered;
        await b.sync();
        await b.close();
      }
      await fh.close();
    },
  };
}

async function writeFully(fh: FileHandle, buf: Buffer, offset: number, length: number, position: number): Promise<void> {
  let done = 0;
  while (done < length) {
    const { bytesWritten } = await fh.write(buf, offset + done, length - done, position + done);
    done += bytesWritten;
  }
}
