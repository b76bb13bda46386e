/**
 * The etcd store: several hvpxe servers, one truth (docs/fleet.md). Each server reads the whole
 * fleet once, then keeps its copy current with a watch; decisions are taken on that copy and
 * written with a compare-and-swap on the keys they were taken on (etcd-layout.ts), so a stale copy
 * costs a retry, never a wrong answer: a server that has not yet seen another's SUCCEEDED or
 * re-arm finds out when its write is refused, and decides again on what it reads back.
 *
 * Leases: credentials are written under a shared lease that outlives their use (24 h and some), so
 * etcd drops them by itself; each server keeps its presence (servers/<name>) under a 10 s lease, and
 * a machine whose install runs through a server that is gone is held (install-claim.ts).
 *
 * Fail closed: a write that etcd does not confirm within the deadline throws StoreUnavailable and
 * the route serves no installer and no config. A probe every 2 s (a linearizable read, which needs
 * quorum) keeps /healthz and the metrics true while no request comes, and notices the recovery:
 * nothing to restart.
 */
import type { Logger } from '../lib/logger.js';
import { CREDENTIAL } from './credentials.js';
import { b64, EtcdAmbiguous, EtcdClient, prefixEnd, type KeyValue, type WatchEvent } from './etcd-client.js';
import { addsCredential, keyKind, keys, machineOf, planWrite, type StoredMachine } from './etcd-layout.js';
import type { CredentialRecord, MachineActivity } from './history-document.js';
import { StoreUnavailable, type Durability, type MachineStore, type StoreHealth } from './store.js';

export const ETCD_STORE = {
  probeMs: 2_000,
  presenceTtlS: 10,
  keepAliveMs: 3_000,
  /** A credential lease is shared by the credentials issued within this time of its grant. */
  leaseReuseMs: 60 * 60_000,
  pageSize: 500,
  casAttempts: 8,
} as const;

type CredMap = Map<string, { rec: CredentialRecord; rev: number; lease: string }>;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms).unref());

export interface EtcdStoreOptions {
  client: EtcdClient;
  prefix: string;
  server: string;
  /** What this server tells the others about itself (its URL). */
  url?: () => string;
  log: Logger;
}

export class EtcdStore implements MachineStore {
  readonly kind = 'etcd';
  readonly lost = undefined;
  private docs = new Map<string, { doc: StoredMachine['doc']; rev: number }>();
  private creds = new Map<string, CredMap>();
  private servers = new Map<string, number>();
  private revision = 0;
  private closed = false;
  private probing = false;
  private readonly queues = new Map<string, Promise<unknown>>();
  private stopWatch: (() => void) | undefined;
  private watching: Promise<void> | undefined;
  private timers: NodeJS.Timeout[] = [];
  private credLease: { id: string; at: number } | undefined;
  private presenceLease: string | undefined;
  private readonly state: Omit<StoreHealth, 'kind' | 'where'> = { writable: true, failures: 0 };
  private readonly client: EtcdClient;
  private readonly prefix: string;

  constructor(private readonly opts: EtcdStoreOptions) {
    this.client = opts.client;
    this.prefix = opts.prefix.replace(/\/+$/, '');
  }

  get size(): number {
    return this.docs.size;
  }

  get where(): string {
    return `etcd ${this.client.where} ${this.prefix}`;
  }

  async open(): Promise<void> {
    try {
      await this.resync();
      await this.announce();
    } catch (err) {
      throw new StoreUnavailable(`cannot read the fleet from ${this.where}: ${(err as Error).message}`);
    }
    this.watching = this.watchLoop();
    this.timers.push(setInterval(() => void this.probe(), ETCD_STORE.probeMs), setInterval(() => void this.keepPresence(), ETCD_STORE.keepAliveMs));
    for (const t of this.timers) t.unref();
    await this.holdMyUnfinishedInstalls();
    this.opts.log.info('machine store: etcd', { endpoints: this.client.where, prefix: this.prefix, machines: this.docs.size, servers: [...this.servers.keys()], revision: this.revision });
  }

