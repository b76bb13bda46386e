/**
 * The sweep of import leases left by an agent that is gone: which leases it calls stale (another
 * boot's, this boot's whose process is gone, a label-less one older than the boot) and which it
 * never touches (a running agent's, anything not named hvagent-import-); containerd's lease list
 * read from bytes encoded by hand; the calls made against a stand-in for containerd's API; the
 * once-per-process rule and a failed sweep that only warns. No containerd, no root.
 */
import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  LEASE_OWNER_LABEL,
  ownerLabelValue,
  parseLeaseList,
  parseOwnerLabel,
  startTicksOf,
  staleImportLeases,
  sweepStaleImportLeases,
  sweepStaleImportLeasesOnce,
  type LeaseInfo,
} from '../../../agent/preload/lease-sweep.js';
import { GrpcSession } from '../../../agent/preload/grpc-session.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { fakeContainerdApi, failWith, grpcFrame, replyWith } from './fake-containerd-api.js';

const BOOT = '11111111-2222-3333-4444-555555555555';
const OTHER_BOOT = '99999999-8888-7777-6666-555555555555';
const BOOT_TIME_MS = Date.UTC(2026, 11, 6, 10, 0, 0);

const lease = (id: string, labels: Record<string, string> = {}, createdAtMs?: number): LeaseInfo => ({ id, labels, createdAtMs });
const owned = (id: string, owner: string, createdAtMs = BOOT_TIME_MS + 60_000) => lease(id, { [LEASE_OWNER_LABEL]: owner }, createdAtMs);

describe('staleImportLeases', () => {
  const alive = (pid: number, ticks: string) => pid === 700 && ticks === '5000';
  const judge = (leases: LeaseInfo[]) => staleImportLeases(leases, { bootId: BOOT, bootTimeMs: BOOT_TIME_MS }, alive);

  it("calls another boot's lease stale, whatever its PID", () => {
    expect(judge([owned('hvagent-import-a', `${OTHER_BOOT} 700 5000`)])).toEqual([{ id: 'hvagent-import-a', why: `made by hvagent (PID 700) in an earlier boot (${OTHER_BOOT})` }]);
  });

  it("calls this boot's lease stale when its process is gone, or its PID now names another process", () => {
    expect(judge([owned('hvagent-import-b', `${BOOT} 701 5000`), owned('hvagent-import-c', `${BOOT} 700 4999`)])).toEqual([
      { id: 'hvagent-import-b', why: 'made by hvagent PID 701 of this boot, which is no longer running' },
      { id: 'hvagent-import-c', why: 'made by hvagent PID 700 of this boot, which is no longer running' },
    ]);
  });

  it("keeps a running agent's lease", () => {
    expect(judge([owned('hvagent-import-d', `${BOOT} 700 5000`)])).toEqual([]);
  });

  it('never touches a lease not named hvagent-import-, even one carrying the label of a gone agent', () => {
    expect(judge([owned('ctr-import-e', `${OTHER_BOOT} 1 1`), owned('xhvagent-import-f', `${BOOT} 701 1`)])).toEqual([]);
  });

  it('calls a lease naming no agent stale only when it was made before this boot', () => {
    expect(
      judge([lease('hvagent-import-g', {}, BOOT_TIME_MS - 1), lease('hvagent-import-h', {}, BOOT_TIME_MS + 1), lease('hvagent-import-i', {}), lease('hvagent-import-j', { [LEASE_OWNER_LABEL]: 'not an owner' }, BOOT_TIME_MS + 1)]),
    ).toEqual([{ id: 'hvagent-import-g', why: 'made before this boot (2026-12-06T09:59:59.999Z) and naming no agent' }]);
  });
});

describe('the owner label', () => {
  it('names boot, PID and start time, and reads back', () => {
    expect(ownerLabelValue({ bootId: BOOT, pid: 42, startTicks: '123' })).toBe(`${BOOT} 42 123`);
    expect(parseOwnerLabel(`${BOOT} 42 123`)).toEqual({ bootId: BOOT, pid: 42, startTicks: '123' });
  });

  it('refuses what is not one', () => {
    for (const v of [undefined, '', `${BOOT} 0 1`, `${BOOT} 42`, `${BOOT} -1 1`, `boot 42 1`, `${BOOT} 42 1 x`, `${BOOT}  42 1`]) expect(parseOwnerLabel(v)).toBeUndefined();
  });
});

