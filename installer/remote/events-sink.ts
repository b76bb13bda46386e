/**
 * A progress sink (installer/steps/progress.ts `Sink`) that forwards install events to hvpxe's
 * /events/<machine> (`hvinstall.events_url`). It never slows the install: events are queued and
 * posted one at a time in the background, byte-progress events are coalesced (only the newest is
 * kept, at most one every `bytesIntervalMs`), the queue is bounded, and close() waits at most
 * `closeTimeoutMs` for the rest.
 */
import { request } from 'undici';
import type { Logger } from '../../lib/logger.js';

/**
 * Posts one progress event as JSON; bounded (5 s), never throws, and secrets are redacted first.
 * Progress reporting must never slow down or fail an install.
 */
export async function postProgressEvent(url: string | undefined, event: Record<string, unknown>, log: Logger, timeoutMs = 5_000): Promise<void> {
  if (!url) return;
  try {
    const body = JSON.stringify(log.redactor.redact({ ts: new Date().toISOString(), ...event }));
    const res = await request(url, { method: 'POST', body, headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(timeoutMs) });
    await res.body.dump().catch(() => undefined);
    if (res.statusCode >= 400) log.debug('progress event refused', { url, status: res.statusCode });
  } catch (err) {
    log.debug('progress event not delivered', { url, error: (err as Error).message });
  }
}

export interface ForwardedEvent {
  type: string;
  [k: string]: unknown;
}

export interface EventsSinkOptions {
  bytesIntervalMs?: number;
  maxQueued?: number;
  closeTimeoutMs?: number;
  postTimeoutMs?: number;
  now?: () => number;
}

export class HvpxeEventsSink {
  private readonly queue: ForwardedEvent[] = [];
  private running: Promise<void> | undefined;
  private lastBytesAt = -Infinity;
  private pendingBytes: ForwardedEvent | undefined;
  dropped = 0;

  constructor(
    private readonly url: string | undefined,
    private readonly log: Logger,
    private readonly opts: EventsSinkOptions = {},
  ) {}

  event(e: ForwardedEvent): void {
    if (!this.url) return;
    const now = (this.opts.now ?? Date.now)();
    if (e.type === 'bytes') {
      // Only the newest byte count matters; send it when the interval has passed (or with the next event).
      this.pendingBytes = e;
      if (now - this.lastBytesAt < (this.opts.bytesIntervalMs ?? 5_000)) return;
      this.lastBytesAt = now;
    }
    if (this.pendingBytes && this.pendingBytes !== e) this.enqueue(this.pendingBytes);
    this.pendingBytes = undefined;
    this.enqueue(e);
  }

  private enqueue(e: ForwardedEvent): void {
    if (this.queue.length >= (this.opts.maxQueued ?? 200)) {
      this.queue.shift();
      this.dropped++;
    }
    this.queue.push(e);
    this.running ??= this.drain();
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      await postProgressEvent(this.url, this.queue.shift()!, this.log, this.opts.postTimeoutMs ?? 5_000);
    }
    this.running = undefined;
  }

  /** Flushes what is queued, bounded by closeTimeoutMs. */
  async close(): Promise<void> {
    if (this.pendingBytes) this.enqueue(this.pendingBytes);
    this.pendingBytes = undefined;
    const running = this.running;
    if (!running) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([running, new Promise<void>((r) => (timer = setTimeout(r, this.opts.closeTimeoutMs ?? 5_000)))]);
    clearTimeout(timer);
  }
}
