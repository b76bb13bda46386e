/**
 * Import leases left by an agent that is gone. Each API import holds what it writes with a lease
 * (api-import.ts) and deletes it when it ends; an agent killed mid-import (SIGKILL, a crash, the
 * power lost) leaves its lease behind, and the content written so far stays on disk until the lease
 * expires (24 h, as ctr's), beside the next attempt's own copy: on a node preloading gigabytes,
 * space that the retry may need. So every lease names the agent that made it (boot id, PID and the
 * process's start time, which a reused PID does not share), and at its first import an agent
 * deletes the leases of agents that cannot still be running: another boot's, or this boot's whose
 * process is gone. A lease it cannot prove stale is left to its expiry. Services and fields:
 * containerd/containerd api/services/leases/v1/leases.proto.
 */
import { readFile } from 'node:fs/promises';
import type { Logger } from '../../lib/logger.js';
import { GrpcSession } from './grpc-session.js';
import { bytesField, bytesOf, readFields, stringsOf, varintField } from './protobuf.js';

/** The id every import lease starts with; nothing else is ever swept. */
export const IMPORT_LEASE_PREFIX = 'hvagent-import-';
/** The label naming the agent that holds the lease: `<boot id> <pid> <start time in clock ticks>`. */
export const LEASE_OWNER_LABEL = 'hvinstall.io/hvagent';

const LIST_LEASES = '/containerd.services.leases.v1.Leases/List';
const DELETE_LEASE = '/containerd.services.leases.v1.Leases/Delete';

export interface AgentProcess {
  bootId: string;
  pid: number;
  /** /proc/<pid>/stat's starttime: with the PID and the boot, names one process. */
  startTicks: string;
}

export interface LeaseInfo {
  id: string;
  createdAtMs?: number;
  labels: Record<string, string>;
}

export interface StaleLease {
  id: string;
  why: string;
}

export function ownerLabelValue(p: AgentProcess): string {
  return `${p.bootId} ${p.pid} ${p.startTicks}`;
}

export function parseOwnerLabel(v: string | undefined): AgentProcess | undefined {
  const m = /^([0-9a-f-]{36}) ([1-9]\d*) (\d+)$/.exec(v ?? '');
  return m ? { bootId: m[1]!, pid: Number(m[2]), startTicks: m[3]! } : undefined;
}

/**
 * The import leases whose agent cannot be running, each with why. `alive` answers for a process of
 * this boot; `bootTimeMs` is when this boot began (a lease made before it has outlived its agent).
 * Pure.
 */
export function staleImportLeases(
  leases: readonly LeaseInfo[],
  now: { bootId: string; bootTimeMs: number },
  alive: (pid: number, startTicks: string) => boolean,
): StaleLease[] {
  const out: StaleLease[] = [];
  for (const l of leases) {
    if (!l.id.startsWith(IMPORT_LEASE_PREFIX)) continue;
    const owner = parseOwnerLabel(l.labels[LEASE_OWNER_LABEL]);
    if (owner && owner.bootId !== now.bootId) out.push({ id: l.id, why: `made by hvagent (PID ${owner.pid}) in an earlier boot (${owner.bootId})` });
    else if (owner && !alive(owner.pid, owner.startTicks)) out.push({ id: l.id, why: `made by hvagent PID ${owner.pid} of this boot, which is no longer running` });
    else if (!owner && l.createdAtMs !== undefined && l.createdAtMs < now.bootTimeMs) {
      out.push({ id: l.id, why: `made before this boot (${new Date(l.createdAtMs).toISOString()}) and naming no agent` });
    }
  }
  return out;
}

/** A Timestamp message (seconds 1, nanos 2) as milliseconds. */
function timestampMs(buf: Buffer): number {
  let seconds = 0;
  let nanos = 0;
  for (const f of readFields(buf)) {
    if (f.field === 1 && typeof f.value === 'number') seconds = f.value;
    if (f.field === 2 && typeof f.value === 'number') nanos = f.value;
  }
  return seconds * 1000 + Math.floor(nanos / 1e6);
}

