/**
 * Bounded waiting. Nothing in this codebase waits forever: every wait has a deadline and, when it
 * expires, a diagnosis of what was still missing.
 */
export class DeadlineError extends Error {
  constructor(readonly what: string, readonly diagnosis: string, readonly waitedMs: number) {
    super(`${what}: gave up after ${Math.round(waitedMs / 1000)} s: ${diagnosis}`);
    this.name = 'DeadlineError';
  }
}

export interface WaitOptions {
  /** What is being waited for, for the error message. */
  what: string;
  timeoutMs: number;
  intervalMs?: number;
  /** Multiply the interval by this after each attempt, up to maxIntervalMs. */
  backoff?: number;
  maxIntervalMs?: number;
  signal?: AbortSignal;
  now?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** The result of one probe: done, or not yet with the reason (used as the final diagnosis). */
export type Probe<T> = { done: true; value: T } | { done: false; reason: string };

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason ?? new Error('aborted'));
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal?.reason ?? new Error('aborted'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Polls `probe` until it reports done or the deadline passes; the last reason becomes the diagnosis. */
export async function waitUntil<T>(probe: () => Promise<Probe<T>> | Probe<T>, opts: WaitOptions): Promise<T> {
  const now = opts.now ?? Date.now;
  const doSleep = opts.sleep ?? sleep;
  const start = now();
  let interval = opts.intervalMs ?? 500;
  let reason = 'not checked yet';
  for (;;) {
    try {
      const r = await probe();
      if (r.done) return r.value;
      reason = r.reason;
    } catch (err) {
      reason = err instanceof Error ? err.message : String(err);
    }
    const elapsed = now() - start;
    if (elapsed >= opts.timeoutMs) throw new DeadlineError(opts.what, reason, elapsed);
    await doSleep(Math.min(interval, Math.max(0, opts.timeoutMs - elapsed)), opts.signal);
    interval = Math.min(interval * (opts.backoff ?? 1), opts.maxIntervalMs ?? interval * (opts.backoff ?? 1));
  }
}

export interface RetryOptions {
  what: string;
  attempts: number;
  delayMs: number;
  backoff?: number;
  maxDelayMs?: number;
  /** Return false for errors not worth retrying (a 404, a checksum mismatch). */
  retryable?: (err: unknown) => boolean;
  onRetry?: (err: unknown, attempt: number, delayMs: number) => void;
  signal?: AbortSignal;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** Retries an action a bounded number of times with backoff; rethrows the last error. */
export async function retry<T>(action: (attempt: number) => Promise<T>, opts: RetryOptions): Promise<T> {
  const doSleep = opts.sleep ?? sleep;
  let delay = opts.delayMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await action(attempt);
    } catch (err) {
      if (attempt >= opts.attempts || (opts.retryable && !opts.retryable(err))) throw err;
      opts.onRetry?.(err, attempt, delay);
      await doSleep(delay, opts.signal);
      delay = Math.min(delay * (opts.backoff ?? 1), opts.maxDelayMs ?? Number.POSITIVE_INFINITY);
    }
  }
}