  /** Installs that were running through this server when it stopped: their outcome may have been posted while nobody listened. */
  private async holdMyUnfinishedInstalls(): Promise<void> {
    const now = new Date().toISOString();
    for (const [name, { doc }] of this.docs) {
      if (doc.installing?.via !== this.opts.server || doc.installed || doc.hold) continue;
      const why = `hvpxe ${this.opts.server} stopped while its install was running (config served ${doc.installing.since}): whether it finished is unknown`;
      await this.update(name, () => machineOf({ doc, rev: 0, creds: new Map() }), (a) => void (a.installing && !a.installed && !a.hold && (a.hold = { since: now, why })), 'must').catch(() => undefined);
      this.opts.log.warn('machine whose install was running when hvpxe stopped boots its disk until it reports or is re-armed', { machine: name });
    }
  }

  private stored(name: string): StoredMachine | undefined {
    const d = this.docs.get(name);
    return d ? { doc: d.doc, rev: d.rev, creds: this.creds.get(name) ?? new Map() } : undefined;
  }

  get(name: string): MachineActivity | undefined {
    const s = this.stored(name);
    return s ? machineOf(s) : undefined;
  }

  all(): MachineActivity[] {
    return [...this.docs.keys()].map((n) => this.get(n)!);
  }

  liveServers(): ReadonlySet<string> {
    return new Set([...this.servers.keys(), this.opts.server]);
  }

  /**
   * Writes through whatever the durability: a change is in etcd, or it throws and nothing changed.
   * This server's changes to one machine go one after the other (they would only refuse each
   * other's compare); other servers' are what the compare-and-swap is for.
   */
  update<T>(name: string, create: () => MachineActivity, change: (a: MachineActivity) => T, _durable?: Durability): Promise<T> {
    const prev = this.queues.get(name) ?? Promise.resolve();
    const next = prev.then(() => this.write(name, create, change));
    const tail = next.catch(() => undefined);
    this.queues.set(name, tail);
    void tail.then(() => {
      if (this.queues.get(name) === tail) this.queues.delete(name);
    });
    return next;
  }

  private async write<T>(name: string, create: () => MachineActivity, change: (a: MachineActivity) => T): Promise<T> {
    for (let attempt = 0; attempt < ETCD_STORE.casAttempts; attempt++) {
      const before = this.stored(name);
      const a = before ? machineOf(before) : create();
      const result = change(a);
      try {
        const lease = addsCredential(before, a) ? await this.credentialLease() : undefined;
        const plan = planWrite(this.prefix, before, a, lease);
        if (!plan) return result;
        const r = await this.client.txn(plan.compare, plan.success, plan.failure);
        this.succeeded();
        if (r.succeeded) {
          this.applyWrite(name, before, a, r.revision, lease);
          return result;
        }
        this.replace(name, r.ranges[0]?.[0], r.ranges[1] ?? []);
      } catch (err) {
        if (err instanceof StoreUnavailable) throw err;
        // Sent, no answer (a leader died with it in flight): read back whether it landed; if not, decide again.
        if (err instanceof EtcdAmbiguous && (await this.landed(name, a))) return result;
        if (err instanceof EtcdAmbiguous) continue;
        this.failed((err as Error).message);
        throw new StoreUnavailable((err as Error).message);
      }
    }
    throw new StoreUnavailable(`${this.where}: machine ${name} kept changing under ${ETCD_STORE.casAttempts} attempts to write it`);
  }

  /** This server's copy after its own write (the watch brings the same revision later, and is skipped). */
  private applyWrite(name: string, before: StoredMachine | undefined, a: MachineActivity, revision: number, lease: string | undefined): void {
    const { credentials, ...doc } = a;
    const docChanged = !before || JSON.stringify(before.doc) !== JSON.stringify(doc);
    this.docs.set(name, { doc: structuredClone(doc), rev: docChanged ? revision : before.rev });
    const next: CredMap = new Map();
    for (const rec of credentials ?? []) {
      const old = before?.creds.get(rec.sha256);
      const same = old && JSON.stringify(old.rec) === JSON.stringify(rec);
      next.set(rec.sha256, same ? old : { rec: structuredClone(rec), rev: revision, lease: old?.lease ?? lease ?? '0' });
    }
    this.creds.set(name, next);
  }

