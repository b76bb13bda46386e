/**
 * What hvpxe knows of each machine while it runs: the activity the history keeps (history.ts), the
 * boot decisions taken on it (boot-decision.ts), the boot credentials handed out (credentials.ts),
 * refusals and events. Every route reads and writes machines through this one book; the routes
 * decide what to answer.
 */
import type { Logger } from '../lib/logger.js';
import type { PxeMetrics } from './metrics.js';
import type { HistoryStore } from './history.js';
import { holdUnfinishedInstalls, type CredentialRecord, type LostHistory, type MachineActivity, type Refusal } from './history-document.js';
import { decideBoot, loopOf, reportsFailure, reportsSuccess, withLocalBoot, type AfterInstall, type BootDecision } from './boot-decision.js';
import { checkCredential, newCredential, withIssued, type CredentialCheck, type CredentialUse } from './credentials.js';
import { summariseEvent, type EventSummary } from './event-body.js';
import { trimEvents } from './event-history.js';
import { machineByName, type Catalog, type Machine } from './profiles.js';

export const BOOK_LIMITS = {
  eventsKept: 50,
  refusalsKept: 20,
  /** Machines tracked; default-group machines beyond it replace one that never got further than booting. */
  machinesTracked: 1000,
  addressesTracked: 4096,
} as const;

/** What /machines says a machine boots next. */
export interface NextBoot {
  next: 'install' | 'local';
  why: string;
  localBoots?: number;
  loop?: string;
}

function afterInstallOf(catalog: Catalog, profile: string): AfterInstall {
  return catalog.file.profiles[profile]?.after_install ?? 'local';
}

/** A machine whose history must not be dropped to make room: it installed, is installing or is held. */
function mustKeep(a: MachineActivity): boolean {
  return !!(a.installed || a.installing || a.hold || a.credentials?.some((c) => c.configAt));
}

export class MachineBook {
  private readonly activity = new Map<string, MachineActivity>();
  private readonly byAddress = new Map<string, string>();
  private lost: LostHistory | undefined;

  constructor(
    private readonly log: Logger,
    private readonly metrics: PxeMetrics,
    private readonly store: HistoryStore | undefined,
    private readonly catalog: () => Catalog | undefined,
  ) {}

  /** Set when the history read at start-up was set aside: machines not re-armed since are held. */
  get historyLost(): LostHistory | undefined {
    return this.lost;
  }

  /** Loads the history (history.ts: an unreadable one throws) and holds the installs it cannot know the end of. */
  async restore(): Promise<void> {
    if (!this.store) return;
    const loaded = await this.store.load();
    for (const a of loaded.machines) this.activity.set(a.name, a);
    this.lost = loaded.lost;
    const held = holdUnfinishedInstalls(loaded.machines, new Date().toISOString());
    this.store.track(() => ({ machines: [...this.activity.values()], ...(this.lost ? { lost: this.lost } : {}) }));
    const installed = loaded.machines.filter((a) => a.installed).map((a) => a.name);
    this.log.info('machine history restored', { file: this.store.file, machines: loaded.machines.length, installed });
    if (held.length > 0) this.log.warn('machines whose install was running when hvpxe stopped boot their disk until they report or are re-armed', { machines: held });
    // Written at once when it changed; a history that cannot be written is retried and reported (not a reason to stay down).
    if (this.lost || held.length > 0) await this.store.saveNow().catch(() => undefined);
    await this.applyRearms();
  }

  /** Consumes `hvpxe rearm` requests: those machines get the installer again on their next network boot. */
  async applyRearms(): Promise<void> {
    if (!this.store) return;
    for (const [name, requestedAt] of await this.store.rearmRequests()) {
      const cat = this.catalog();
      const declared = cat ? machineByName(cat, name) : undefined;
      const a = this.activity.get(name) ?? (declared ? this.activityOf(declared) : undefined);
      if (a) {
        this.log.warn('machine re-armed: its next network boot installs it again', { machine: name, installedAt: a.installed?.at, held: a.hold?.why, requestedAt: requestedAt.toISOString() });
        a.installed = undefined;
        a.installing = undefined;
        a.hold = undefined;
        a.localBoots = undefined;
        a.rearmedAt = new Date().toISOString();
        await this.store.saveNow().catch(() => undefined);
      } else {
        this.log.warn('re-arm request for a machine with no history: nothing to re-arm', { machine: name });
      }
      await this.store.clearRearm(name);
    }
  }

  persist(): void {
    this.store?.save();
  }

  /** Writes the history now; throws when it cannot (the caller refuses what depends on it). */
  async persistNow(): Promise<void> {
    await this.store?.saveNow();
  }

  /** A machine's activity, created on first sight; undefined when the book is full of machines it must keep. */
  track(m: Machine): MachineActivity | undefined {
    const known = this.activity.get(m.name);
    if (known) return known;
    if (m.viaDefault && this.activity.size >= BOOK_LIMITS.machinesTracked) {
      const declared = this.catalog()?.byName;
      const spare = [...this.activity.values()].find((x) => !declared?.has(x.name) && !mustKeep(x));
      if (!spare) return undefined;
      this.activity.delete(spare.name);
    }
    const a: MachineActivity = { name: m.name, group: m.group, profile: m.profile, mac: m.mac, uuid: m.uuid, hostname: m.hostname, fetched: { artifacts: {} }, events: [] };
    this.activity.set(m.name, a);
    return a;
  }

