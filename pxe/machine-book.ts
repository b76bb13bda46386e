/**
 * What hvpxe knows of each machine and every change to it: the boot decisions (boot-decision.ts,
 * install-claim.ts), the boot credentials (credentials.ts), refusals and events. Every route reads
 * and changes machines through this one book, and every change is one store update (store.ts):
 * decided on the machine's current record, written with a compare-and-swap in a fleet. The routes
 * decide what to answer.
 */
import type { Logger } from '../lib/logger.js';
import type { PxeMetrics } from './metrics.js';
import { rearmActivity, type CredentialRecord, type LostHistory, type MachineActivity, type Refusal } from './history-document.js';
import { decideBoot, loopOf, reportsFailure, reportsSuccess, withLocalBoot, type AfterInstall, type BootDecision } from './boot-decision.js';
import { checkCredential, newCredential, withIssued, type CredentialCheck, type CredentialUse } from './credentials.js';
import { summariseEvent, type EventSummary } from './event-body.js';
import { trimEvents } from './event-history.js';
import { claimInstall, lostSuccessHold, orphanedInstall } from './install-claim.js';
import { machineByName, type Catalog, type Machine } from './profiles.js';
import { applyNodeEvent, checkReportToken, checkTokenRequest, newReportToken, type ReportRefusal } from './node-report.js';
import type { NodeEventBody } from '../config/hvpxe-protocol.js';
import { StoreUnavailable, type MachineStore } from './store.js';

export const BOOK_LIMITS = {
  eventsKept: 50,
  refusalsKept: 20,
  /** Machines tracked; default-group machines beyond it replace one that never got further than booting. */
  machinesTracked: 1000,
  addressesTracked: 4096,
  /** How often a success report that could not be stored is tried again as a hold. */
  lostSuccessRetryMs: 2_000,
} as const;

/** What /machines says a machine boots next. */
export interface NextBoot {
  next: 'install' | 'local';
  why: string;
  localBoots?: number;
  loop?: string;
}

/** What a machine's boot script is: the installer with a fresh credential, its disk, or why it cannot boot here. */
export type ScriptAnswer =
  | { kind: 'untracked' }
  | { kind: 'arch' }
  | { kind: 'install'; credential: string }
  | { kind: 'disk'; decision: Exclude<BootDecision, { kind: 'install' }> };

/** The boot chain a script is for, and the architecture to refuse (undefined: served). */
export interface ScriptRequest {
  via: CredentialRecord['via'];
  client: string;
  matchedBy?: string;
  refusedArch?: string;
}

function afterInstallOf(catalog: Catalog, profile: string): AfterInstall {
  return catalog.file.profiles[profile]?.after_install ?? 'local';
}

/** A machine whose history must not be dropped to make room: it installed, is installing or is held. */
function mustKeep(a: MachineActivity): boolean {
  return !!(a.installed || a.installing || a.hold || a.credentials?.some((c) => c.configAt));
}

/** Puts the machine on hold for `why` (nothing when undefined); gives `why`. */
function holdFor(a: MachineActivity, why: string | undefined): string | undefined {
  if (why) a.hold = { since: new Date().toISOString(), why };
  return why;
}

function newActivity(m: Machine): MachineActivity {
  return { name: m.name, group: m.group, profile: m.profile, mac: m.mac, uuid: m.uuid, hostname: m.hostname, fetched: { artifacts: {} }, events: [] };
}

function seenIn(a: MachineActivity, address: string, nowIso: string): void {
  a.lastSeen = nowIso;
  a.lastAddress = address || undefined;
}

/** Keeps an event's summary; an outcome ends the install (success: the disk boots from now on). Returns whether it reported success. */
export function applyEvent(a: MachineActivity, e: EventSummary, at: string): boolean {
  const data = typeof e.data === 'object' ? e.data : undefined;
  // Byte progress replaces the previous byte progress of the same step instead of filling the history.
  const last = a.events.at(-1);
  if (e.event === 'bytes' && last?.event === 'bytes' && typeof last.data === 'object' && last.data.step === data?.step) a.events.pop();
  a.events.push({ at, event: e.event, data: e.data, ...(e.note ? { note: e.note } : {}) });
  a.events = trimEvents(a.events, BOOK_LIMITS.eventsKept);
  const summary = data ? summariseEvent(data)?.slice(0, 200) : undefined;
  a.progress = { event: e.event, at, ...(summary ? { summary } : {}) };
  const success = reportsSuccess(data);
  if (success) {
    a.installed = { at, via: data?.type === 'install' ? 'hvinstall events' : 'SUCCEEDED webhook' };
    a.localBoots = undefined;
  }
  if (success || reportsFailure(data)) {
    a.installing = undefined;
    a.hold = undefined;
  }
  return success;
}

