/**
 * The status document (/run/hvagent/status.json): one record per guard, rewritten atomically after
 * every change so `hvagent status` (another process) always reads a whole document.
 */
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../lib/atomic-write.js';
import { HvError, ExitCode } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import type { Redactor } from '../lib/redact.js';
import type { GuardName, GuardStatus, StatusDocument } from './guard.js';
import { formatAgentMetrics } from './metrics.js';
import { STATUS_PATH } from './settings.js';

/** Where the agent's status document is, under a node root. */
export function statusFile(rootDir: string): string {
  return path.join(rootDir, STATUS_PATH);
}

export class StatusStore {
  private readonly doc: StatusDocument;
  private writing: Promise<void> | undefined;
  private dirty = false;
  private readonly lastSuccess = new Map<string, number>();

  constructor(
    private readonly file: string,
    names: GuardName[],
    mode: 'run' | 'once',
    private readonly redactor: Redactor,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
    /** node_exporter textfile (agent/metrics.ts), rewritten with the document; none when undefined. */
    private readonly metricsFile?: string,
  ) {
    const ts = new Date(this.now()).toISOString();
    this.doc = {
      version: 1,
      pid: process.pid,
      startedAt: ts,
      updatedAt: ts,
      mode,
      state: 'running',
      guards: names.map((name) => ({ name, phase: 'pending', attempts: 0, updatedAt: ts })),
    };
  }

  get(name: GuardName): GuardStatus {
    const g = this.doc.guards.find((x) => x.name === name);
    if (!g) throw new Error(`no status record for guard ${name}`);
    return g;
  }

  snapshot(): StatusDocument {
    return structuredClone(this.doc);
  }

  /** Applies a change to one guard's record (undefined values delete the field) and persists. */
  update(name: GuardName, change: Partial<Omit<GuardStatus, 'name' | 'updatedAt'>>): void {
    const g = this.get(name) as unknown as Record<string, unknown>;
    for (const [k, v] of Object.entries(change)) {
      if (v === undefined) delete g[k];
      else g[k] = v;
    }
    const ts = new Date(this.now()).toISOString();
    if (change.phase === 'succeeded') this.lastSuccess.set(name, this.now());
    g.updatedAt = ts;
    this.doc.updatedAt = ts;
    this.schedule();
  }

  setBootstrap(b: { by: 'rancherd' | 'hvagent'; why: string }): void {
    this.doc.bootstrap = { ...b };
    this.schedule();
  }

  setReady(status: string): void {
    this.doc.ready = { at: new Date(this.now()).toISOString(), status };
    this.schedule();
  }

  setState(state: 'running' | 'finished' | 'stopped'): void {
    const ts = new Date(this.now()).toISOString();
    this.doc.state = state;
    this.doc.updatedAt = ts;
    if (state === 'stopped') this.doc.stoppedAt = ts;
    this.schedule();
  }

  /** Resolves once everything changed so far is on disk (or its write failed and was logged). */
  async flush(): Promise<void> {
    this.schedule();
    while (this.writing) await this.writing;
  }

  /**
   * Coalesces bursts: one write in flight, at most one more queued with the latest state. A write
   * that fails, however it fails (serialising included), is logged and never stops the next one:
   * `writing` is cleared whatever happened, so a later change is written again.
   */
  private schedule(): void {
    this.dirty = true;
    if (this.writing) return;
    this.writing = this.writeWhileDirty().finally(() => {
      this.writing = undefined;
      // A change made between the last write and now is written too.
      if (this.dirty) this.schedule();
    });
  }

  private async writeWhileDirty(): Promise<void> {
    while (this.dirty) {
      this.dirty = false;
      try {
        const text = JSON.stringify(this.redactor.redact(this.doc), null, 2) + '\n';
        await writeFileAtomic(this.file, text, { mode: 0o644 });
      } catch (err) {
        this.log.warn('cannot write the status document', { file: this.file, error: (err as Error).message });
      }
      if (this.metricsFile) {
        try {
          await mkdir(path.dirname(this.metricsFile), { recursive: true });
          await writeFileAtomic(this.metricsFile, formatAgentMetrics(this.doc, this.lastSuccess), { mode: 0o644 });
        } catch (err) {
          this.log.warn('cannot write the metrics textfile', { file: this.metricsFile, error: (err as Error).message });
        }
      }
    }
  }
}

export async function readStatus(file: string): Promise<StatusDocument> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new HvError(`no status document at ${file}`, {
        hint: 'hvagent has not run on this node yet (start it: systemctl start hvagent, or hvagent run)',
        // Nothing to read is not a failed guard (1): `hvagent status --help` says 2.
        exitCode: ExitCode.usage,
      });
    }
    throw new HvError(`cannot read ${file}: ${(err as Error).message}`, { exitCode: ExitCode.usage });
  }
  try {
    const doc = JSON.parse(text) as StatusDocument;
    if (doc.version !== 1 || !Array.isArray(doc.guards)) throw new Error('not a version 1 status document');
    return doc;
  } catch (err) {
    throw new HvError(`${file} is not a valid status document: ${(err as Error).message}`, { exitCode: ExitCode.usage });
  }
}

/** True when the process that wrote a document still exists. */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function shortTime(iso: string | undefined, now: number): string {
  if (!iso) return '-';
  const t = Date.parse(iso);
  const d = Math.round((t - now) / 1000);
  const rel = d >= 0 ? `in ${d}s` : `${-d}s ago`;
  return `${iso.slice(11, 19)} (${rel})`;
}

/** The human table of `hvagent status`. Pure. */
export function formatStatusTable(doc: StatusDocument, opts: { now: number; alive: boolean }): string {
  const state = doc.state === 'running' && !opts.alive ? `not running (pid ${doc.pid} is gone)` : `${doc.state ?? 'running'} (pid ${doc.pid})`;
  const head = [
    `hvagent ${doc.mode ?? 'run'}: ${state}, started ${doc.startedAt}, updated ${doc.updatedAt}`,
    ...(doc.bootstrap ? [`bootstrap: ${doc.bootstrap.by === 'rancherd' ? 'rancherd (hvagent prepares the node, then watches rke2, vip and promotion)' : 'hvagent (drives RKE2 itself)'}: ${doc.bootstrap.why}`] : []),
    ...(doc.ready ? [`ready for the bootstrap since ${doc.ready.at}: ${doc.ready.status}`] : []),
    '',
  ];
  const rows: string[][] = [['GUARD', 'PHASE', 'ATTEMPTS', 'NEXT RETRY', 'STARTED', 'FINISHED', 'DETAIL / LAST ERROR']];
  for (const g of doc.guards) {
    const text = g.phase === 'failed' || g.phase === 'waiting' ? g.lastError ?? g.detail ?? '' : g.detail ?? g.lastError ?? '';
    rows.push([
      g.name,
      g.phase,
      String(g.attempts),
      g.nextRetryAt ? shortTime(g.nextRetryAt, opts.now) : '-',
      g.startedAt ? g.startedAt.slice(11, 19) : '-',
      g.finishedAt ? g.finishedAt.slice(11, 19) : '-',
      text.replace(/\s*\n\s*/g, ' | '),
    ]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const lines = rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd());
  const hints = doc.guards.filter((g) => g.hint && g.phase === 'failed').map((g) => `hint (${g.name}): ${g.hint}`);
  return [...head, ...lines, ...(hints.length ? ['', ...hints] : [])].join('\n') + '\n';
}