  /** Whether the machine as stored now is `a` (a write whose answer was lost did land). */
  private async landed(name: string, a: MachineActivity): Promise<boolean> {
    await this.refresh(name);
    const now = this.get(name);
    const bySha = (x: MachineActivity | undefined): string => JSON.stringify([...(x?.credentials ?? [])].sort((p, q) => p.sha256.localeCompare(q.sha256)));
    const { credentials: _n, ...nowDoc } = now ?? ({} as MachineActivity);
    const { credentials: _a, ...aDoc } = a;
    return !!now && JSON.stringify(nowDoc) === JSON.stringify(aDoc) && bySha(now) === bySha(a);
  }

  async refresh(name: string): Promise<void> {
    const credPrefix = keys.credentialsOf(this.prefix, name);
    try {
      const r = await this.client.txn([], [{ request_range: { key: b64(keys.machine(this.prefix, name)) } }, { request_range: { key: b64(credPrefix), range_end: prefixEnd(credPrefix) } }]);
      this.replace(name, r.ranges[0]?.[0], r.ranges[1] ?? []);
    } catch (err) {
      this.failed((err as Error).message);
      throw new StoreUnavailable(`${this.where}: ${(err as Error).message}`);
    }
  }

  /** A machine's keys as read back after a refused compare. */
  private replace(name: string, doc: KeyValue | undefined, creds: readonly KeyValue[]): void {
    if (!doc) {
      this.docs.delete(name);
      this.creds.delete(name);
      return;
    }
    this.docs.set(name, { doc: JSON.parse(doc.value) as StoredMachine['doc'], rev: doc.modRevision });
    const map: CredMap = new Map();
    for (const kv of creds) {
      const k = keyKind(this.prefix, kv.key);
      if (k?.kind === 'credential') map.set(k.sha256, { rec: JSON.parse(kv.value) as CredentialRecord, rev: kv.modRevision, lease: kv.lease });
    }
    this.creds.set(name, map);
  }

  /** The lease new credentials go under: shared for an hour, long enough for the last of them to be used. */
  private async credentialLease(): Promise<string> {
    const now = Date.now();
    if (this.credLease && now - this.credLease.at < ETCD_STORE.leaseReuseMs) return this.credLease.id;
    const ttl = Math.ceil((CREDENTIAL.eventsTtlMs + 2 * ETCD_STORE.leaseReuseMs) / 1000);
    this.credLease = { id: await this.client.leaseGrant(ttl), at: now };
    return this.credLease.id;
  }

  async remove(name: string): Promise<void> {
    try {
      await this.client.txn([], [{ request_delete_range: { key: b64(keys.machine(this.prefix, name)) } }]);
      this.docs.delete(name);
    } catch (err) {
      throw new StoreUnavailable(`${this.where}: ${(err as Error).message}`);
    }
  }

  async rearmRequests(): Promise<Map<string, Date>> {
    return new Map(); // `hvpxe rearm --store etcd` writes the machine's record itself; the watch brings it
  }

  async clearRearm(): Promise<void> {}

  async checkReadable(): Promise<void> {}

  health(): StoreHealth {
    return { kind: 'etcd', where: this.where, ...this.state };
  }

  private failed(error: string): void {
    this.state.failures++;
    this.state.lastError = error;
    if (!this.state.writable) return;
    this.state.writable = false;
    this.state.failingSince = new Date().toISOString();
    this.opts.log.error('machine store unavailable: no install script and no config until it is back; known machines boot their disk', { store: this.where, error });
  }

  private succeeded(): boolean {
    if (this.state.writable) return false;
    this.opts.log.info('machine store available again', { store: this.where, failingSince: this.state.failingSince, failures: this.state.failures });
    this.state.writable = true;
    this.state.failingSince = undefined;
    this.state.lastError = undefined;
    return true;
  }

  /** A linearizable read (it needs quorum) every probeMs; on recovery, the whole fleet is read again. */
  private async probe(): Promise<void> {
    if (this.closed || this.probing) return;
    this.probing = true;
    try {
      await this.client.range(keys.server(this.prefix, this.opts.server), { timeoutMs: ETCD_STORE.probeMs });
      if (this.succeeded()) await this.resync().catch((err: Error) => this.failed(err.message));
    } catch (err) {
      this.failed((err as Error).message);
    } finally {
      this.probing = false;
    }
  }