export class MachineBook {
  private readonly byAddress = new Map<string, string>();
  /** Success reports refused while the store could not be written, by machine: when each came. */
  private readonly lostSuccesses = new Map<string, string>();
  private lostSuccessTimer: NodeJS.Timeout | undefined;
  private holdingLost = false;

  constructor(
    private readonly log: Logger,
    private readonly metrics: PxeMetrics,
    readonly store: MachineStore,
    private readonly catalog: () => Catalog | undefined,
    /** This server's name in the store (which server served what). */
    readonly server: string,
  ) {}

  /** Set when the history read at start-up was set aside: machines not re-armed since are held. */
  get historyLost(): LostHistory | undefined {
    return this.store.lost;
  }

  /** Opens the store and applies the re-arm requests waiting. */
  async restore(): Promise<void> {
    await this.store.open();
    await this.applyRearms();
  }

  /** Consumes `hvpxe rearm` requests: those machines get the installer again on their next network boot. */
  async applyRearms(): Promise<void> {
    for (const [name, requestedAt] of await this.store.rearmRequests()) {
      const cat = this.catalog();
      const declared = cat ? machineByName(cat, name) : undefined;
      const known = this.store.get(name);
      if (known || declared) {
        this.log.warn('machine re-armed: its next network boot installs it again', { machine: name, installedAt: known?.installed?.at, held: known?.hold?.why, requestedAt: requestedAt.toISOString() });
        await this.store.update(name, () => newActivity(declared!), (a) => rearmActivity(a, new Date().toISOString()), 'try').catch(() => undefined);
      } else {
        this.log.warn('re-arm request for a machine with no history: nothing to re-arm', { machine: name });
      }
      await this.store.clearRearm(name);
    }
  }

  /** Whether the machine has (or can be given) a record; a default-group machine may replace one that never got far. */
  async makeRoom(m: Machine): Promise<boolean> {
    if (this.store.get(m.name) || !m.viaDefault || this.store.size < BOOK_LIMITS.machinesTracked) return true;
    const declared = this.catalog()?.byName;
    const spare = this.store.all().find((x) => !declared?.has(x.name) && !mustKeep(x));
    if (!spare) {
      this.log.warn('machine not tracked: the book of machines is full', { machine: m.name });
      return false;
    }
    await this.store.remove(spare.name);
    return true;
  }

  /** Records that `name` was seen at `address` (artifacts are attributed so). */
  private noteAddress(name: string, address: string): void {
    if (!address) return;
    this.byAddress.delete(address);
    this.byAddress.set(address, name);
    if (this.byAddress.size > BOOK_LIMITS.addressesTracked) this.byAddress.delete(this.byAddress.keys().next().value!);
  }

  /** The machine last seen at an address. */
  machineAt(address: string): string | undefined {
    return this.byAddress.get(address);
  }

  get(name: string): MachineActivity | undefined {
    return this.store.get(name);
  }

  /** The catalog's machines (seen or not) and any others the store holds. */
  all(catalog: Catalog): MachineActivity[] {
    const known = catalog.machines.map((m) => this.store.get(m.name) ?? newActivity(m));
    const names = new Set(known.map((a) => a.name));
    return [...known, ...this.store.all().filter((a) => !names.has(a.name))];
  }

  /** What /machines says the machine boots next, and whether it has been looping. */
  nextBoot(a: MachineActivity, catalog: Catalog): NextBoot {
    const d = decideBoot(a, afterInstallOf(catalog, a.profile), Date.now(), this.store.lost);
    if (d.kind === 'install') return { next: 'install', why: d.why };
    const loop = loopOf(a.localBoots, Date.now());
    const why = d.kind === 'local' ? `installed ${d.installedAt} (${d.via}); \`hvpxe rearm ${a.name}\` installs it again` : `held: ${d.why}; \`hvpxe rearm ${a.name}\` installs it`;
    return { next: 'local', why, localBoots: a.localBoots?.length ?? 0, ...(loop ? { loop } : {}) };
  }

