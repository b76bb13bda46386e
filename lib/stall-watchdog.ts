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