  /** This server's presence under its lease (granted anew when it expired during an outage). */
  private async announce(): Promise<void> {
    this.presenceLease = await this.client.leaseGrant(ETCD_STORE.presenceTtlS);
    await this.client.put(keys.server(this.prefix, this.opts.server), JSON.stringify({ url: this.opts.url?.() ?? '', since: new Date().toISOString() }), this.presenceLease);
    this.servers.set(this.opts.server, Date.now());
  }

  private async keepPresence(): Promise<void> {
    if (this.closed || !this.presenceLease) return;
    try {
      if (!(await this.client.leaseKeepAlive(this.presenceLease))) await this.announce();
    } catch {
      // the probe reports the store's health; the lease is renewed or granted again once etcd answers
    }
  }

  /** Reads every key under the prefix at one revision, in pages, and replaces this server's copy. */
  private async resync(): Promise<void> {
    const docs = new Map<string, { doc: StoredMachine['doc']; rev: number }>();
    const creds = new Map<string, CredMap>();
    const servers = new Map<string, number>();
    let from: string | undefined;
    let revision = 0;
    for (;;) {
      const page = await this.client.range(`${this.prefix}/`, { prefix: true, limit: ETCD_STORE.pageSize, revision, fromKey: from });
      revision ||= page.revision;
      for (const kv of page.kvs) this.take(kv, docs, creds, servers);
      if (!page.more || page.kvs.length === 0) break;
      from = `${page.kvs.at(-1)!.key}\0`;
    }
    this.docs = docs;
    this.creds = creds;
    this.servers = servers;
    this.revision = revision;
  }

  private take(kv: KeyValue, docs: typeof this.docs, creds: Map<string, CredMap>, servers: Map<string, number>): void {
    const k = keyKind(this.prefix, kv.key);
    if (k?.kind === 'machine') docs.set(k.name, { doc: JSON.parse(kv.value) as StoredMachine['doc'], rev: kv.modRevision });
    else if (k?.kind === 'credential') {
      const map = creds.get(k.name) ?? new Map();
      map.set(k.sha256, { rec: JSON.parse(kv.value) as CredentialRecord, rev: kv.modRevision, lease: kv.lease });
      creds.set(k.name, map);
    } else if (k?.kind === 'server') servers.set(k.server, kv.modRevision);
  }

  /** Watches the prefix from the copy's revision; when the watch ends (a member went away), reads again and watches anew. */
  private async watchLoop(): Promise<void> {
    while (!this.closed) {
      const w = this.client.watch(`${this.prefix}/`, this.revision + 1, (events, revision) => this.applyEvents(events, revision));
      this.stopWatch = w.stop;
      const why = await w.done;
      if (this.closed) return;
      this.opts.log.warn('etcd watch ended: reading the fleet again', { store: this.where, why });
      await sleep(300);
      await this.resync().catch(async (err: Error) => {
        this.failed(err.message);
        await sleep(1_000);
      });
    }
  }

  private applyEvents(events: WatchEvent[], revision: number): void {
    for (const e of events) {
      const k = keyKind(this.prefix, e.kv.key);
      if (k?.kind === 'machine') {
        const have = this.docs.get(k.name);
        if (have && have.rev >= e.kv.modRevision) continue;
        if (e.type === 'DELETE') {
          this.docs.delete(k.name);
          this.creds.delete(k.name);
        } else this.docs.set(k.name, { doc: JSON.parse(e.kv.value) as StoredMachine['doc'], rev: e.kv.modRevision });
      } else if (k?.kind === 'credential') {
        const map = this.creds.get(k.name) ?? new Map();
        const have = map.get(k.sha256);
        if (have && have.rev >= e.kv.modRevision) continue;
        if (e.type === 'DELETE') map.delete(k.sha256);
        else map.set(k.sha256, { rec: JSON.parse(e.kv.value) as CredentialRecord, rev: e.kv.modRevision, lease: e.kv.lease });
        this.creds.set(k.name, map);
      } else if (k?.kind === 'server') {
        if (e.type === 'DELETE') this.servers.delete(k.server);
        else this.servers.set(k.server, e.kv.modRevision);
      }
    }
    this.revision = Math.max(this.revision, revision);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    this.stopWatch?.();
    await this.watching?.catch(() => undefined);
    if (this.presenceLease) await this.client.leaseRevoke(this.presenceLease).catch(() => undefined);
    await this.client.close();
  }
}