describe('startTicksOf', () => {
  it("takes the 22nd field, after a command name holding spaces and parentheses", () => {
    expect(startTicksOf('4242 (we(ird) n) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615\n')).toBe('987654');
  });

  it('reads what awk reads from a real process', async () => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      const stat = await readFile(`/proc/${child.pid}/stat`, 'utf8');
      expect(startTicksOf(stat)).toBe(stat.trim().split(' ')[21]);
      expect(startTicksOf(stat)).toMatch(/^\d+$/);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

// Protobuf by hand for the replies: a key byte, a varint length, the bytes.
function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 128) {
    out.push((n % 128) + 128);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}
const field = (n: number, body: Buffer | string) => {
  const b = Buffer.from(body);
  return Buffer.concat([Buffer.from([(n << 3) | 2, ...varint(b.length)]), b]);
};
const varintField = (n: number, v: number) => Buffer.from([n << 3, ...varint(v)]);
function leaseMessage(id: string, labels: Record<string, string>, created?: { seconds: number; nanos: number }): Buffer {
  const parts = [field(1, id)];
  if (created) parts.push(field(2, Buffer.concat([varintField(1, created.seconds), varintField(2, created.nanos)])));
  for (const [k, v] of Object.entries(labels)) parts.push(field(3, Buffer.concat([field(1, k), field(2, v)])));
  return Buffer.concat(parts);
}
const listReply = (leases: Buffer[]) => Buffer.concat(leases.map((l) => field(1, l)));

describe('parseLeaseList', () => {
  it("reads each lease's id, creation time and labels", () => {
    const reply = listReply([
      leaseMessage('hvagent-import-1', { 'containerd.io/gc.expire': '2026-12-07T10:00:00Z', [LEASE_OWNER_LABEL]: `${BOOT} 9 77` }, { seconds: 1796551200, nanos: 250_000_000 }),
      leaseMessage('bare', {}),
    ]);
    expect(parseLeaseList(reply)).toEqual([
      { id: 'hvagent-import-1', createdAtMs: 1796551200250, labels: { 'containerd.io/gc.expire': '2026-12-07T10:00:00Z', [LEASE_OWNER_LABEL]: `${BOOT} 9 77` } },
      { id: 'bare', createdAtMs: undefined, labels: {} },
    ]);
    expect(parseLeaseList(Buffer.alloc(0))).toEqual([]);
  });
});

async function thisProcess(): Promise<{ bootId: string; ticks: string }> {
  const stat = await readFile('/proc/self/stat', 'utf8');
  return { bootId: (await readFile('/proc/sys/kernel/random/boot_id', 'utf8')).trim(), ticks: stat.trim().split(') ')[1]!.split(' ')[19]! };
}

/** A process that was, and is no longer: its PID and start time. */
async function goneProcess(): Promise<{ pid: number; ticks: string }> {
  const child = spawn('sleep', ['30'], { stdio: 'ignore' });
  const ticks = (await readFile(`/proc/${child.pid}/stat`, 'utf8')).trim().split(' ')[21]!;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
  return { pid: child.pid!, ticks };
}

let serial = 0;
async function socketPath(): Promise<string> {
  return path.join(await mkdtemp(path.join(os.tmpdir(), 'hv-lease-sweep-')), `c${++serial}.sock`);
}

const deleteBody = (id: string) => grpcFrame(Buffer.concat([field(1, id), Buffer.from([0x10, 0x01])]));

describe('sweepStaleImportLeases against containerd', () => {
  it('lists the namespace, deletes only the stale import leases, each synchronously, and says why', async () => {
    const me = await thisProcess();
    const gone = await goneProcess();
    const socket = await socketPath();
    const created = { seconds: Math.floor(Date.now() / 1000), nanos: 0 };
    const reply = listReply([
      leaseMessage('hvagent-import-earlier-boot', { [LEASE_OWNER_LABEL]: `${OTHER_BOOT} ${process.pid} ${me.ticks}` }, created),
      leaseMessage('hvagent-import-mine', { [LEASE_OWNER_LABEL]: `${me.bootId} ${process.pid} ${me.ticks}` }, created),
      leaseMessage('hvagent-import-killed', { [LEASE_OWNER_LABEL]: `${me.bootId} ${gone.pid} ${gone.ticks}` }, created),
      leaseMessage('k3s-lease', { [LEASE_OWNER_LABEL]: `${OTHER_BOOT} 1 1` }, { seconds: 1000, nanos: 0 }),
      leaseMessage('hvagent-import-unlabelled-old', {}, { seconds: 1000, nanos: 0 }),
      leaseMessage('hvagent-import-unlabelled-new', {}, created),
    ]);
    const calls = await fakeContainerdApi(socket, (stream, p) => (p.endsWith('Leases/List') ? replyWith(reply) : replyWith(Buffer.alloc(0)))(stream, p));
    const session = await GrpcSession.open(socket, 5_000, 'test');
    try {
      const stale = await sweepStaleImportLeases(session, 'k8s.io', 5_000);
      expect(stale).toEqual([
        { id: 'hvagent-import-earlier-boot', why: `made by hvagent (PID ${process.pid}) in an earlier boot (${OTHER_BOOT})` },
        { id: 'hvagent-import-killed', why: `made by hvagent PID ${gone.pid} of this boot, which is no longer running` },
        { id: 'hvagent-import-unlabelled-old', why: 'made before this boot (1970-01-01T00:16:40.000Z) and naming no agent' },
      ]);
    } finally {
      session.close();
    }
    expect(calls.map((c) => String(c.headers[':path']))).toEqual([
      '/containerd.services.leases.v1.Leases/List',
      ...Array(3).fill('/containerd.services.leases.v1.Leases/Delete'),
    ]);
    expect(calls.every((c) => c.headers['containerd-namespace'] === 'k8s.io')).toBe(true);
    expect(calls[0]!.body).toEqual(grpcFrame(Buffer.alloc(0)));
    expect(calls.slice(1).map((c) => c.body)).toEqual(['hvagent-import-earlier-boot', 'hvagent-import-killed', 'hvagent-import-unlabelled-old'].map(deleteBody));
  });

  it('sweeps once per namespace and socket, and a sweep containerd refuses only warns', async () => {
    const socket = await socketPath();
    const calls = await fakeContainerdApi(socket, failWith(14, 'connection error: transport is closing'));
    const sink = new MemorySink();
    const log = new Logger(sink, undefined, 'debug');
    await sweepStaleImportLeasesOnce(socket, 'k8s.io', log, { connectTimeoutMs: 5_000, timeoutMs: 5_000 });
    await sweepStaleImportLeasesOnce(socket, 'k8s.io', log, { connectTimeoutMs: 5_000, timeoutMs: 5_000 });
    expect(calls).toHaveLength(1);
    const lines = sink.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 'warn', msg: 'stale import leases not swept: they expire 24 h after they were made', namespace: 'k8s.io' });
    expect(String(lines[0]!.error)).toContain('transport is closing');
    // Another namespace on the same containerd is its own sweep.
    await sweepStaleImportLeasesOnce(socket, 'other', log, { connectTimeoutMs: 5_000, timeoutMs: 5_000 });
    expect(calls).toHaveLength(2);
  });

  it('logs the leases it deleted, and nothing when there were none', async () => {
    const gone = await goneProcess();
    const me = await thisProcess();
    const socket = await socketPath();
    let reply = listReply([leaseMessage('hvagent-import-killed', { [LEASE_OWNER_LABEL]: `${me.bootId} ${gone.pid} ${gone.ticks}` })]);
    await fakeContainerdApi(socket, (stream, p) => (p.endsWith('Leases/List') ? replyWith(reply) : replyWith(Buffer.alloc(0)))(stream, p));
    const sink = new MemorySink();
    await sweepStaleImportLeasesOnce(socket, 'k8s.io', new Logger(sink, undefined, 'debug'), { connectTimeoutMs: 5_000, timeoutMs: 5_000 });
    expect(sink.lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ level: 'info', msg: 'stale import leases deleted, with what they held', leases: [`hvagent-import-killed: made by hvagent PID ${gone.pid} of this boot, which is no longer running`] }),
    ]);
    reply = listReply([]);
    const quiet = new MemorySink();
    await sweepStaleImportLeasesOnce(socket, 'ns2', new Logger(quiet, undefined, 'debug'), { connectTimeoutMs: 5_000, timeoutMs: 5_000 });
    expect(quiet.lines).toEqual([]);
  });
});
