import { open } from 'node:fs/promises';
import { sharedBuffer, WorkerSha256 } from './hash-worker.js';
import { beforeStall, closeAfterStuck, StallError, StallWatchdog } from '../../lib/stall-watchdog.js';

const CHUNK = 4 * 1024 * 1024;
const SLOTS = 4;

export interface Sha256FileOptions {
  signal?: AbortSignal;
  onBytes?: (n: number) => void;
  stallTimeoutMs?: number;
  /** A worker to hash on, kept open for the next file (one per file otherwise, closed after it). */
  hasher?: WorkerSha256;
}

/**
 * sha256 of a whole file, streamed: the main thread reads ahead while a worker hashes, so several
 * files checked at once use several cores. onBytes gets each chunk's length. With stallTimeoutMs,
 * a read that returns nothing for that long rejects with StallError (a boot medium that hangs).
 */
export async function sha256File(file: string, opts: Sha256FileOptions = {}): Promise<string> {
  const fh = await open(file, 'r');
  const hasher = opts.hasher ?? new WorkerSha256();
  const wd = opts.stallTimeoutMs ? new StallWatchdog(opts.stallTimeoutMs) : undefined;
  let stalled = false;
  let reading: Promise<unknown> = Promise.resolve();
  const read = (buf: Uint8Array, pos: number) => {
    const r = fh.read(buf, 0, CHUNK, pos);
    reading = r;
    if (!wd) return r;
    wd.observe(pos);
    return beforeStall(r, wd, (idle) => `no byte read from ${file} for ${Math.round(idle / 1000)} s at byte ${pos}`).catch((err: unknown) => {
      stalled = err instanceof StallError;
      throw err;
    });
  };
  try {
    const slots = Array.from({ length: SLOTS }, () => sharedBuffer(CHUNK));
    const inFlight: Array<Promise<void> | undefined> = new Array(SLOTS).fill(undefined);
    let pos = 0;
    for (let i = 0; ; i = (i + 1) % SLOTS) {
      opts.signal?.throwIfAborted();
      await inFlight[i];
      const { bytesRead } = await read(slots[i], pos);
      if (bytesRead === 0) break;
      pos += bytesRead;
      inFlight[i] = settleLater(hasher.update(slots[i].subarray(0, bytesRead)));
      opts.onBytes?.(bytesRead);
    }
    await Promise.all(inFlight);
    return await hasher.digest();
  } catch (err) {
    hasher.reset(); // a borrowed worker must not carry this file's bytes into the next
    throw err;
  } finally {
    // A stuck read keeps its handle until it returns: closing would wait for it.
    if (stalled) closeAfterStuck(reading, fh);
    else await fh.close();
    if (!opts.hasher) await hasher.close();
  }
}

/** Marks a promise as handled now (it is awaited later), so an early rejection does not crash the process. */
export function settleLater<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}
