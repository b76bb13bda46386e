import { open, type FileHandle } from 'node:fs/promises';

/**
 * Writeback that keeps up with the writer. With the kernel's defaults (background writeback from
 * 10% of RAM dirty) a machine with tens of GiB writes nothing of a 3 GiB deploy until the final
 * fsync, so all the disk time comes after all the CPU time. Flushing behind the writer overlaps
 * them. Errors of intermediate flushes are kept and thrown by finish(): with per-descriptor error
 * reporting, a flush that saw an EIO may be the only one that hears of it.
 */
export class FlushBehind {
  private pending = 0;
  private inFlight?: Promise<void>;
  private error?: unknown;

  constructor(
    private readonly fh: FileHandle,
    private readonly everyBytes = 64 * 1024 * 1024,
  ) {}

  /** Counts bytes written; starts a flush once everyBytes have built up and none is running. */
  wrote(bytes: number): void {
    this.pending += bytes;
    if (this.pending < this.everyBytes || this.inFlight) return;
    this.pending = 0;
    this.inFlight = this.fh.datasync().then(
      () => {
        this.inFlight = undefined;
      },
      (err: unknown) => {
        this.error ??= err;
        this.inFlight = undefined;
      },
    );
  }

  /** Waits for any running flush, then fsyncs: everything written is on disk, or this throws. */
  async finish(): Promise<void> {
    await this.inFlight;
    if (this.error) throw this.error;
    await this.fh.sync();
  }
}

/**
 * Flushes a file another process is writing (mke2fs) every intervalMs until `until` settles, on a
 * descriptor of our own. Returns until's result; throws an intermediate flush's error if one
 * failed. Flushing only helps speed: a file that cannot be opened is left to the writer.
 */
export async function flushWhileWriting<T>(file: string, until: Promise<T>, intervalMs = 250): Promise<T> {
  let done = false;
  const settled = until.finally(() => {
    done = true;
  });
  settled.catch(() => undefined); // handled below; not while the file is being opened
  const fh = await open(file, 'r').catch(() => undefined);
  if (!fh) return settled;
  let error: unknown;
  const loop = (async () => {
    while (!done) {
      await Promise.race([new Promise((r) => setTimeout(r, intervalMs)), settled.catch(() => undefined)]);
      if (done) break;
      try {
        await fh.datasync();
      } catch (err) {
        error ??= err;
        break;
      }
    }
  })();
  try {
    const result = await settled;
    await loop;
    if (error) throw error;
    return result;
  } finally {
    await loop;
    await fh.close();
  }
}