/** ListResponse (leases 1) → each Lease (id 1, created_at 2, labels 3: map entries of key 1, value 2). */
export function parseLeaseList(reply: Buffer): LeaseInfo[] {
  return bytesOf(reply, 1).map((lease) => {
    const created = bytesOf(lease, 2)[0];
    const labels: Record<string, string> = {};
    for (const entry of bytesOf(lease, 3)) labels[stringsOf(entry, 1)[0] ?? ''] = stringsOf(entry, 2)[0] ?? '';
    return { id: stringsOf(lease, 1)[0] ?? '', createdAtMs: created ? timestampMs(created) : undefined, labels };
  });
}

/** /proc/<pid>/stat's 22nd field; the command name (2nd, in parentheses) may hold spaces and parentheses. */
export function startTicksOf(stat: string): string | undefined {
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
}

async function startTicks(pid: number | 'self'): Promise<string | undefined> {
  return startTicksOf(await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => ''));
}

let me: Promise<AgentProcess | undefined> | undefined;

/** This process, as its leases name it (read once); undefined where /proc does not say (its leases then name no agent). */
export function thisAgentProcess(): Promise<AgentProcess | undefined> {
  me ??= (async () => {
    const [bootId, ticks] = await Promise.all([readFile('/proc/sys/kernel/random/boot_id', 'utf8').then((t) => t.trim(), () => ''), startTicks('self')]);
    return parseOwnerLabel(`${bootId} ${process.pid} ${ticks ?? ''}`);
  })();
  return me;
}

async function bootTimeMs(): Promise<number> {
  const m = /^btime (\d+)$/m.exec(await readFile('/proc/stat', 'utf8'));
  if (!m) throw new Error('/proc/stat has no btime line');
  return Number(m[1]) * 1000;
}

/**
 * Deletes the stale import leases of `namespace` and returns them. Each delete is synchronous
 * (DeleteRequest.sync): containerd's garbage collection has freed their content when it returns.
 */
export async function sweepStaleImportLeases(session: GrpcSession, namespace: string, timeoutMs: number): Promise<StaleLease[]> {
  const [self, bootMs, reply] = await Promise.all([thisAgentProcess(), bootTimeMs(), session.unary(LIST_LEASES, Buffer.alloc(0), { namespace, timeoutMs })]);
  if (!self) throw new Error('/proc names no boot id or start time for this process: no lease can be told stale');
  const leases = parseLeaseList(reply);
  const running = new Map<number, string | undefined>();
  for (const l of leases) {
    const owner = parseOwnerLabel(l.labels[LEASE_OWNER_LABEL]);
    if (owner && owner.bootId === self.bootId && !running.has(owner.pid)) running.set(owner.pid, await startTicks(owner.pid));
  }
  const stale = staleImportLeases(leases, { bootId: self.bootId, bootTimeMs: bootMs }, (pid, ticks) => running.get(pid) === ticks);
  for (const s of stale) await session.unary(DELETE_LEASE, Buffer.concat([bytesField(1, s.id), varintField(2, 1)]), { namespace, timeoutMs });
  return stale;
}

const swept = new Set<string>();

/**
 * The sweep, once per agent process and containerd namespace (a stale lease is always an earlier
 * process's), before its first import. Best effort: a sweep that fails is logged and not retried,
 * and the leases it missed expire.
 */
export async function sweepStaleImportLeasesOnce(socket: string, namespace: string, log: Logger, o: { connectTimeoutMs: number; timeoutMs: number }): Promise<void> {
  const key = `${socket}\0${namespace}`;
  if (swept.has(key)) return;
  swept.add(key);
  try {
    const session = await GrpcSession.open(socket, o.connectTimeoutMs, 'sweeping stale import leases');
    try {
      const stale = await sweepStaleImportLeases(session, namespace, o.timeoutMs);
      if (stale.length) log.info('stale import leases deleted, with what they held', { namespace, leases: stale.map((s) => `${s.id}: ${s.why}`) });
    } finally {
      session.close();
    }
  } catch (err) {
    log.warn('stale import leases not swept: they expire 24 h after they were made', { namespace, error: (err as Error).message });
  }
}
