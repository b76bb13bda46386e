/**
 * The install's record on the host (--state-dir): the journal, which makes a re-run resume, and the
 * log. Checked before anything is done (space, writable); once the install has begun, a failure to
 * write it is a warning, never the install's failure: the disk is what the operator installs, its
 * record goes to COS_OEM (/oem/install) at the end whatever the host's filesystem does, and a disk
 * whose install succeeded is never invalidated because the host ran out of space.
 */
import { mkdir, rm, statfs, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode, describeError } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import type { StepName } from '../disk/types.js';
import { JournalWriter, type Journal, type JournalStep } from './journal.js';
import type { InstallLog } from './install-log.js';
import type { EventBus } from './progress.js';

/** What the journal and log of one install need on the host, with room to spare. */
export const STATE_DIR_MIN_FREE_BYTES = 16 * 1024 * 1024;
const PROBE_BYTES = 1024 * 1024;

/** Why the state dir cannot hold the install's record, or undefined when it can. */
export async function checkStateDir(dir: string): Promise<HvError | undefined> {
  const probe = path.join(dir, `.hvinstall-probe-${process.pid}`);
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await writeFile(probe, Buffer.alloc(PROBE_BYTES), { flush: true });
    const fs = await statfs(dir);
    const free = fs.bavail * fs.bsize;
    if (free < STATE_DIR_MIN_FREE_BYTES) throw new Error(`only ${Math.floor(free / 1024)} KiB free, ${STATE_DIR_MIN_FREE_BYTES / 1048576} MiB needed`);
    return undefined;
  } catch (err) {
    return new HvError(`cannot write the install's journal and log in ${dir}: ${describeError(err)}`, {
      where: dir,
      hint: 'free space on (or make writable) that filesystem, or pass --state-dir with another directory; nothing was changed on any disk',
      exitCode: ExitCode.usage,
    });
  } finally {
    await rm(probe, { force: true }).catch(() => undefined);
  }
}

export class HostRecord {
  private readonly writer: JournalWriter;
  /** The first failure to write the host's journal or log; the install goes on without them. */
  problem?: string;

  constructor(
    file: string,
    journal: Journal,
    private readonly installLog: InstallLog,
    private readonly bus: EventBus,
    private readonly log: Logger,
  ) {
    this.writer = new JournalWriter(file, journal);
  }

  get journal(): Journal {
    return this.writer.journal;
  }

  step(name: StepName): JournalStep {
    return this.writer.step(name);
  }

  /** The journal as the finish step records it on COS_OEM: succeeded, finish done. */
  final(): Journal {
    const j = this.writer.journal;
    return { ...j, status: 'succeeded', steps: j.steps.map((s) => (s.name === 'finish' ? { ...s, status: 'done' } : s)) };
  }

  /** Writes the journal; a failure (or the log's) is reported once and the install goes on. */
  async save(): Promise<void> {
    await this.writer.save().catch((err: unknown) => this.lost(`cannot write the journal ${this.writer.file}: ${describeError(err)}`));
    if (this.installLog.failure) this.lost(this.installLog.failure.message);
  }

  /** Writes the journal and fails with the first problem (before any disk is touched). */
  async saveOrThrow(): Promise<void> {
    await this.writer.save();
    this.installLog.throwIfFailed();
  }

  private lost(problem: string): void {
    if (this.problem) return;
    this.problem = problem;
    const message = `${problem}; the install goes on and keeps its record on the disk (COS_OEM /install/journal.json and install.log); the host's journal is behind, so a re-run may redo steps`;
    this.log.warn('host record not written', { problem });
    this.bus.emit({ type: 'message', level: 'warn', message });
  }
}
