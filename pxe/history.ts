/**
 * hvpxe's machine history, kept across restarts in <state dir>/machines.json: who fetched what, how
 * far their install got and, above all, which machines reported a finished install, so a restarted
 * hvpxe does not send a finished node back into the installer (harvester/harvester#1869, #3459,
 * #4627, harvester/seeder#26). Its shape and the decisions on reading it back: history-document.ts.
 *
 * The history cannot silently stop or lose data:
 * - every write is atomic and durable (lib/atomic-write.ts), one at a time, later requests sharing
 *   the next write; a failed write is logged, counted, retried with a growing delay (1 s up to 30 s)
 *   and reported by health() until one succeeds, and never stops a later write;
 *   saveNow() is for what must be on disk before hvpxe answers (a config handed out);
 * - flush() (SIGTERM) tries for a bounded time and returns, whatever happened before;
 * - a file that cannot be read (EACCES, EIO) refuses start and reload: treating it as empty would
 *   reinstall every finished machine; a file that reads but is not a history is set aside as
 *   machines.json.corrupt-<time> and the history starts again marked `lost`, which holds every
 *   machine on local boot until an operator re-arms it (history-document.ts).
 *
 * Re-arming is a file too (<state dir>/rearm/<machine>, written by `hvpxe rearm`): whoever may write
 * the state directory may re-arm, and nothing on the PXE network can (no HTTP route re-arms, since a
 * re-armed machine is wiped on its next network boot).
 */
