/**
 * Install progress as an event stream, and its three renderings: JSON lines (`--progress json`, for
 * the console, PXE logs and the e2e harness), one updating line on a TTY, and plain lines every few
 * seconds for a serial console. Every event carries the elapsed time; byte progress carries a rate.
 */
import type { StepName } from '../disk/types.js';
import { formatBytes } from '../../config/disk-sizes.js';
import type { Redactor } from '../../lib/redact.js';
import { ExitCode, HvError } from '../../lib/errors.js';

export type InstallEvent =
  | { type: 'install'; phase: 'started' | 'resumed' | 'succeeded' | 'failed'; device: string; message?: string }
  | { type: 'step'; phase: 'started' | 'done' | 'skipped' | 'failed'; step: StepName; index: number; total: number; message?: string }
  | { type: 'bytes'; step: StepName; done: number; total: number; rateBytesPerSec: number }
  | { type: 'message'; level: 'info' | 'warn' | 'error'; message: string; step?: StepName }
  /** The hardware gate's verdict (installer/preflight/judge.ts): what was checked, each check that did not pass, the decision, what would override it. */
  | { type: 'gate'; decision: 'passed' | 'acknowledged' | 'overridden' | 'unchecked' | 'refused'; checked: string; lines: string[] };

export type StampedEvent = InstallEvent & { ts: string; elapsedMs: number };

export const PROGRESS_MODES = ['tty', 'plain', 'json'] as const;
export type ProgressMode = (typeof PROGRESS_MODES)[number];

/** `--progress`: the mode given, else `tty` on a terminal and `plain` otherwise; anything else is a usage error. */
export function progressModeOf(given: string | undefined, isTTY: boolean): ProgressMode {
  const mode = given ?? (isTTY ? 'tty' : 'plain');
  if (!(PROGRESS_MODES as readonly string[]).includes(mode)) throw new HvError(`--progress ${given}: use ${PROGRESS_MODES.join(', ')}`, { exitCode: ExitCode.usage });
  return mode as ProgressMode;
}

export interface EventSink {
  emit(e: InstallEvent): void;
  close(): void;
}

/** One rendering of the stream. */
export interface Sink {
  event(e: StampedEvent): void;
  close?(): void;
}

export interface Writer {
  write(s: string): unknown;
}

const HISTORY_MAX = 1000;

/** Stamps events with time and elapsed, redacts them, and fans them out. */
export class EventBus implements EventSink {
  private readonly start: number;
  /** Events other than byte progress, so a sink added later (the install log, hvpxe's) still gets what came before it. */
  private readonly history: StampedEvent[] = [];
  private lastBytes?: { step: StepName; startAt: number; emittedAt: number; done: number };
  constructor(
    private readonly sinks: Sink[],
    private readonly redactor?: Redactor,
    private readonly now: () => number = Date.now,
  ) {
    this.start = now();
  }

  addSink(s: Sink): void {
    for (const e of this.history) s.event(e);
    this.sinks.push(s);
  }

  emit(e: InstallEvent): void {
    const t = this.now();
    const stamped = { ...e, ts: new Date(t).toISOString(), elapsedMs: t - this.start } as StampedEvent;
    const out = this.redactor ? this.redactor.redact(stamped) : stamped;
    if (out.type !== 'bytes' && this.history.length < HISTORY_MAX) this.history.push(out);
    for (const s of this.sinks) s.event(out);
  }

  /** Byte progress: rate averaged since the step's first byte event; unchanged or too-frequent updates are dropped. */
  bytes(step: StepName, done: number, total: number): void {
    const t = this.now();
    const last = this.lastBytes;
    if (!last || last.step !== step) {
      this.lastBytes = { step, startAt: t, emittedAt: t, done };
      this.emit({ type: 'bytes', step, done, total, rateBytesPerSec: 0 });
      return;
    }
    if (done === last.done) return;
    if (t - last.emittedAt < 200 && done < total) return;
    last.emittedAt = t;
    last.done = done;
    const rate = t > last.startAt ? (done * 1000) / (t - last.startAt) : 0;
    this.emit({ type: 'bytes', step, done, total, rateBytesPerSec: Math.round(rate) });
  }

  close(): void {
    for (const s of this.sinks) s.close?.();
  }
}

export function formatElapsed(ms: number): string {
  const s = Math.floor(ms / 1000);
  const m = Math.floor(s / 60);
  return `${String(m).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
}

export function describeEvent(e: StampedEvent): string | undefined {
  const t = `[${formatElapsed(e.elapsedMs)}]`;
  switch (e.type) {
    case 'install':
      return `${t} install ${e.phase} on ${e.device}${e.message ? `: ${e.message}` : ''}`;
    case 'step':
      return `${t} [${e.index}/${e.total}] ${e.step} ${e.phase}${e.message ? `: ${e.message}` : ''}`;
    case 'bytes': {
      const pct = e.total ? Math.floor((e.done * 100) / e.total) : 0;
      return `${t} ${e.step} ${formatBytes(e.done)} / ${formatBytes(e.total)} (${pct}%) ${formatBytes(e.rateBytesPerSec)}/s`;
    }
    case 'message':
      return e.message ? `${t} ${e.level === 'info' ? '' : `${e.level}: `}${e.message}` : undefined;
    case 'gate':
      return [`${t} hardware gate (${e.checked}): ${e.decision}`, ...e.lines.map((l) => `  ${l}`)].join('\n');
  }
}

export function jsonSink(out: Writer): Sink {
  return { event: (e) => void out.write(JSON.stringify(e) + '\n') };
}

/**
 * Lines for a serial console: every step event; byte progress at most every `intervalMs`, except a
 * step's first line and the first that reaches its total (once per step: a total that keeps growing
 * with the count, as a copy whose size is learned on the way reports it, is not a new finish each time).
 */
export function plainSink(out: Writer, intervalMs = 5000): Sink {
  let lastBytesAt = -Infinity;
  let step: string | undefined;
  let finished = false;
  return {
    event: (e) => {
    if (e.type === 'bytes') {
      const first = e.step !== step;
      const finishing = e.done >= e.total && !(finished && !first);
      if (!first && !finishing && e.elapsedMs - lastBytesAt < intervalMs) return;
      if (first) finished = false;
      step = e.step;
      finished ||= e.done >= e.total;
      lastBytesAt = e.elapsedMs;
    }
    const line = describeEvent(e);
    if (line) out.write(line + '\n');
    },
  };
}

/** One line rewritten in place on a TTY; finished steps and messages scroll above it. */
export function ttySink(out: Writer): Sink {
  let live = false;
  return {
    close: () => {
      if (live) out.write('\n');
      live = false;
    },
    event: (e) => {
    const line = describeEvent(e);
    if (!line) return;
    if (e.type === 'bytes' || (e.type === 'step' && e.phase === 'started')) {
      out.write(`\r\x1b[K${line}`);
      live = true;
    } else {
      out.write(`${live ? '\r\x1b[K' : ''}${line}\n`);
      live = false;
    }
    },
  };
}

export function sinkFor(mode: ProgressMode, out: Writer): Sink {
  return mode === 'json' ? jsonSink(out) : mode === 'tty' ? ttySink(out) : plainSink(out);
}