  /**
   * What the machine's next network boot gets, decided on its current record and written with it
   * (a fresh credential for the installer, the install claim, or one more local boot). When the
   * store cannot be written, the installer is never served: the disk, with why on the console.
   */
  async script(m: Machine, catalog: Catalog, req: ScriptRequest): Promise<ScriptAnswer> {
    await this.applyRearms();
    if (!(await this.makeRoom(m))) return { kind: 'untracked' };
    this.noteAddress(m.name, req.client);
    let answer: ScriptAnswer;
    try {
      answer = await this.store.update(m.name, () => newActivity(m), (a) => this.scriptChange(a, catalog, req), 'soon');
      this.lostSuccesses.delete(m.name); // decided on, and stored with the decision
    } catch (err) {
      if (!(err instanceof StoreUnavailable)) throw err;
      answer = { kind: 'disk', decision: this.storeDown(this.store.get(m.name), catalog, err) };
    }
    if (answer.kind === 'arch') this.log.warn('a machine booted as an architecture no profile serves', { machine: m.name, arch: req.refusedArch, via: req.via });
    return answer;
  }

  private scriptChange(a: MachineActivity, catalog: Catalog, req: ScriptRequest): ScriptAnswer {
    const now = Date.now();
    const nowIso = new Date(now).toISOString();
    seenIn(a, req.client, nowIso);
    if (req.matchedBy) a.matchedBy = req.matchedBy;
    a.fetched[req.via] = nowIso;
    a.servedBy = { ...a.servedBy, script: this.server };
    if (req.refusedArch !== undefined) {
      applyEvent(a, { event: 'unsupported-arch', data: { arch: req.refusedArch, via: req.via } }, nowIso);
      a.progress = { event: 'unsupported-arch', at: nowIso, summary: `booted as ${req.refusedArch} (${req.via}); profile ${a.profile} serves x86_64 only` };
      return { kind: 'arch' };
    }
    const d = this.decide(a, catalog, now);
    if (d.kind === 'install') {
      const { credential, sha256 } = newCredential();
      a.credentials = withIssued(a.credentials, { sha256, issuedAt: nowIso, via: req.via, ...(req.client ? { address: req.client } : {}) }, now);
      return { kind: 'install', credential };
    }
    a.localBoots = withLocalBoot(a.localBoots, nowIso);
    return { kind: 'disk', decision: d };
  }

  /** decideBoot, then the fleet's rules: an install orphaned by a stopped server is held; another server's fresh claim stands. */
  private decide(a: MachineActivity, catalog: Catalog, now: number): BootDecision {
    const d = decideBoot(a, afterInstallOf(catalog, a.profile), now, this.store.lost);
    if (d.kind !== 'install') return d;
    const loop = loopOf(a.localBoots, now, 1);
    const looping = loop ? { loop } : {};
    const reportedAt = this.lostSuccesses.get(a.name);
    const orphaned = (reportedAt && lostSuccessHold(a, reportedAt)) || orphanedInstall(a, this.store.liveServers(), this.server);
    if (orphaned) {
      a.hold = { since: new Date(now).toISOString(), why: orphaned };
      return { kind: 'hold', why: orphaned, ...looping };
    }
    const claim = claimInstall(a.claim, this.server, now);
    if (!claim.ok) return { kind: 'hold', why: claim.why, ...looping };
    a.claim = claim.claim;
    return d;
  }

  /** The boot of a machine while the store cannot be written: its disk, and why. */
  private storeDown(a: MachineActivity | undefined, catalog: Catalog, err: Error): Exclude<BootDecision, { kind: 'install' }> {
    this.metrics.storeRefusal('script');
    const d = a ? decideBoot(a, afterInstallOf(catalog, a.profile), Date.now(), this.store.lost) : undefined;
    this.log.error('machine store unavailable: serving the disk instead of the installer', { machine: a?.name, error: err.message });
    if (d && d.kind !== 'install') return d;
    return { kind: 'hold', why: `hvpxe cannot read and write its machine store right now (${err.message}), so it cannot tell whether this machine may install: booting its disk; it installs on a network boot once the store is back` };
  }

