import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';

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

/**
 * The digest by a plain sequential read, for hvagent when it relabels an image at a fallback commit.
 * The installer's deploy computes the same value faster (holes skipped, chunks hashed in parallel:
 * installer/deploy/sparse-copy.ts, hash-pool.ts).
 */
export async function fileChunkDigest(file: string, signal?: AbortSignal): Promise<string> {
  const fh = await open(file, 'r');
  const sums: string[] = [];
  const buf = Buffer.alloc(DIGEST_CHUNK);
  try {
    for (let pos = 0; ; ) {
      signal?.throwIfAborted();
      let filled = 0;
      while (filled < DIGEST_CHUNK) {
        const { bytesRead } = await fh.read(buf, filled, DIGEST_CHUNK - filled, pos + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      if (filled === 0) break;
      sums.push(createHash('sha256').update(buf.subarray(0, filled)).digest('hex'));
      pos += filled;
      if (filled < DIGEST_CHUNK) break;
    }
  } finally {
    await fh.close();
  }
  return combineChunkSha256s(sums);
}
