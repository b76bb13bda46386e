/**
 * hvpxe's machine history, kept across restarts in <state dir>/machines.json: who fetched what, how
 * far their install got and, above all, which machines reported a finished install, so a restarted
 * hvpxe does not send a finished node back into the installer (harvester/harvester#1869, #3459,
 * #4627, harvester/seeder#26). A file that cannot be read back is set aside as
 * machines.json.corrupt-<time> and hvpxe starts with a fresh history and a warning: a broken file
 * must never keep the boot server down, nor be silently overwritten.
 *
 * Re-arming is a file too (<state dir>/rearm/<machine>, written by `hvpxe rearm`): whoever may write
 * the state directory may re-arm, and nothing on the PXE network can (no HTTP route re-arms, since a
 * re-armed machine is wiped on its next network boot).
 */
import { mkdir, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../lib/atomic-write.js';
import type { Logger } from '../lib/logger.js';
import type { Machine } from './profiles.js';

export const HISTORY_FILE = 'machines.json';
export const REARM_DIR = 'rearm';
const NAME_RE = /^[a-z0-9-]{1,100}$/;

export interface MachineActivity extends Pick<Machine, 'name' | 'group' | 'profile' | 'mac' | 'uuid' | 'hostname'> {
  matchedBy?: string;
  lastSeen?: string;
  lastAddress?: string;
  fetched: { ipxe?: string; grub?: string; config?: string; artifacts: Record<string, { at: string; bytes: number; status: number }> };
  progress?: { event: string; at: string; summary?: string };
  events: Array<{ at: string; event: string; data: unknown }>;
  /** The machine reported a finished install: it boots from its disk until re-armed. */
  installed?: { at: string; via: string };
  /** Local-boot scripts served since the install, newest last (a few kept: enough to see a loop). */
  localBoots?: string[];
  rearmedAt?: string;
}

interface HistoryDocument {
  version: 1;
  savedAt: string;
  machines: MachineActivity[];
}

export interface LoadedHistory {
  machines: MachineActivity[];
  /** Set when the file could not be used; says where the bad file went. */
  warning?: string;
}

/** Checks a parsed document; throws with the reason when it is not one hvpxe wrote. Pure. */
export function parseHistory(text: string): MachineActivity[] {
  const doc = JSON.parse(text) as Partial<HistoryDocument>;
  if (!doc || typeof doc !== 'object' || doc.version !== 1 || !Array.isArray(doc.machines)) throw new Error('not a version 1 machine history');
  for (const [i, m] of doc.machines.entries()) {
    if (!m || typeof m !== 'object' || typeof m.name !== 'string' || !NAME_RE.test(m.name) || typeof m.group !== 'string' || typeof m.profile !== 'string') {
      throw new Error(`machines[${i}] has no valid name, group and profile`);
    }
    if (!m.fetched || typeof m.fetched !== 'object' || !Array.isArray(m.events)) throw new Error(`machines[${i}] (${m.name}) has no fetched/events records`);
    if (m.installed !== undefined && (typeof m.installed !== 'object' || typeof m.installed.at !== 'string')) throw new Error(`machines[${i}] (${m.name}): installed must be {at, via}`);
  }
  return doc.machines;
}

export class HistoryStore {
  private writing: Promise<void> | undefined;
  private dirty = false;
  private snapshot: () => MachineActivity[] = () => [];

  constructor(
    readonly dir: string,
    private readonly log: Logger,
  ) {}

  get file(): string {
    return path.join(this.dir, HISTORY_FILE);
  }

  /** Reads the history; a missing file is an empty history, a broken one is moved aside with a warning. */
  async load(now = new Date()): Promise<LoadedHistory> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { machines: [] };
      throw err;
    }
    try {
      return { machines: parseHistory(text) };
    } catch (err) {
      const aside = `${this.file}.corrupt-${now.toISOString().replace(/[:.]/g, '-')}`;
      await rename(this.file, aside);
      const warning = `${this.file} could not be read (${(err as Error).message}): kept as ${aside}; starting with an empty history, so machines that finished installing before are not known as such until they report again`;
      this.log.warn('machine history unreadable', { file: this.file, keptAs: aside, error: (err as Error).message });
      return { machines: [], warning };
    }
  }

  /** What save() writes: the server's current activity. */
  track(snapshot: () => MachineActivity[]): void {
    this.snapshot = snapshot;
  }

  /** Coalesced atomic write of the current activity (one in flight, at most one more queued). */
  save(): void {
    this.dirty = true;
    if (this.writing) return;
    this.writing = (async () => {
      while (this.dirty) {
        this.dirty = false;
        const doc: HistoryDocument = { version: 1, savedAt: new Date().toISOString(), machines: this.snapshot() };
        try {
          await writeFileAtomic(this.file, JSON.stringify(doc, null, 2) + '\n', { mode: 0o600 });
        } catch (err) {
          this.log.error('cannot save the machine history', { file: this.file, error: (err as Error).message });
        }
      }
      this.writing = undefined;
    })();
  }

  async flush(): Promise<void> {
    while (this.writing) await this.writing;
  }

  /** Machine names with a re-arm request waiting, and when each was requested. */
  async rearmRequests(): Promise<Map<string, Date>> {
    const dir = path.join(this.dir, REARM_DIR);
    const out = new Map<string, Date>();
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      if (!NAME_RE.test(name)) continue;
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
  if (!NAME_RE.test(name)) throw new Error(`'${name}' is not a machine name (lowercase letters, digits and -)`);
  const file = path.join(stateDir, REARM_DIR, name);
  await writeFileAtomic(file, `${new Date().toISOString()}\n`, { mode: 0o600 });
  return file;
}
