/**
 * The machine history's shape (<state dir>/machines.json) and the decisions taken when it is read
 * back. Pure: reading and writing the file is history.ts.
 *
 * Fail closed: what the history says decides whether a machine's disk is wiped on its next network
 * boot. So when hvpxe cannot know how an install ended, the machine is put on hold (local boot and
 * a message on its console) instead of being served the installer: a machine whose install was
 * running when hvpxe stopped (its SUCCEEDED may have been posted while nobody listened), and, after
 * a history that could not be read back was set aside, every machine until an operator re-arms it.
 */
import type { Machine } from './profiles.js';
import { MACHINE_NAME_RE } from './profiles.js';
import type { EventData } from './event-body.js';

/** Which server handed out the machine's latest install script, and when (install-claim.ts). */
export interface InstallClaim {
  server: string;
  at: string;
}

export const HISTORY_VERSION = 2;

export interface StoredEvent {
  at: string;
  event: string;
  data: EventData;
  note?: string;
}

/** A boot credential hvpxe handed out (only its sha256 is kept; the credential is never written). */
export interface CredentialRecord {
  sha256: string;
  issuedAt: string;
  /** The boot chain whose script carried it. */
  via: 'ipxe' | 'grub';
  /** The client that fetched that script. */
  address?: string;
  /** When the config was served with it (once). */
  configAt?: string;
  /** When the machine proved its TPM for it (machines enrolled by EK). */
  attestedAt?: string;
  /** When a node-report token was issued for it (once per boot credential, node-report.ts). */
  reportTokenAt?: string;
}

/** The machine's node-report token (only its sha256): what its installed node reports with (node-report.ts). */
export interface ReportTokenRecord {
  sha256: string;
  issuedAt: string;
  /** The server that issued it (a fleet). */
  via?: string;
}

/** A request hvpxe refused for this machine (a replayed or foreign credential, a TPM that did not match). */
export interface Refusal {
  at: string;
  what: 'config' | 'events' | 'attest' | 'report-token' | 'node-events';
  reason: string;
  address?: string;
}

export interface MachineActivity extends Pick<Machine, 'name' | 'group' | 'profile' | 'mac' | 'uuid' | 'hostname'> {
  matchedBy?: string;
  lastSeen?: string;
  lastAddress?: string;
  fetched: { ipxe?: string; grub?: string; config?: string; artifacts: Record<string, { at: string; bytes: number; status: number }> };
  progress?: { event: string; at: string; summary?: string };
  events: StoredEvent[];
  /** The machine reported a finished install: it boots from its disk until re-armed. */
  installed?: { at: string; via: string };
  /** Its config was served (by `via`, in a fleet) and no outcome (success or failure) has been reported since. */
  installing?: { since: string; via?: string };
  /** The latest install script handed out, and by which server (install-claim.ts decides). */
  claim?: InstallClaim;
  /** Which server served its latest script, config and event (a fleet's servers share one store). */
  servedBy?: { script?: string; config?: string; event?: string };
  /** hvpxe cannot tell whether this machine finished installing: local boot until an outcome or a re-arm. */
  hold?: { since: string; why: string };
  /** Local-boot scripts served since the install, newest last (a few kept: enough to see a loop). */
  localBoots?: string[];
  rearmedAt?: string;
  credentials?: CredentialRecord[];
  refusals?: Refusal[];
  /** The newest install's node-report token; a later install's replaces it. */
  reportToken?: ReportTokenRecord;
  /** The last post-install event the installed node reported (FALLBACK, UPGRADED); it decides nothing. */
  nodeReport?: { event: string; at: string; summary: string };
}

/** A history that could not be read back and was set aside: every machine is on hold until re-armed. */
export interface LostHistory {
  at: string;
  keptAs: string;
  why: string;
}

export interface HistoryDocument {
  version: typeof HISTORY_VERSION;
  savedAt: string;
  lost?: LostHistory;
  machines: MachineActivity[];
}

function fail(i: number, m: { name?: unknown }, what: string): never {
  throw new Error(`machines[${i}]${typeof m.name === 'string' ? ` (${m.name})` : ''}: ${what}`);
}

