import { open, type FileHandle } from 'node:fs/promises';
import { settleLater } from './checksum.js';
import { encodeExt2Label, EXT2_LABEL_LENGTH } from './ext2-label.js';
import { sharedBuffer, WorkerSha256 } from './hash-worker.js';

const CHUNK = 4 * 1024 * 1024;
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
  sourceSha256: string;
  targetSha256: string[];
}

/**
 * Copies one image to several targets in a single read pass: all-zero runs stay holes (as sparse
 * as `fallocate --dig-holes` makes them), each target can be relabelled in the stream, and the
 * sha256 of the source and of every target (as written) is computed on worker threads while the
 * main thread reads and writes. Targets are truncated to the source size, written and fsynced.
 * onBytes reports data bytes written (all targets together).
 */
export async function copySparseAndHash(
  src: string,
  targets: readonly CopyTarget[],
  opts: { signal?: AbortSignal; onBytes?: (n: number) => void } = {},
): Promise<CopyResult> {
  const input = await open(src, 'r');
  const outputs: FileHandle[] = [];
  const hashers = [new WorkerSha256(), ...targets.map(() => new WorkerSha256())];
  try {
    const size = (await input.stat()).size;
    for (const t of targets) {
      const fh = await open(t.path, 'w', 0o644);
      outputs.push(fh);
      await fh.truncate(size);
    }
    const labels = targets.map((t) => (t.relabel ? encodeExt2Label(t.relabel.label) : undefined));
    const slots = Array.from({ length: SLOTS }, () => sharedBuffer(CHUNK));
    const inFlight: Array<Promise<unknown> | undefined> = new Array(SLOTS).fill(undefined);
    let pos = 0;
    for (let i = 0; ; i = (i + 1) % SLOTS) {
      await inFlight[i]; // the slot is free once its hashes and writes are done
      opts.signal?.throwIfAborted();
      const buf = slots[i];
      const { bytesRead: n } = await input.read(buf, 0, CHUNK, pos);
      if (n === 0) break;
      const at = pos;
      pos += n;
      const runs = dataRuns(buf, n);
      const jobs: Array<Promise<unknown>> = [hashers[0].update(buf.subarray(0, n))];
      targets.forEach((t, k) => {
        const out = patchedChunk(buf, n, at, t.relabel?.offsets, labels[k]);
        jobs.push(hashers[k + 1].update(out.subarray(0, n)));
        for (const [s, e] of runs) jobs.push(writeFully(outputs[k], out, s, e - s, at + s));
      });
      const written = runs.reduce((sum, [s, e]) => sum + e - s, 0) * targets.length;
      inFlight[i] = settleLater(Promise.all(jobs).then(() => opts.onBytes?.(written)));
    }
    await Promise.all(inFlight);
    await Promise.all(outputs.map((fh) => fh.sync()));
    const [sourceSha256, ...targetSha256] = await Promise.all(hashers.map((h) => h.digest()));
    return { sourceSha256, targetSha256 };
  } finally {
    await input.close();
    await Promise.all(outputs.map((fh) => fh.close().catch(() => undefined)));
    await Promise.all(hashers.map((h) => h.close()));
  }
}

/** The chunk as the target gets it: the same memory, or a copy with the label fields replaced. */
function patchedChunk(buf: Buffer, n: number, at: number, offsets: readonly number[] | undefined, label: Buffer | undefined): Buffer {
  if (!offsets || !label) return buf;
  const inChunk = offsets.filter((o) => o >= at && o + EXT2_LABEL_LENGTH <= at + n);
  if (inChunk.length === 0) return buf;
  const copy = sharedBuffer(n);
  buf.copy(copy, 0, 0, n);
  for (const o of inChunk) label.copy(copy, o - at);
  return copy;
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

async function writeFully(fh: FileHandle, buf: Buffer, offset: number, length: number, position: number): Promise<void> {
  let done = 0;
  while (done < length) {
    const { bytesWritten } = await fh.write(buf, offset + done, length - done, position + done);
    done += bytesWritten;
  }
}