import { mkdir, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../lib/atomic-write.js';
import { ExitCode, HvError } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { MACHINE_NAME_RE } from './profiles.js';
import { parseHistory, serialiseHistory, type LostHistory, type MachineActivity } from './history-document.js';

export const HISTORY_FILE = 'machines.json';
export const REARM_DIR = 'rearm';

export const HISTORY_RETRY = { firstMs: 1_000, maxMs: 30_000, flushMs: 5_000 } as const;

export interface LoadedHistory {
  machines: MachineActivity[];
  /** Set when an earlier history could not be read back: it was set aside, machines are held. */
  lost?: LostHistory;
}

export interface HistoryHealth {
  /** The last write succeeded (or none failed yet). */
  writable: boolean;
  /** Failed writes since start. */
  failures: number;
  failingSince?: string;
  lastError?: string;
}

/** Why a history file cannot be used: exit 2 with the path and what to do. */
function unreadable(file: string, err: NodeJS.ErrnoException): HvError {
  return new HvError(`cannot read the machine history ${file}: ${err.code ?? err.message}`, {
    where: file,
    hint: 'hvpxe needs it to know which machines finished installing (without it, it would reinstall them): fix its ownership or permissions (it must be readable by the user hvpxe runs as), or the disk under it; to give it up, move it away and start hvpxe, which then holds every machine on local boot until `hvpxe rearm`',
    exitCode: ExitCode.usage,
  });
}

export class HistoryStore {
  private snapshot: () => { machines: MachineActivity[]; lost?: LostHistory } = () => ({ machines: [] });
  private tail: Promise<unknown> = Promise.resolve();
  private pending: Promise<boolean> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private streak = 0;
  private closed = false;
  private readonly state: HistoryHealth = { writable: true, failures: 0 };

  constructor(
    readonly dir: string,
    private readonly log: Logger,
    private readonly now: () => Date = () => new Date(),
  ) {}

  get file(): string {
    return path.join(this.dir, HISTORY_FILE);
  }

  health(): HistoryHealth {
    return { ...this.state };
  }

  /** Reads the history: missing is empty, unreadable throws (exit 2), not a history is set aside and marked lost. */
  async load(): Promise<LoadedHistory> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { machines: [] };
      throw unreadable(this.file, err as NodeJS.ErrnoException);
    }
    try {
      return parseHistory(text);
    } catch (err) {
      return this.setAside((err as Error).message);
    }
  }

  private async setAside(why: string): Promise<LoadedHistory> {
    const at = this.now().toISOString();
    const keptAs = `${this.file}.corrupt-${at.replace(/[:.]/g, '-')}`;
    try {
      await rename(this.file, keptAs);
    } catch (err) {
      throw unreadable(this.file, err as NodeJS.ErrnoException);
    }
    this.log.error('machine history unreadable: set aside; every machine boots its disk until re-armed', { file: this.file, keptAs, error: why });
    return { machines: [], lost: { at, keptAs, why } };
  }

  /** Throws (exit 2) when the history file exists but cannot be read: a reload is refused then. */
  async checkReadable(): Promise<void> {
    try {
      await readFile(this.file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw unreadable(this.file, err as NodeJS.ErrnoException);
    }
  }

  /** What every write saves: the server's current activity. */
  track(snapshot: () => { machines: MachineActivity[]; lost?: LostHistory }): void {
    this.snapshot = snapshot;
  }

  /** Saves soon (coalesced); while writes fail, the retry already scheduled saves the newest activity. */
  save(): void {
    if (this.retryTimer) return;
    void this.request();
  }

  /** Saves now and resolves once it is on disk; throws when the write failed (it is retried anyway). */
  async saveNow(): Promise<void> {
    if (!(await this.request())) throw new Error(`cannot write ${this.file}: ${this.state.lastError}`);
  }

  /** The next write: a new one after the one in flight, or the one already waiting (which snapshots when it starts). */
  private request(): Promise<boolean> {
    if (this.pending) return this.pending;
    const next = this.tail.then(() => {
      this.pending = undefined;
      return this.writeOnce();
    });
    this.pending = next;
    this.tail = next;
    return next;
  }

  private async writeOnce(): Promise<boolean> {
    try {
      const { machines, lost } = this.snapshot();
      await writeFileAtomic(this.file, serialiseHistory(machines, lost, this.now()), { mode: 0o600 });
    } catch (err) {
      this.failed((err as Error).message);
      return false;
    }
    this.recovered();
    return true;
  }

  private failed(error: string): void {
    this.state.failures++;
    this.streak++;
    this.state.lastError = error;
    if (this.state.writable) {
      this.state.writable = false;
      this.state.failingSince = this.now().toISOString();
    }
    // The first failure, then every second one: once the retries are 30 s apart, a line a minute.
    if (this.streak === 1 || this.streak % 2 === 0) this.log.error('cannot save the machine history; retrying', { file: this.file, error, failures: this.streak });
    if (this.closed || this.retryTimer) return;
    const delay = Math.min(HISTORY_RETRY.maxMs, HISTORY_RETRY.firstMs * 2 ** Math.min(this.streak - 1, 10));
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.request();
    }, delay);
    this.retryTimer.unref();
  }

  private recovered(): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    if (!this.state.writable) this.log.info('machine history saved again', { file: this.file, failedWrites: this.streak, failingSince: this.state.failingSince });
    this.streak = 0;
    this.state.writable = true;
    this.state.failingSince = undefined;
    this.state.lastError = undefined;
  }

  /**
   * Writes the current activity before a stop, trying for at most `withinMs` (a write that hangs
   * does not hold the stop); true when it is on disk.
   */
  async flush(withinMs: number = HISTORY_RETRY.flushMs): Promise<boolean> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const deadline = Date.now() + withinMs;
    while (Date.now() < deadline) {
      let timer: NodeJS.Timeout | undefined;
      const ok = await Promise.race([this.request(), new Promise<false>((r) => (timer = setTimeout(() => r(false), Math.max(0, deadline - Date.now()))))]);
      clearTimeout(timer);
      if (ok) return true;
      await new Promise((r) => setTimeout(r, Math.min(250, Math.max(0, deadline - Date.now()))));
    }
    this.log.error('machine history not saved before stopping', { file: this.file, error: this.state.lastError });
    return false;
  }

  /** Machine names with a re-arm request waiting, and when each was requested. */
  async rearmRequests(): Promise<Map<string, Date>> {
    const dir = path.join(this.dir, REARM_DIR);
    const out = new Map<string, Date>();
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      if (!MACHINE_NAME_RE.test(name)) continue;
      const st = await stat(path.join(dir, name)).catch(() => undefined);
      if (st?.isFile()) out.set(name, st.mtime);
    }
    return out;
  }

  async clearRearm(name: string): Promise<void> {
    await rm(path.join(this.dir, REARM_DIR, name), { force: true });
  }
}

/** `hvpxe rearm MACHINE`: leaves the request for the running (or next) hvpxe. */
export async function requestRearm(stateDir: string, name: string): Promise<string> {
  if (!MACHINE_NAME_RE.test(name)) throw new Error(`'${name}' is not a machine name (lowercase letters, digits, - and .)`);
  const file = path.join(stateDir, REARM_DIR, name);
  await writeFileAtomic(file, `${new Date().toISOString()}\n`, { mode: 0o600 });
  return file;
}