function checkMachine(m: Partial<MachineActivity>, i: number): void {
  if (!m || typeof m !== 'object' || typeof m.name !== 'string' || !MACHINE_NAME_RE.test(m.name) || typeof m.group !== 'string' || typeof m.profile !== 'string') {
    throw new Error(`machines[${i}] has no valid name, group and profile`);
  }
  if (!m.fetched || typeof m.fetched !== 'object' || !Array.isArray(m.events)) fail(i, m, 'has no fetched/events records');
  if (m.installed !== undefined && (typeof m.installed !== 'object' || typeof m.installed?.at !== 'string')) fail(i, m, 'installed must be {at, via}');
  if (m.installing !== undefined && (typeof m.installing !== 'object' || typeof m.installing?.since !== 'string')) fail(i, m, 'installing must be {since}');
  if (m.hold !== undefined && (typeof m.hold !== 'object' || typeof m.hold?.since !== 'string')) fail(i, m, 'hold must be {since, why}');
  if (m.credentials !== undefined && (!Array.isArray(m.credentials) || m.credentials.some((c) => typeof c?.sha256 !== 'string' || typeof c.issuedAt !== 'string'))) {
    fail(i, m, 'credentials must be a list of {sha256, issuedAt}');
  }
}

/**
 * Checks a machines.json text (version 1, as earlier hvpxe wrote it, or 2); throws with the reason
 * when it is not one hvpxe wrote. Pure.
 */
export function parseHistory(text: string): { machines: MachineActivity[]; lost?: LostHistory } {
  const doc = JSON.parse(text) as Partial<HistoryDocument> | { version?: unknown; machines?: unknown };
  if (!doc || typeof doc !== 'object' || (doc.version !== 1 && doc.version !== HISTORY_VERSION) || !Array.isArray(doc.machines)) {
    throw new Error(`not a version 1 or ${HISTORY_VERSION} machine history`);
  }
  (doc.machines as Array<Partial<MachineActivity>>).forEach(checkMachine);
  const lost = (doc as Partial<HistoryDocument>).lost;
  if (lost !== undefined && (typeof lost !== 'object' || typeof lost.at !== 'string')) throw new Error('lost must be {at, keptAs, why}');
  return { machines: doc.machines as MachineActivity[], ...(lost ? { lost } : {}) };
}

export function serialiseHistory(machines: MachineActivity[], lost: LostHistory | undefined, now: Date): string {
  const doc: HistoryDocument = { version: HISTORY_VERSION, savedAt: now.toISOString(), ...(lost ? { lost } : {}), machines };
  return JSON.stringify(doc, null, 2) + '\n';
}

/**
 * What a history read back at start-up means for its machines: one whose install was running when
 * hvpxe stopped may have reported its outcome while nobody listened, so it is held (local boot)
 * until it reports again or is re-armed. Returns the names put on hold. Mutates the activities.
 */
export function holdUnfinishedInstalls(machines: MachineActivity[], nowIso: string): string[] {
  const held: string[] = [];
  for (const a of machines) {
    if (!a.installing || a.installed || a.hold) continue;
    a.hold = { since: nowIso, why: `hvpxe stopped while its install was running (config served ${a.installing.since}): whether it finished is unknown` };
    held.push(a.name);
  }
  return held;
}

/** `hvpxe rearm`: the machine installs again on its next network boot. Mutates the activity. */
export function rearmActivity(a: MachineActivity, nowIso: string): void {
  a.installed = undefined;
  a.installing = undefined;
  a.hold = undefined;
  a.localBoots = undefined;
  a.claim = undefined;
  a.rearmedAt = nowIso;
}

/** Whether a machine is still held because an earlier history was lost (not re-armed since). Pure. */
export function heldByLostHistory(a: Pick<MachineActivity, 'rearmedAt' | 'installed'> | undefined, lost: LostHistory | undefined): boolean {
  if (!lost || a?.installed) return false;
  return !(a?.rearmedAt && Date.parse(a.rearmedAt) >= Date.parse(lost.at));
}
