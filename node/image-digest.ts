/**
 * The digest state.yaml records for an image (docs/deploy.md "Digests": sha256 over the sha256s of
 * its 4 MiB chunks), computed by a plain sequential read for hvagent, which relabels an image when
 * it commits a fallback. The installer's deploy computes the same value faster (holes skipped,
 * chunks hashed in parallel: installer/deploy/chunk-digest.ts, sparse-copy.ts); operators get it
 * with `split -b 4194304 --filter='sha256sum | cut -c1-64' IMAGE | sha256sum`.
 */
import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';

const CHUNK = 4 * 1024 * 1024;

export async function fileChunkDigest(file: string, signal?: AbortSignal): Promise<string> {
  const fh = await open(file, 'r');
  const outer = createHash('sha256');
  const buf = Buffer.alloc(CHUNK);
  try {
    for (let pos = 0; ; ) {
      signal?.throwIfAborted();
      let filled = 0;
      while (filled < CHUNK) {
        const { bytesRead } = await fh.read(buf, filled, CHUNK - filled, pos + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      if (filled === 0) break;
      outer.update(`${createHash('sha256').update(buf.subarray(0, filled)).digest('hex')}\n`);
      pos += filled;
      if (filled < CHUNK) break;
    }
  } finally {
    await fh.close();
  }
  return `sha256-4m:${outer.digest('hex')}`;
}