  /** A declared machine's activity (declared machines are always tracked). */
  activityOf(m: Machine): MachineActivity {
    return this.track(m) ?? this.activity.get(m.name)!;
  }

  /** Records that the machine asked for something from `address`. */
  seen(a: MachineActivity, address: string): void {
    a.lastSeen = new Date().toISOString();
    a.lastAddress = address || undefined;
    if (address) {
      this.byAddress.delete(address);
      this.byAddress.set(address, a.name);
      if (this.byAddress.size > BOOK_LIMITS.addressesTracked) this.byAddress.delete(this.byAddress.keys().next().value!);
    }
    this.persist();
  }

  /** The machine last seen at an address (artifacts are attributed so). */
  machineAt(address: string): string | undefined {
    return this.byAddress.get(address);
  }

  get(name: string): MachineActivity | undefined {
    return this.activity.get(name);
  }

  /** The catalog's machines (seen or not) and any others the history still holds. */
  all(catalog: Catalog): MachineActivity[] {
    const known = catalog.machines.map((m) => this.activityOf(m));
    return [...known, ...[...this.activity.values()].filter((a) => !known.includes(a))];
  }

  /** What the machine's next network boot gets; a local answer is counted (loop detection). */
  decide(a: MachineActivity, catalog: Catalog): BootDecision {
    const d = decideBoot(a, afterInstallOf(catalog, a.profile), Date.now(), this.lost);
    if (d.kind !== 'install') {
      a.localBoots = withLocalBoot(a.localBoots, new Date().toISOString());
      this.persist();
    }
    return d;
  }

  /** What /machines says the machine boots next, and whether it has been looping. */
  nextBoot(a: MachineActivity, catalog: Catalog): NextBoot {
    const d = decideBoot(a, afterInstallOf(catalog, a.profile), Date.now(), this.lost);
    if (d.kind === 'install') return { next: 'install', why: d.why };
    const loop = loopOf(a.localBoots, Date.now());
    const why = d.kind === 'local' ? `installed ${d.installedAt} (${d.via}); \`hvpxe rearm ${a.name}\` installs it again` : `held: ${d.why}; \`hvpxe rearm ${a.name}\` installs it`;
    return { next: 'local', why, localBoots: a.localBoots?.length ?? 0, ...(loop ? { loop } : {}) };
  }

  /** A fresh boot credential for the machine's install script (only its hash is kept). */
  issueCredential(a: MachineActivity, via: CredentialRecord['via'], address: string): string {
    const { credential, sha256 } = newCredential();
    a.credentials = withIssued(a.credentials, { sha256, issuedAt: new Date().toISOString(), via, ...(address ? { address } : {}) }, Date.now());
    this.persist();
    return credential;
  }

  checkCredential(a: MachineActivity, credential: string | null, use: CredentialUse, attested: boolean): CredentialCheck {
    return checkCredential(a.credentials, credential, use, Date.now(), attested);
  }

  /** A refused request, where the operator sees it: the machine's refusals, the log and a metric. */
  refuse(a: MachineActivity, what: Refusal['what'], reason: string, detail: string, address: string): void {
    a.refusals = [...(a.refusals ?? []), { at: new Date().toISOString(), what, reason: detail, ...(address ? { address } : {}) }].slice(-BOOK_LIMITS.refusalsKept);
    this.metrics.refused(what, reason);
    this.log.warn('refused', { what, machine: a.name, reason: detail, client: address || undefined });
    this.persist();
  }

  /** The config was served for this credential: an install is running. */
  configServed(a: MachineActivity, record: CredentialRecord): void {
    const at = new Date().toISOString();
    record.configAt = at;
    a.fetched.config = at;
    a.installing = { since: at };
  }

  /** Keeps an event's summary; an outcome ends the install (success: the disk boots from now on). */
  recordEvent(a: MachineActivity, e: EventSummary): void {
    const at = new Date().toISOString();
    const data = typeof e.data === 'object' ? e.data : undefined;
    // Byte progress replaces the previous byte progress of the same step instead of filling the history.
    const last = a.events.at(-1);
    if (e.event === 'bytes' && last?.event === 'bytes' && typeof last.data === 'object' && last.data.step === data?.step) a.events.pop();
    a.events.push({ at, event: e.event, data: e.data, ...(e.note ? { note: e.note } : {}) });
    a.events = trimEvents(a.events, BOOK_LIMITS.eventsKept);
    const summary = data ? summariseEvent(data)?.slice(0, 200) : undefined;
    a.progress = { event: e.event, at, ...(summary ? { summary } : {}) };
    if (reportsSuccess(data)) {
      a.installed = { at, via: data?.type === 'install' ? 'hvinstall events' : 'SUCCEEDED webhook' };
      a.localBoots = undefined;
      this.log.info('machine reported a finished install: it boots from its disk from now on', { machine: a.name, via: a.installed.via });
    }
    if (reportsSuccess(data) || reportsFailure(data)) {
      a.installing = undefined;
      a.hold = undefined;
    }
  }

  /** A machine booted as an architecture no profile serves: an event in /machines and a warning. */
  refuseArch(a: MachineActivity, shown: string, via: 'ipxe' | 'grub'): void {
    this.recordEvent(a, { event: 'unsupported-arch', data: { arch: shown, via } });
    a.progress = { event: 'unsupported-arch', at: a.progress!.at, summary: `booted as ${shown} (${via}); profile ${a.profile} serves x86_64 only` };
    this.log.warn('a machine booted as an architecture no profile serves', { machine: a.name, arch: shown, via });
    this.persist();
  }
}
