/**
 * Stall detection on bytes progressed, not on elapsed time: an import of a 5 GiB archive from slow
 * virtual media may take an hour and is fine as long as bytes keep moving; one that moved nothing
 * for the stall timeout is stuck (harvester#4728: "stalled at rke2-images…tar.zst for a day").
 */
export class StallWatchdog {
  private lastValue = -1;
  private lastChangeAt: number;

  constructor(
    readonly timeoutMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.lastChangeAt = now();
  }

  /** Feed the current progress counter (monotonic: bytes read + bytes delivered). */
  observe(value: number): void {
    if (value !== this.lastValue) {
      this.lastValue = value;
      this.lastChangeAt = this.now();
    }
  }

  /** Restart the clock (a new phase begins, e.g. after a retry). */
  reset(): void {
    this.lastChangeAt = this.now();
  }

  idleMs(): number {
    return this.now() - this.lastChangeAt;
  }

  stalled(): boolean {
    return this.idleMs() >= this.timeoutMs;
  }
}

/**
 * Feeds the watchdog from `sample` (a progress counter read from outside the work: bytes allocated
 * by a file, bytes used on a filesystem) every intervalMs until the returned stop is called. A
 * failed sample counts as no progress. onSample sees each value.
 */
export function sampleProgress(wd: StallWatchdog, sample: () => Promise<number>, intervalMs: number, onSample?: (value: number) => void): () => void {
  const timer = setInterval(() => {
    sample().then((v) => {
      wd.observe(v);
      onSample?.(v);
    }, () => undefined);
  }, intervalMs);
  return () => clearInterval(timer);
}

/**
 * Closes a file handle whose read (or open) was abandoned as stalled, once that stuck operation
 * returns: closing earlier would wait for it, and a handle left to the garbage collector is closed
 * there, where a failed close (a medium that went away: ENOTCONN) is an uncaught exception.
 */
export function closeAfterStuck(stuck: Promise<unknown>, handle: Promise<{ close(): Promise<void> }> | { close(): Promise<void> }): void {
  void stuck
    .catch(() => undefined)
    .then(() => handle)
    .then((h) => h.close())
    .catch(() => undefined);
}

/** No progress for the watchdog's timeout. */
export class StallError extends Error {
  constructor(
    message: string,
    readonly idleMs: number,
  ) {
    super(message);
    this.name = 'StallError';
  }
}

/**
 * Settles with `op`, or rejects with StallError as soon as the watchdog has seen no progress for its
 * timeout. A read stuck in the kernel (a virtual medium over a BMC that stopped answering) cannot be
 * cancelled: its promise is left behind, so the caller fails now with a diagnosis instead of
 * hanging with it. `describe` says what stalled, given the idle time.
 */
export function beforeStall<T>(op: Promise<T>, wd: StallWatchdog, describe: (idleMs: number) => string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const every = Math.max(20, Math.min(1000, Math.floor(wd.timeoutMs / 4)));
    const timer = setInterval(() => {
      if (!wd.stalled()) return;
      clearInterval(timer);
      reject(new StallError(describe(wd.idleMs()), wd.idleMs()));
    }, every);
    op.then(
      (v) => {
        clearInterval(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearInterval(timer);
        reject(err);
      },
    );
  });
}

/**
 * Waits for `op` to settle, at most `ms`; true when it did. For cleanup on a disk that may have
 * stopped answering: an unlink there can hang in the kernel, and the error (or the verdict) it
 * cleans up after must still go out. What is left pending finishes when the disk answers.
 */
export function settleWithin(op: Promise<unknown>, ms: number, opts: { unref?: boolean } = {}): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    // unref: the wait must not hold the process open by itself (a server's log line after a stop).
    if (opts.unref) timer.unref();
    op.then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      () => {
        clearTimeout(timer);
        resolve(true);
      },
    );
  });
}
