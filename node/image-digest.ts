import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import { readDataExtents, type Extent } from './file-extents.js';

/**
 * The image digest recorded in state.yaml (the installer writes it, hvagent and `hvinstall upgrade`
 * check and rewrite it): sha256 over the image's 4 MiB chunks' sha256s.
 *
 *   digest = sha256( hex(sha256(chunk 0)) "\n" hex(sha256(chunk 1)) "\n" ... )
 *
 * where chunk i is bytes [i·4 MiB, (i+1)·4 MiB) of the file (the last one may be shorter). A plain
 * sha256 of an image has to read and hash every byte, holes included (two thirds of a 3 GiB image);
 * this one knows the hash of an all-zero chunk, so holes cost nothing, chunks hash in parallel, and a
 * copy that differs only in its superblocks shares every other chunk's hash. Operators reproduce it
 * with coreutils:
 *
 *   split -b 4194304 --filter='sha256sum | cut -c1-64' IMAGE | sha256sum
 */
export const DIGEST_CHUNK = 4 * 1024 * 1024;
export const DIGEST_PREFIX = 'sha256-4m:';
export const DIGEST_RE = /^sha256-4m:[0-9a-f]{64}$/;

export function chunkCount(size: number): number {
  return Math.ceil(size / DIGEST_CHUNK);
}

/** [start, end) of chunk i in a file of this size. */
export function chunkRange(i: number, size: number): [number, number] {
  return [i * DIGEST_CHUNK, Math.min((i + 1) * DIGEST_CHUNK, size)];
}

/** For each 4 MiB digest chunk of the file: whether any extent touches it (whether it must be read). */
export function chunksWithData(extents: readonly Extent[] | undefined, size: number): boolean[] {
  const n = chunkCount(size);
  if (!extents) return new Array<boolean>(n).fill(true);
  const has = new Array<boolean>(n).fill(false);
  for (const [s, e] of extents) {
    const first = Math.floor(s / DIGEST_CHUNK);
    const last = Math.min(n - 1, Math.floor((e - 1) / DIGEST_CHUNK));
    for (let i = first; i <= last; i++) has[i] = true;
  }
  return has;
}

const zeroDigests = new Map<number, string>();

/** sha256 (hex) of `length` zero bytes: the hash of a chunk that is a hole. */
export function zeroChunkSha256(length: number): string {
  let hex = zeroDigests.get(length);
  if (!hex) {
    hex = createHash('sha256').update(Buffer.alloc(length)).digest('hex');
    zeroDigests.set(length, hex);
  }
  return hex;
}

/** The image digest from its chunks' sha256s, in order. */
export function combineChunkSha256s(chunks: readonly string[]): string {
  const h = createHash('sha256');
  for (const c of chunks) h.update(`${c}\n`);
  return DIGEST_PREFIX + h.digest('hex');
}

/** The same digest computed in memory over a whole buffer (for small files and tests). */
export function chunkedDigestOf(data: Uint8Array): string {
  const sums: string[] = [];
  for (let i = 0; i < chunkCount(data.length); i++) {
    const [s, e] = chunkRange(i, data.length);
    sums.push(createHash('sha256').update(data.subarray(s, e)).digest('hex'));
  }
  return combineChunkSha256s(sums);
}

/** A file's chunked digest and how many of its chunks had to be read (the rest are holes). */
export interface FileChunkDigest {
  digest: string;
  chunks: number;
  chunksRead: number;
}

/**
 * The digest by a sequential read of the chunks that hold data, for hvagent when it relabels an
 * image at a fallback commit: a chunk with no extent (FIEMAP, node/file-extents.ts) hashes as zeros
 * unread, as the installer's read-back does; without FIEMAP (another filesystem, no filefrag) every
 * chunk is read, which is always correct, only slower. Under emulation a 3 GiB image that is two
 * thirds holes took minutes read whole. The installer computes the same value with its chunks
 * hashed in parallel (installer/deploy/sparse-copy.ts, hash-pool.ts).
 */
export async function fileChunkDigest(file: string, signal?: AbortSignal): Promise<FileChunkDigest> {
  const fh = await open(file, 'r');
  const sums: string[] = [];
  const buf = Buffer.alloc(DIGEST_CHUNK);
  let chunksRead = 0;
  try {
    const { size } = await fh.stat();
    const hasData = chunksWithData(await readDataExtents(file, size), size);
    for (let i = 0; i < hasData.length; i++) {
      signal?.throwIfAborted();
      const [start, end] = chunkRange(i, size);
      if (!hasData[i]) {
        sums.push(zeroChunkSha256(end - start));
        continue;
      }
      let filled = 0;
      while (start + filled < end) {
        const { bytesRead } = await fh.read(buf, filled, end - start - filled, start + filled);
        if (bytesRead === 0) throw new Error(`${file}: ended at byte ${start + filled} while its size is ${size}: the file changed while it was read (something writes to it); stop that writer, then digest it again (hvagent commits a fallback again at its next start)`);
        filled += bytesRead;
      }
      sums.push(createHash('sha256').update(buf.subarray(0, filled)).digest('hex'));
      chunksRead++;
    }
  } finally {
    await fh.close();
  }
  return { digest: combineChunkSha256s(sums), chunks: sums.length, chunksRead };
}