  /**
   * A boot credential for `use`, checked on the machine's record as this server sees it (no write);
   * one it does not know is looked up in the store first (another server may have issued it a
   * moment ago). Throws StoreUnavailable when that lookup fails.
   */
  async checkCredential(name: string, credential: string | null, use: CredentialUse, attested: boolean): Promise<CredentialCheck> {
    const check = checkCredential(this.store.get(name)?.credentials, credential, use, Date.now(), attested);
    if (check.ok || check.reason !== 'unknown') return check;
    await this.store.refresh(name);
    return checkCredential(this.store.get(name)?.credentials, credential, use, Date.now(), attested);
  }

  /**
   * Serves the config for this credential once: checked again on the current record and written
   * with it (the credential used, an install running through this server) before the config goes
   * out. Throws StoreUnavailable when it cannot be written (nothing is served then).
   */
  async configServed(m: Machine, credential: string, attested: boolean, client: string): Promise<CredentialCheck> {
    this.noteAddress(m.name, client);
    return this.store.update(
      m.name,
      () => newActivity(m),
      (a) => {
        const check = checkCredential(a.credentials, credential, 'config', Date.now(), attested);
        if (!check.ok) return check;
        const at = new Date().toISOString();
        seenIn(a, client, at);
        check.record.configAt = at;
        a.fetched.config = at;
        a.installing = { since: at, via: this.server };
        a.servedBy = { ...a.servedBy, config: this.server };
        return check;
      },
      'must',
    );
  }

  /** The credential proved the machine's TPM (tpm/attestation.ts). */
  async attested(m: Machine, sha256: string): Promise<void> {
    const at = new Date().toISOString();
    await this.store.update(m.name, () => newActivity(m), (a) => {
      const r = a.credentials?.find((c) => c.sha256 === sha256);
      if (r) r.attestedAt = at;
    }, 'soon');
  }

  /** An install event, kept with the machine (an outcome decides its next boot); false when the credential was refused meanwhile. */
  async event(m: Machine, credential: string, attested: boolean, e: EventSummary, client: string): Promise<CredentialCheck> {
    this.noteAddress(m.name, client);
    const data = typeof e.data === 'object' ? e.data : undefined;
    const outcome = reportsSuccess(data) || reportsFailure(data);
    const change = (a: MachineActivity): { check: CredentialCheck; success: boolean } => {
      const check = checkCredential(a.credentials, credential, 'events', Date.now(), attested);
      if (!check.ok) return { check, success: false };
      const at = new Date().toISOString();
      seenIn(a, client, at);
      a.servedBy = { ...a.servedBy, event: this.server };
      return { check, success: applyEvent(a, e, at) };
    };
    const r = await this.store.update(m.name, () => newActivity(m), change, outcome ? 'try' : 'soon').catch((err: unknown) => {
      if (err instanceof StoreUnavailable && reportsSuccess(data)) this.lostSuccess(m.name);
      throw err;
    });
    if (r.success) this.log.info('machine reported a finished install: it boots from its disk from now on', { machine: m.name, via: data?.type === 'install' ? 'hvinstall events' : 'SUCCEEDED webhook' });
    return r.check;
  }

  /**
   * A success report the store could not take (the answer is a 503, and the installer does not
   * post it again): the machine is held on its disk as soon as the store is back, by a retry here
   * or by this server's next decision for it, whichever comes first.
   */
  private lostSuccess(name: string): void {
    if (!this.lostSuccesses.has(name)) this.lostSuccesses.set(name, new Date().toISOString());
    this.log.warn('a finished install could not be recorded: the machine is held on its disk once the machine store is back', { machine: name });
    this.lostSuccessTimer ??= setInterval(() => void this.holdLostSuccesses(), BOOK_LIMITS.lostSuccessRetryMs).unref();
  }

