import { createHash } from 'node:crypto';
import { open, type FileHandle } from 'node:fs/promises';

const CHUNK = 4 * 1024 * 1024;
/** Granularity of hole detection: an all-zero run this long is left unwritten (a hole). */
const HOLE_GRAIN = 64 * 1024;
const ZERO = Buffer.alloc(HOLE_GRAIN);

/**
 * Copies one image to several destinations in a single read pass, leaving all-zero runs as holes
 * (so the copies are as sparse as `fallocate --dig-holes` would make them), and returns the
 * source's sha256. Destinations are truncated to the source size, written, and fsynced.
 * onBytes reports the bytes actually written per destination pass (data, not holes).
 */
export async function copySparseAndHash(
  src: string,
  dsts: readonly string[],
  opts: { signal?: AbortSignal; onBytes?: (n: number) => void } = {},
): Promise<string> {
  const input = await open(src, 'r');
  const outputs: FileHandle[] = [];
  try {
    const size = (await input.stat()).size;
    for (const d of dsts) {
      const fh = await open(d, 'w', 0o644);
      outputs.push(fh);
      await fh.truncate(size);
    }
    const hash = createHash('sha256');
    const bufs = [Buffer.allocUnsafe(CHUNK), Buffer.allocUnsafe(CHUNK)];
    let i = 0;
    let pos = 0;
    let pendingRead = input.read(bufs[0], 0, CHUNK, 0);
    let pendingWrites: Promise<unknown> = Promise.resolve();
    for (;;) {
      const { bytesRead } = await pendingRead;
      if (bytesRead === 0) break;
      // The other buffer is refilled only once its writes are done.
      await pendingWrites;
      opts.signal?.throwIfAborted();
      const buf = bufs[i];
      const at = pos;
      pos += bytesRead;
      i ^= 1;
      pendingRead = input.read(bufs[i], 0, CHUNK, pos);
      hash.update(buf.subarray(0, bytesRead));
      const runs = dataRuns(buf, bytesRead);
      const written = runs.reduce((n, [s, e]) => n + e - s, 0);
      pendingWrites = Promise.all(
        outputs.flatMap((fh) => runs.map(([s, e]) => writeFully(fh, buf, s, e - s, at + s))),
      ).then(() => opts.onBytes?.(written * outputs.length));
    }
    await pendingWrites;
    await Promise.all(outputs.map((fh) => fh.sync()));
    return hash.digest('hex');
  } finally {
    await input.close();
    await Promise.all(outputs.map((fh) => fh.close().catch(() => undefined)));
  }
}

/** [start, end) ranges of buf that hold non-zero data, at HOLE_GRAIN granularity, merged. */
export function dataRuns(buf: Buffer, length: number): Array<[number, number]> {
  const runs: Array<[number, number]> = [];
  for (let off = 0; off < length; off += HOLE_GRAIN) {
    const end = Math.min(off + HOLE_GRAIN, length);
    const isZero = end - off === HOLE_GRAIN ? buf.subarray(off, end).equals(ZERO) : isAllZero(buf.subarray(off, end));
    if (isZero) continue;
    const last = runs[runs.length - 1];
    if (last && last[1] === off) last[1] = end;
    else runs.push([off, end]);
  }
  return runs;
}

function isAllZero(b: Buffer): boolean {
  return b.equals(ZERO.subarray(0, b.length));
}

async function writeFully(fh: FileHandle, buf: Buffer, offset: number, length: number, position: number): Promise<void> {
  let done = 0;
  while (done < length) {
    const { bytesWritten } = await fh.write(buf, offset + done, length - done, position + done);
    done += bytesWritten;
  }
}
