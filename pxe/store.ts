/**
 * Where hvpxe keeps what decides what a machine gets: its history (installed, installing, held),
 * its install claims, its boot credentials, its re-arm requests and its events. Two backends:
 * - the file store (store-file.ts): one server, nothing to run; the history in <state dir>;
 * - the etcd store (store-etcd.ts): several servers, one truth; compare-and-swap per machine,
 *   a watch keeping every server's view current, leases for credentials and server presence.
 * A Kubernetes-resource store (a Rancher management cluster) is the next backend, on paper in
 * docs/fleet.md.
 *
 * Every change to a machine is one `update`: the change is applied to a copy of the machine's
 * current record and written only if nobody wrote that record meanwhile, else re-applied to what
 * is there now. A change must therefore decide from the record it is given, never from an earlier
 * read. When the store cannot be written, `update` throws StoreUnavailable and nothing changed: a
 * route then fails closed (no install script, no config; the disk for a known machine).
 */
import type { LostHistory, MachineActivity } from './history-document.js';

export type StoreKind = 'memory' | 'file' | 'etcd';

/** What /healthz, /metrics and the log say about the store. */
export interface StoreHealth {
  kind: StoreKind;
  /** The file, or the endpoints and prefix. */
  where?: string;
  /** The last write (or, for etcd, the last probe) succeeded. */
  writable: boolean;
  /** Failed writes or probes since start. */
  failures: number;
  failingSince?: string;
  lastError?: string;
}

/**
 * How an update must be stored before it resolves: 'must' throws StoreUnavailable (and leaves the
 * record as it was) when it cannot; 'try' waits for the write but keeps the change in this
 * server's view when it fails (the file store retries it); 'soon' does not wait (the file store
 * coalesces; etcd writes in the background). The etcd store writes every update through.
 */
export type Durability = 'must' | 'try' | 'soon';

/** The store could not be read or written: nothing was changed. */
export class StoreUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StoreUnavailable';
  }
}

export interface MachineStore {
  readonly kind: StoreKind;
  /** Loads (file) or connects and reads everything (etcd); throws when it cannot (exit 2). */
  open(): Promise<void>;
  /** Set when an earlier history could not be read back (file store): machines are held until re-armed. */
  readonly lost: LostHistory | undefined;
  /** A machine's record as this server sees it now (etcd: its watched copy); do not change it. */
  get(name: string): MachineActivity | undefined;
  all(): MachineActivity[];
  readonly size: number;
  /** Reads the machine again from the store when this server's copy may lag (etcd; the file store's copy is the truth). */
  refresh(name: string): Promise<void>;
  /**
   * Applies `change` to a copy of the machine's record (created by `create` when there is none)
   * and stores it unless someone wrote the record meanwhile (then re-applies it to the new one).
   * Returns what `change` returned; throws StoreUnavailable when it cannot be stored (per `durable`).
   */
  update<T>(name: string, create: () => MachineActivity, change: (a: MachineActivity) => T, durable: Durability): Promise<T>;
  /** Forgets a machine (a default-group machine making room for another). */
  remove(name: string): Promise<void>;
  /** Re-arm requests waiting to be applied, by machine, with when each was made (file store: `hvpxe rearm`'s files). */
  rearmRequests(): Promise<Map<string, Date>>;
  clearRearm(name: string): Promise<void>;
  /** The servers up now (etcd: presence under a lease); the file store knows only itself. */
  liveServers(): ReadonlySet<string>;
  /** Throws when a reload must be refused (the history exists but cannot be read). */
  checkReadable(): Promise<void>;
  health(): StoreHealth;
  /** Last writes (bounded in time), then let go of the store. */
  close(): Promise<void>;
}