  /** Holds the machines whose success report was lost, once the store takes it. */
  async holdLostSuccesses(): Promise<void> {
    if (this.holdingLost) return;
    this.holdingLost = true;
    try {
      for (const [name, reportedAt] of this.lostSuccesses) {
        const why = this.store.get(name) ? await this.store.update(name, () => this.store.get(name)!, (a) => holdFor(a, lostSuccessHold(a, reportedAt)), 'must') : undefined;
        this.lostSuccesses.delete(name);
        if (why) this.log.warn('machine held: its report of a finished install was lost while the machine store could not be written', { machine: name, reportedAt, rearm: `hvpxe rearm ${name}` });
      }
    } catch (err) {
      if (!(err instanceof StoreUnavailable)) this.log.error('holding machines whose success report was lost failed', { error: (err as Error).message });
    } finally {
      this.holdingLost = false;
      if (this.lostSuccesses.size === 0 && this.lostSuccessTimer) {
        clearInterval(this.lostSuccessTimer);
        this.lostSuccessTimer = undefined;
      }
    }
  }

  /**
   * A node-report token for the install running with this boot credential (node-report.ts): once
   * per credential, replacing the machine's earlier token, written before it is handed out.
   * Throws StoreUnavailable when it cannot be written (no token then).
   */
  async issueReportToken(m: Machine, credential: string | null, attested: boolean, client: string): Promise<{ ok: true; token: string } | { ok: false; reason: ReportRefusal }> {
    return this.store.update(
      m.name,
      () => newActivity(m),
      (a) => {
        const check = checkTokenRequest(a.credentials, credential, Date.now(), attested);
        if (!check.ok) return check;
        const at = new Date().toISOString();
        const { token, sha256 } = newReportToken();
        seenIn(a, client, at);
        check.record.reportTokenAt = at;
        a.reportToken = { sha256, issuedAt: at, via: this.server };
        return { ok: true as const, token };
      },
      'must',
    );
  }

  /** A post-install event from the installed node, with its node-report token; kept, deciding nothing (undefined: only the token checked). */
  async nodeEvent(m: Machine, authorization: string | undefined, e: NodeEventBody | undefined, client: string): Promise<{ ok: true } | { ok: false; reason: ReportRefusal }> {
    // Checked on this server's view first (another server may have issued it a moment ago): a refused post writes nothing.
    let known = checkReportToken(this.store.get(m.name), authorization);
    if (!known.ok && known.reason === 'unknown') {
      await this.store.refresh(m.name);
      known = checkReportToken(this.store.get(m.name), authorization);
    }
    if (!known.ok || !e) return known;
    return this.store.update(
      m.name,
      () => newActivity(m),
      (a) => {
        const check = checkReportToken(a, authorization);
        if (!check.ok) return check;
        const at = new Date().toISOString();
        seenIn(a, client, at);
        a.servedBy = { ...a.servedBy, event: this.server };
        applyNodeEvent(a, e, at, (events) => trimEvents(events, BOOK_LIMITS.eventsKept));
        return check;
      },
      'try',
    );
  }

  /** A refused request, where the operator sees it: the machine's refusals, the log and a metric. */
  async refuse(m: Machine, what: Refusal['what'], reason: string, detail: string, address: string): Promise<void> {
    this.metrics.refused(what, reason);
    this.log.warn('refused', { what, machine: m.name, reason: detail, client: address || undefined });
    const refusal: Refusal = { at: new Date().toISOString(), what, reason: detail, ...(address ? { address } : {}) };
    await this.store
      .update(m.name, () => newActivity(m), (a) => void (a.refusals = [...(a.refusals ?? []), refusal].slice(-BOOK_LIMITS.refusalsKept)), 'soon')
      .catch((err: Error) => this.log.debug('refusal not stored', { machine: m.name, error: err.message }));
  }

  /** An artifact the machine last seen at `client` fetched (for /machines; best effort, never waited for). */
  fetched(client: string, path: string, reply: { status: number; bytes: number }): void {
    const name = this.byAddress.get(client);
    if (!name || !this.store.get(name)) return;
    const at = new Date().toISOString();
    this.store
      .update(name, () => this.store.get(name)!, (a) => void (a.fetched.artifacts[path] = { at, bytes: reply.bytes, status: reply.status }), 'soon')
      .catch((err: Error) => this.log.debug('artifact fetch not stored', { machine: name, error: err.message }));
  }
}
