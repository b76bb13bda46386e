import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';

const CHUNK = 4 * 1024 * 1024;

/** sha256 of a whole file, read in large chunks; onBytes gets each chunk's length. */
export async function sha256File(file: string, opts: { signal?: AbortSignal; onBytes?: (n: number) => void } = {}): Promise<string> {
  const fh = await open(file, 'r');
  try {
    const hash = createHash('sha256');
    // Two buffers: the next read runs while the current chunk is hashed.
    const bufs = [Buffer.allocUnsafe(CHUNK), Buffer.allocUnsafe(CHUNK)];
    let pos = 0;
    let i = 0;
    let pending = fh.read(bufs[0], 0, CHUNK, 0);
    for (;;) {
      const { bytesRead } = await pending;
      if (bytesRead === 0) break;
      opts.signal?.throwIfAborted();
      const buf = bufs[i];
      pos += bytesRead;
      i ^= 1;
      pending = fh.read(bufs[i], 0, CHUNK, pos);
      hash.update(buf.subarray(0, bytesRead));
      opts.onBytes?.(bytesRead);
    }
    return hash.digest('hex');
  } finally {
    await fh.close();
  }
}
