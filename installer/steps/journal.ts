/**
 * The install journal: which steps of which plan completed. Written atomically (temp file, fsync,
 * rename) on every change, so after a crash, kill -9 or power cut it says exactly what finished.
 * A step is marked done only after its writes were synced to disk.
 */
import { readFile } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import type { StepName } from '../disk/types.js';

export type StepStatus = 'pending' | 'running' | 'done' | 'skipped' | 'failed';
export type InstallStatus = 'running' | 'succeeded' | 'failed' | 'invalidated';

export interface JournalStep {
  name: StepName;
  status: StepStatus;
  startedAt?: string;
  endedAt?: string;
  durationMs?: number;
  /** How many runs started this step (more than 1 after a resume that redid it). */
  attempts: number;
  detail?: Record<string, unknown>;
  error?: string;
}

export interface Journal {
  version: 1;
  installId: string;
  planDigest: string;
  device: string;
  status: InstallStatus;
  startedAt: string;
  updatedAt: string;
  /** Runs of this install (1, then +1 per resume). */
  runs: number;
  steps: JournalStep[];
  error?: { step?: StepName; message: string; hint?: string };
  /** What was invalidated after a failure. */
  invalidation?: string[];
  /** What could not be: `could not invalidate /dev/X (LABEL): …; do not boot this disk`. */
  notInvalidated?: string[];
}

export function newJournal(planDigest: string, device: string, steps: StepName[], now = new Date()): Journal {
  return {
    version: 1,
    installId: randomUUID(),
    planDigest,
    device,
    status: 'running',
    startedAt: now.toISOString(),
    updatedAt: now.toISOString(),
    runs: 1,
    steps: steps.map((name) => ({ name, status: 'pending', attempts: 0 })),
  };
}

export async function readJournal(file: string): Promise<Journal | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return undefined;
  }
  try {
    const j = JSON.parse(text) as Journal;
    return j.version === 1 && Array.isArray(j.steps) ? j : undefined;
  } catch {
    return undefined; // a journal is written atomically; garbage here means someone else's file
  }
}

export class JournalWriter {
  constructor(
    readonly file: string,
    readonly journal: Journal,
  ) {}

  step(name: StepName): JournalStep {
    const s = this.journal.steps.find((x) => x.name === name);
    if (!s) throw new Error(`journal has no step ${name}`);
    return s;
  }

  async save(): Promise<void> {
    this.journal.updatedAt = new Date().toISOString();
    await writeFileAtomic(this.file, JSON.stringify(this.journal, null, 2) + '\n', { mode: 0o644 });
  }
}
