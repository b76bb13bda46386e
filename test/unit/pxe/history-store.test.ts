/**
 * The history store under faults: a write that fails is retried without anyone asking again and
 * reported until one succeeds, later writes are never stopped, saveNow() says when the history is
 * not on disk, flush() gives up within its time, and what cannot be read refuses (not "empty").
 * The faults are real: the state directory replaced by a file (EEXIST), a history that is a
 * directory (EISDIR).
 */
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HistoryStore, requestRearm } from '../../../pxe/history.js';
import type { MachineActivity } from '../../../pxe/history-document.js';
import { waitUntil } from '../../../lib/wait.js';
import { Logger, MemorySink } from '../../../lib/logger.js';

let base: string;
let dir: string;
beforeEach(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'hvpxe-store-'));
  dir = path.join(base, 'state');
});
afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

const machine = (over: Partial<MachineActivity> = {}): MachineActivity => ({ name: 'node-1', group: 'rack1', profile: 'hv', fetched: { artifacts: {} }, events: [], ...over });

/** Makes the state directory unusable (a file where it was) or usable again. */
async function breakDir(broken: boolean): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  if (broken) await writeFile(dir, 'not a directory');
  else await mkdir(dir);
}

describe('HistoryStore writes', () => {
  it('retries a failed write by itself, reports it meanwhile, and saves the newest activity once it can', async () => {
    const sink = new MemorySink();
    const store = new HistoryStore(dir, new Logger(sink));
    await store.load();
    let activity = [machine()];
    store.track(() => ({ machines: activity }));
    await breakDir(true);
    await expect(store.saveNow()).rejects.toThrow(`cannot write ${path.join(dir, 'machines.json')}: EEXIST: file already exists, mkdir '${dir}'`);
    expect(store.health()).toMatchObject({ writable: false, failures: 1, lastError: expect.stringContaining('EEXIST'), failingSince: expect.any(String) });
    expect(sink.lines.join('')).toContain('cannot save the machine history; retrying');
    // More changes while broken; nobody asks for another write once it is repaired.
    activity = [machine({ installed: { at: '2026-12-01T10:00:00.000Z', via: 'SUCCEEDED webhook' } })];
    store.save();
    await breakDir(false);
    await waitUntil(async () => (store.health().writable ? { done: true as const, value: true } : { done: false as const, reason: JSON.stringify(store.health()) }), { what: 'the retried write', timeoutMs: 20_000, intervalMs: 100 });
    expect(JSON.parse(await readFile(path.join(dir, 'machines.json'), 'utf8')).machines[0].installed.via).toBe('SUCCEEDED webhook');
    expect(store.health()).toEqual({ writable: true, failures: expect.any(Number), failingSince: undefined, lastError: undefined });
    expect(sink.lines.join('')).toContain('machine history saved again');
    expect(await store.flush()).toBe(true);
  });

  it('a body that cannot be serialised does not stop later writes', async () => {
    const store = new HistoryStore(dir, new Logger(new MemorySink()));
    await store.load();
    const bad = machine();
    (bad as unknown as { loop: unknown }).loop = bad; // JSON.stringify throws on a circle
    let activity: MachineActivity[] = [bad];
    store.track(() => ({ machines: activity }));
    await expect(store.saveNow()).rejects.toThrow(/circular/i);
    activity = [machine({ rearmedAt: 'x' })];
    await store.saveNow();
    expect(JSON.parse(await readFile(path.join(dir, 'machines.json'), 'utf8')).machines[0].rearmedAt).toBe('x');
  });

  it('flush gives up within its time when nothing can be written, and says so', async () => {
    const sink = new MemorySink();
    const store = new HistoryStore(dir, new Logger(sink));
    await store.load();
    store.track(() => ({ machines: [machine()] }));
    await breakDir(true);
    store.save();
    expect(await store.flush(600)).toBe(false);
    expect(sink.lines.join('')).toContain('machine history not saved before stopping');
  });

  it('coalesces: writes requested while one is in flight share the next one', async () => {
    const store = new HistoryStore(dir, new Logger(new MemorySink()));
    await store.load();
    let snapshots = 0;
    store.track(() => {
      snapshots++;
      return { machines: [machine()] };
    });
    for (let i = 0; i < 50; i++) store.save();
    await store.saveNow();
    expect(snapshots).toBeLessThanOrEqual(3);
    expect(snapshots).toBeGreaterThanOrEqual(1);
  });
});

describe('HistoryStore reads', () => {
  it('refuses a history it cannot read (exit 2) instead of starting empty', async () => {
    await mkdir(path.join(dir, 'machines.json'), { recursive: true });
    const store = new HistoryStore(dir, new Logger(new MemorySink()));
    const err = await store.load().catch((e: Error & { exitCode?: number; hint?: string }) => e);
    expect(err).toMatchObject({ message: `cannot read the machine history ${path.join(dir, 'machines.json')}: EISDIR`, exitCode: 2 });
    expect((err as { hint: string }).hint).toMatch(/^hvpxe needs it to know which machines finished installing/);
    await expect(store.checkReadable()).rejects.toThrow(/EISDIR/);
  });

  it('a missing file is an empty history, and readable at reload', async () => {
    const store = new HistoryStore(dir, new Logger(new MemorySink()));
    expect(await store.load()).toEqual({ machines: [] });
    await expect(store.checkReadable()).resolves.toBeUndefined();
  });

  it('keeps a lost history marked lost across a save and a load', async () => {
    await mkdir(dir);
    await writeFile(path.join(dir, 'machines.json'), 'garbage');
    const store = new HistoryStore(dir, new Logger(new MemorySink()));
    const loaded = await store.load();
    expect(loaded.lost?.keptAs).toMatch(/machines\.json\.corrupt-/);
    store.track(() => ({ machines: [], lost: loaded.lost }));
    await store.saveNow();
    expect((await new HistoryStore(dir, new Logger(new MemorySink())).load()).lost).toEqual(loaded.lost);
  });

  it('re-arm requests are files named by machine (dots allowed, nothing that leaves the directory)', async () => {
    const store = new HistoryStore(dir, new Logger(new MemorySink()));
    await store.load();
    await requestRearm(dir, 'node-2.rack1.example.com');
    await expect(requestRearm(dir, '../x')).rejects.toThrow(/is not a machine name/);
    await expect(requestRearm(dir, '.hidden')).rejects.toThrow(/is not a machine name/);
    await writeFile(path.join(dir, 'rearm', 'Bad Name'), '');
    expect([...(await store.rearmRequests()).keys()]).toEqual(['node-2.rack1.example.com']);
    await store.clearRearm('node-2.rack1.example.com');
    expect((await store.rearmRequests()).size).toBe(0);
  });
});
