/**
 * The file store: one hvpxe server, nothing else to run. Machines live in this process's memory
 * and the history file (<state dir>/machines.json, history.ts) keeps them across restarts; without
 * a state directory, in memory only. One process is the only writer, so a change is applied to
 * the record in place: no other server can have written it meanwhile.
 */
import type { Logger } from '../lib/logger.js';
import { HistoryStore } from './history.js';
import { holdUnfinishedInstalls, type LostHistory, type MachineActivity } from './history-document.js';
import { StoreUnavailable, type Durability, type MachineStore, type StoreHealth } from './store.js';

export class FileStore implements MachineStore {
  private readonly machines = new Map<string, MachineActivity>();
  private readonly history?: HistoryStore;
  lost: LostHistory | undefined;

  constructor(
    stateDir: string | undefined,
    private readonly log: Logger,
    private readonly server: string,
  ) {
    if (stateDir) this.history = new HistoryStore(stateDir, log);
  }

  get kind(): 'file' | 'memory' {
    return this.history ? 'file' : 'memory';
  }

  get size(): number {
    return this.machines.size;
  }

  /** Loads the history (an unreadable one throws) and holds the installs it cannot know the end of. */
  async open(): Promise<void> {
    if (!this.history) return;
    const loaded = await this.history.load();
    for (const a of loaded.machines) this.machines.set(a.name, a);
    this.lost = loaded.lost;
    const held = holdUnfinishedInstalls(loaded.machines, new Date().toISOString());
    this.history.track(() => ({ machines: [...this.machines.values()], ...(this.lost ? { lost: this.lost } : {}) }));
    const installed = loaded.machines.filter((a) => a.installed).map((a) => a.name);
    this.log.info('machine history restored', { file: this.history.file, machines: loaded.machines.length, installed });
    if (held.length > 0) this.log.warn('machines whose install was running when hvpxe stopped boot their disk until they report or are re-armed', { machines: held });
    // Written at once when it changed; a history that cannot be written is retried and reported (not a reason to stay down).
    if (this.lost || held.length > 0) await this.history.saveNow().catch(() => undefined);
  }

  get(name: string): MachineActivity | undefined {
    return this.machines.get(name);
  }

  all(): MachineActivity[] {
    return [...this.machines.values()];
  }

  async update<T>(name: string, create: () => MachineActivity, change: (a: MachineActivity) => T, durable: Durability): Promise<T> {
    let a = this.machines.get(name);
    const existed = !!a;
    if (!a) {
      a = create();
      this.machines.set(name, a);
    }
    const before = durable === 'must' ? structuredClone(a) : undefined;
    const result = change(a);
    if (!this.history) return result;
    if (durable === 'soon') {
      this.history.save();
      return result;
    }
    try {
      await this.history.saveNow();
    } catch (err) {
      if (durable === 'try') return result;
      // Not on disk, so not done: the record goes back to what it was.
      if (existed) this.machines.set(name, before!);
      else this.machines.delete(name);
      throw new StoreUnavailable((err as Error).message);
    }
    return result;
  }

  async refresh(): Promise<void> {}

  async remove(name: string): Promise<void> {
    this.machines.delete(name);
    this.history?.save();
  }

  async rearmRequests(): Promise<Map<string, Date>> {
    return this.history ? this.history.rearmRequests() : new Map();
  }

  async clearRearm(name: string): Promise<void> {
    await this.history?.clearRearm(name);
  }

  liveServers(): ReadonlySet<string> {
    return new Set([this.server]);
  }

  async checkReadable(): Promise<void> {
    await this.history?.checkReadable();
  }

  health(): StoreHealth {
    const h = this.history?.health();
    return { kind: this.kind, where: this.history?.file, writable: h?.writable ?? true, failures: h?.failures ?? 0, failingSince: h?.failingSince, lastError: h?.lastError };
  }

  async close(): Promise<void> {
    await this.history?.flush();
  }
}
