import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { Redactor } from '../../../lib/redact.js';
import type { Guard, GuardContext, GuardName, GuardResult, StatusDocument } from '../../../agent/guard.js';
import { runGuards } from '../../../agent/runner.js';
import { statusFile } from '../../../agent/status.js';
import { defaultSettings, type AgentSettings } from '../../../agent/settings.js';

/** Test-double guards: scripted results, recording the order they ran in. */
function testDoubleGuard(name: GuardName, opts: Partial<Guard> & { results?: GuardResult[]; log?: string[] } = {}): Guard {
  const results = [...(opts.results ?? [{ status: 'ok' }])];
  return {
    name,
    dependsOn: opts.dependsOn ?? [],
    deadlineMs: opts.deadlineMs ?? 60_000,
    reconcile:
      opts.reconcile ??
      (async () => {
        opts.log?.push(name);
        return results.length > 1 ? results.shift()! : results[0]!;
      }),
    watch: opts.watch,
  };
}

function guardSet(guards: Guard[]): Partial<Record<GuardName, Guard>> {
  return Object.fromEntries(guards.map((g) => [g.name, g]));
}

let dir: string;
let sink: MemorySink;
let log: Logger;
let settings: AgentSettings;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hvagent-runner-'));
  sink = new MemorySink();
  log = new Logger(sink, new Redactor(), 'debug');
  settings = defaultSettings();
  settings.backoff = { initialMs: 5, maxMs: 40 };
  settings.retryFailedAfterMs = 20;
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function statusOnDisk(): Promise<StatusDocument> {
  return JSON.parse(await readFile(statusFile(dir), 'utf8')) as StatusDocument;
}

describe('runGuards ordering', () => {
  it('runs guards after their dependencies, whatever order they are listed in', async () => {
    const order: string[] = [];
    const guards = [
      testDoubleGuard('promotion', { dependsOn: ['rke2'], log: order }),
      testDoubleGuard('rke2', { dependsOn: ['registries', 'network-online'], log: order }),
      testDoubleGuard('registries', { dependsOn: ['network-online'], log: order }),
      testDoubleGuard('network-online', { log: order, reconcile: async () => { await new Promise((r) => setTimeout(r, 30)); order.push('network-online'); return { status: 'ok' }; } }),
    ];
    const r = await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['promotion', 'rke2', 'registries', 'network-online'], guards: guardSet(guards) });
    expect(r.ok).toBe(true);
    expect(order).toEqual(['network-online', 'registries', 'rke2', 'promotion']);
    expect(r.status.state).toBe('finished');
  });

  it('a skipped dependency counts as satisfied', async () => {
    const guards = [testDoubleGuard('vip', { results: [{ status: 'skip', reason: 'not a control-plane node' }] }), testDoubleGuard('promotion', { dependsOn: ['vip'] })];
    const r = await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['vip', 'promotion'], guards: guardSet(guards) });
    expect(r.ok).toBe(true);
    expect(r.status.guards.map((g) => [g.name, g.phase, g.detail])).toEqual([['vip', 'skipped', 'not a control-plane node'], ['promotion', 'succeeded', undefined]]);
  });

  it('in once mode a failed dependency blocks its dependents, and the outcome is not ok', async () => {
    const order: string[] = [];
    const guards = [
      testDoubleGuard('network-online', { log: order, results: [{ status: 'fail', diagnosis: 'bond mgmt-bo: 0 of 2 slaves active', hint: 'check the cables' }] }),
      testDoubleGuard('registries', { dependsOn: ['network-online'], log: order }),
      testDoubleGuard('longhorn-disk', { log: order }),
    ];
    const r = await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['network-online', 'registries', 'longhorn-disk'], guards: guardSet(guards) });
    expect(r.ok).toBe(false);
    expect(order.sort()).toEqual(['longhorn-disk', 'network-online']);
    const byName = Object.fromEntries(r.status.guards.map((g) => [g.name, g]));
    expect(byName['network-online']).toMatchObject({ phase: 'failed', lastError: 'bond mgmt-bo: 0 of 2 slaves active', hint: 'check the cables' });
    expect(byName.registries).toMatchObject({ phase: 'failed', lastError: 'not run: dependency network-online failed', attempts: 0 });
    expect(byName['longhorn-disk']!.phase).toBe('succeeded');
  });

  it('--guard runs only the named guards, without their dependencies', async () => {
    const order: string[] = [];
    const guards = [testDoubleGuard('network-online', { log: order }), testDoubleGuard('registries', { dependsOn: ['network-online'], log: order })];
    const r = await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['network-online', 'registries'], only: ['registries'], guards: guardSet(guards) });
    expect(r.ok).toBe(true);
    expect(order).toEqual(['registries']);
    expect(r.status.guards.map((g) => g.name)).toEqual(['registries']);
  });

  it('a guard name without a guard is a programming error, refused before anything runs', async () => {
    const order: string[] = [];
    const guards = [testDoubleGuard('network-online', { log: order }), testDoubleGuard('rke2', { dependsOn: ['image-preload'], log: order })];
    await expect(runGuards({ mode: 'run', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['network-online', 'image-preload', 'rke2'], guards: guardSet(guards) })).rejects.toThrow('runGuards: no guard named image-preload');
    expect(order).toEqual([]);
  });
});

describe('runGuards retries and deadlines', () => {
  it('retries a retry result with doubling backoff and succeeds, counting attempts', async () => {
    const g = testDoubleGuard('registries', { results: [{ status: 'retry', reason: 'a' }, { status: 'retry', reason: 'b' }, { status: 'retry', reason: 'c' }, { status: 'ok', detail: 'rendered' }] });
    const r = await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['registries'], guards: guardSet([g]) });
    expect(r.ok).toBe(true);
    expect(r.status.guards[0]).toMatchObject({ phase: 'succeeded', attempts: 4, detail: 'rendered' });
    expect(r.status.guards[0]!.lastError).toBeUndefined();
    const retryDelays = sink.lines.map((l) => JSON.parse(l) as { msg: string; retryInMs?: number }).filter((l) => l.msg === 'guard not there yet').map((l) => l.retryInMs);
    expect(retryDelays).toEqual([5, 10, 20]);
  });

  it('backoff is capped at the maximum', async () => {
    const results: GuardResult[] = [...Array.from({ length: 6 }, (_, i): GuardResult => ({ status: 'retry', reason: `r${i}` })), { status: 'ok' }];
    const g = testDoubleGuard('registries', { results });
    await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['registries'], guards: guardSet([g]) });
    const delays = sink.lines.map((l) => JSON.parse(l) as { msg: string; retryInMs?: number }).filter((l) => l.msg === 'guard not there yet').map((l) => l.retryInMs);
    expect(delays).toEqual([5, 10, 20, 40, 40, 40]);
  });

  it('ends in a diagnosis with the last reason when the deadline passes', async () => {
    // Each check takes 40 ms of the runner's clock, so the deadline passes at the fourth whatever
    // the machine's load.
    let n = 0;
    let clock = 1_000_000;
    const g = testDoubleGuard('network-online', { deadlineMs: 150, reconcile: async () => { clock += 40; return { status: 'retry', reason: `no default route (check ${++n})` }; } });
    const r = await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['network-online'], guards: guardSet([g]), now: () => clock });
    expect(r.ok).toBe(false);
    const s = r.status.guards[0]!;
    expect(s.phase).toBe('failed');
    expect(s.lastError).toMatch(new RegExp(`^not reached within 150 ms \\(${n} attempts\\): no default route \\(check ${n}\\)$`));
    expect(n).toBeGreaterThan(1);
    expect(s.finishedAt).toBeDefined();
  });

  it('the wait before a retry never runs past the deadline: it is clamped to what is left', async () => {
    settings.backoff = { initialMs: 60_000, maxMs: 60_000 };
    let clock = 1_000_000;
    const g = testDoubleGuard('network-online', { deadlineMs: 120, reconcile: async () => { clock += 50; return { status: 'retry', reason: 'no carrier' }; } });
    const r = await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['network-online'], guards: guardSet([g]), now: () => clock });
    expect(r.status.guards[0]!.phase).toBe('failed');
    const waits = sink.lines.map((l) => JSON.parse(l) as { msg: string; retryInMs?: number }).filter((l) => l.msg === 'guard not there yet').map((l) => l.retryInMs!);
    expect(waits.length).toBeGreaterThan(0);
    for (const w of waits) expect(w).toBeLessThanOrEqual(120);
  });

  it('a deadline in the settings overrides the guard default', async () => {
    settings.guards['network-online'] = { deadline: '100ms' };
    const g = testDoubleGuard('network-online', { deadlineMs: 3_600_000, reconcile: async () => ({ status: 'retry', reason: 'no carrier on mgmt-br' }) });
    const r = await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['network-online'], guards: guardSet([g]) });
    expect(r.status.guards[0]!.lastError).toMatch(/^not reached within 100 ms .*no carrier on mgmt-br$/);
  });

  it('a thrown error is retried like a retry result, with its message as the reason', async () => {
    let n = 0;
    const g = testDoubleGuard('registries', { reconcile: async () => { if (++n < 3) throw new Error(`EIO on attempt ${n}`); return { status: 'ok' }; } });
    const r = await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['registries'], guards: guardSet([g]) });
    expect(r.ok).toBe(true);
    expect(r.status.guards[0]!.attempts).toBe(3);
    expect(sink.lines.some((l) => l.includes('EIO on attempt 2'))).toBe(true);
  });

  it('aborts the reconcile signal at the deadline and abandons a reconcile that ignores it', async () => {
    let sawAbort = false;
    const aware = testDoubleGuard('network-online', { deadlineMs: 50, reconcile: (ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', () => { sawAbort = true; resolve({ status: 'retry', reason: 'interrupted at the deadline' }); })) });
    const deaf = testDoubleGuard('registries', { deadlineMs: 50, reconcile: () => new Promise<GuardResult>(() => undefined) });
    const r = await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['network-online', 'registries'], guards: guardSet([aware, deaf]), overrunGraceMs: 50 });
    expect(sawAbort).toBe(true);
    expect(r.status.guards[0]!.lastError).toMatch(/interrupted at the deadline$/);
    expect(r.status.guards[1]!.lastError).toMatch(/^reconcile did not return within the deadline/);
  });

  it('ends at the deadline once its abort fired, even when the wall clock says a little time is left', async () => {
    // A clock that stands still: by it the deadline never comes, though its timer fires.
    const t0 = Date.now();
    let calls = 0;
    const cut = testDoubleGuard('network-online', {
      deadlineMs: 50,
      reconcile: (ctx) => new Promise((resolve) => {
        calls++;
        ctx.signal.addEventListener('abort', () => resolve({ status: 'retry', reason: 'cut at the deadline' }));
      }),
    });
    await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['network-online'], guards: guardSet([cut]), now: () => t0 });
    expect(calls).toBe(1);
  });

  it('the deadline aborts the reconcile signal but not the stopping one, which only a stop aborts', async () => {
    const seen: Array<{ signal: boolean; stopping: boolean | undefined }> = [];
    const atDeadline = testDoubleGuard('network-online', {
      deadlineMs: 50,
      reconcile: (ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', () => {
        seen.push({ signal: ctx.signal.aborted, stopping: ctx.stopping?.aborted });
        resolve({ status: 'retry', reason: 'cut at the deadline' });
      })),
    });
    await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['network-online'], guards: guardSet([atDeadline]) });
    expect(seen).toEqual([{ signal: true, stopping: false }]);

    const stop = new AbortController();
    let stopped: GuardContext | undefined;
    const onStop = testDoubleGuard('network-online', {
      reconcile: (ctx) => new Promise((resolve) => {
        ctx.stopping!.addEventListener('abort', () => {
          stopped = ctx;
          resolve({ status: 'retry', reason: 'stopped' });
        });
        setTimeout(() => stop.abort(), 10);
      }),
    });
    await runGuards({ mode: 'run', rootDir: dir, settings, log, signal: stop.signal, names: ['network-online'], guards: guardSet([onStop]) });
    expect([stopped?.signal.aborted, stopped?.stopping?.aborted]).toEqual([true, true]);
  });

  it('in run mode a failed guard is tried again later and its dependents then run', async () => {
    const order: string[] = [];
    const guards = [
      testDoubleGuard('network-online', { log: order, results: [{ status: 'fail', diagnosis: 'no carrier' }, { status: 'ok' }] }),
      testDoubleGuard('registries', { dependsOn: ['network-online'], log: order }),
    ];
    const r = await runGuards({ mode: 'run', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['network-online', 'registries'], guards: guardSet(guards) });
    expect(r.ok).toBe(true);
    expect(order).toEqual(['network-online', 'network-online', 'registries']);
    expect(r.status.guards[0]).toMatchObject({ phase: 'succeeded', attempts: 2 });
  });
});

describe('runGuards status document, watch and stop', () => {
  it('writes the status document while running, with phase, attempts, last error and next retry', async () => {
    const seen: StatusDocument[] = [];
    let n = 0;
    const g = testDoubleGuard('registries', {
      reconcile: async () => {
        n++;
        if (n > 1) seen.push(await statusOnDisk());
        return n < 3 ? { status: 'retry', reason: `registry not answering (${n})` } : { status: 'ok', detail: 'done' };
      },
    });
    settings.backoff = { initialMs: 60, maxMs: 60 };
    await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['registries'], guards: guardSet([g]) });
    // Seen from inside attempt 2: the document on disk says attempt 2 is running after attempt 1's error.
    expect(seen[0]!.guards[0]).toMatchObject({ name: 'registries', phase: 'running', attempts: 2, lastError: 'registry not answering (1)' });
    expect(seen[0]!.state).toBe('running');
    expect(seen[0]!.pid).toBe(process.pid);
    const final = await statusOnDisk();
    expect(final.state).toBe('finished');
    expect(final.guards[0]).toMatchObject({ phase: 'succeeded', attempts: 3, detail: 'done' });
    expect(final.guards[0]!.startedAt).toBeDefined();
    expect(final.guards[0]!.finishedAt).toBeDefined();
  });

  it('records the next retry time while waiting', async () => {
    const stop = new AbortController();
    settings.backoff = { initialMs: 60_000, maxMs: 60_000 };
    const g = testDoubleGuard('registries', { reconcile: async () => ({ status: 'retry', reason: 'containerd socket missing' }) });
    const running = runGuards({ mode: 'run', rootDir: dir, settings, log, signal: stop.signal, names: ['registries'], guards: guardSet([g]) });
    let doc: StatusDocument | undefined;
    for (let i = 0; i < 200 && doc?.guards[0]?.phase !== 'waiting'; i++) {
      await new Promise((r) => setTimeout(r, 20));
      doc = await statusOnDisk().catch(() => undefined);
    }
    expect(doc!.guards[0]).toMatchObject({ phase: 'waiting', lastError: 'containerd socket missing' });
    const next = Date.parse(doc!.guards[0]!.nextRetryAt!);
    expect(next).toBeGreaterThan(Date.parse(doc!.guards[0]!.updatedAt) + 50_000);
    stop.abort();
    const r = await running;
    expect(r.stopped).toBe(true);
    expect(r.status.guards[0]).toMatchObject({ phase: 'stopped' });
    expect(r.status.guards[0]!.nextRetryAt).toBeUndefined();
  });

  it('in run mode watches after ok; a stop ends the watch, and the document says stopped', async () => {
    const stop = new AbortController();
    let watchCtx: GuardContext | undefined;
    let watchEnded = false;
    const g = testDoubleGuard('registries', {
      watch: async (ctx) => {
        watchCtx = ctx;
        ctx.progress('watching /etc/rancher/rke2/registries.yaml');
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
        watchEnded = true;
      },
    });
    const pending = testDoubleGuard('promotion', { reconcile: async () => ({ status: 'retry', reason: 'no promotion request yet' }) });
    settings.backoff = { initialMs: 60_000, maxMs: 60_000 };
    const running = runGuards({ mode: 'run', rootDir: dir, settings, log, signal: stop.signal, names: ['registries', 'promotion'], guards: guardSet([g, pending]) });
    for (let i = 0; i < 200 && !watchCtx; i++) await new Promise((r) => setTimeout(r, 10));
    let doc: StatusDocument | undefined;
    for (let i = 0; i < 200 && doc?.guards[0]?.phase !== 'watching'; i++) {
      await new Promise((r) => setTimeout(r, 10));
      doc = await statusOnDisk().catch(() => undefined);
    }
    expect(doc!.guards[0]).toMatchObject({ phase: 'watching', detail: 'watching /etc/rancher/rke2/registries.yaml' });
    stop.abort(new Error('stopped by SIGTERM'));
    const r = await running;
    expect(watchEnded).toBe(true);
    expect(r.stopped).toBe(true);
    const final = await statusOnDisk();
    expect(final.state).toBe('stopped');
    expect(final.stoppedAt).toBeDefined();
    expect(final.guards.map((x) => [x.name, x.phase])).toEqual([['registries', 'stopped'], ['promotion', 'stopped']]);
  });

  it('once mode never calls watch', async () => {
    let watched = false;
    const g = testDoubleGuard('registries', { watch: async () => { watched = true; } });
    const r = await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['registries'], guards: guardSet([g]) });
    expect(r.ok).toBe(true);
    expect(watched).toBe(false);
  });

  it('a broken watch is logged and the guard reconciles again', async () => {
    const stop = new AbortController();
    let reconciles = 0;
    let watches = 0;
    const g = testDoubleGuard('registries', {
      reconcile: async () => { reconciles++; return { status: 'ok' }; },
      watch: async (ctx) => {
        if (++watches === 1) throw new Error('inotify limit reached');
        stop.abort();
        await new Promise((r) => setTimeout(r, 1));
        void ctx;
      },
    });
    await runGuards({ mode: 'run', rootDir: dir, settings, log, signal: stop.signal, names: ['registries'], guards: guardSet([g]) });
    expect(reconciles).toBe(2);
    expect(sink.lines.some((l) => l.includes('inotify limit reached') && l.includes('"level":"warn"'))).toBe(true);
  });

  it('redacts registered secrets in logs and in the status document', async () => {
    log.redactor.add('s3cr3t-token-value');
    const g = testDoubleGuard('rke2', { results: [{ status: 'fail', diagnosis: 'server rejected token s3cr3t-token-value' }] });
    await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['rke2'], guards: guardSet([g]) });
    const text = await readFile(statusFile(dir), 'utf8');
    expect(text).not.toContain('s3cr3t-token-value');
    expect(text).toContain('server rejected token <redacted>');
    expect(sink.lines.join('')).not.toContain('s3cr3t-token-value');
  });
});

describe('runGuards stop during a reconcile pass', () => {
  it('aborts the pass signal and marks the guard stopped', async () => {
    const stop = new AbortController();
    let started = false;
    const g = testDoubleGuard('network-online', {
      reconcile: (ctx) => new Promise((resolve) => {
        started = true;
        ctx.signal.addEventListener('abort', () => resolve({ status: 'retry', reason: 'interrupted' }));
      }),
    });
    const dependent = testDoubleGuard('registries', { dependsOn: ['network-online'] });
    const running = runGuards({ mode: 'run', rootDir: dir, settings, log, signal: stop.signal, names: ['network-online', 'registries'], guards: guardSet([g, dependent]) });
    for (let i = 0; i < 200 && !started; i++) await new Promise((r) => setTimeout(r, 5));
    stop.abort();
    const r = await running;
    expect(r.stopped).toBe(true);
    expect(r.ok).toBe(false);
    expect(r.status.guards.map((x) => [x.name, x.phase])).toEqual([['network-online', 'stopped'], ['registries', 'stopped']]);
    expect(r.status.state).toBe('stopped');
  });
});

describe('runGuards: what the journal and the dependents see', () => {
  type Line = { msg: string; level: string; guard?: string; attempts?: number; detail?: string; reason?: string; diagnosis?: string; hint?: string };
  const lines = (): Line[] => sink.lines.map((l) => JSON.parse(l) as Line);

  it('logs each outcome under the guard it belongs to, with its attempts and why', async () => {
    const guards = [
      testDoubleGuard('network-online', { results: [{ status: 'retry', reason: 'no carrier' }, { status: 'ok', detail: 'mgmt-br up' }] }),
      testDoubleGuard('vip', { results: [{ status: 'skip', reason: 'not a control-plane node' }] }),
      testDoubleGuard('rke2', { results: [{ status: 'fail', diagnosis: 'token rejected', hint: 'check install.token' }] }),
    ];
    await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['network-online', 'vip', 'rke2'], guards: guardSet(guards) });
    const l = lines();
    expect(l).toContainEqual(expect.objectContaining({ msg: 'guard succeeded', level: 'info', guard: 'network-online', attempts: 2, detail: 'mgmt-br up' }));
    expect(l).toContainEqual(expect.objectContaining({ msg: 'guard skipped', level: 'info', guard: 'vip', reason: 'not a control-plane node' }));
    expect(l).toContainEqual(expect.objectContaining({ msg: 'guard failed', level: 'error', guard: 'rke2', attempts: 1, diagnosis: 'token rejected', hint: 'check install.token' }));
  });

  it('a deadline reached exactly by the first attempt ends after that one attempt, logged as such', async () => {
    let clock = 1_000_000;
    const g = testDoubleGuard('network-online', { deadlineMs: 100, reconcile: async () => { clock += 100; return { status: 'retry', reason: 'no default route' }; } });
    const r = await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['network-online'], guards: guardSet([g]), now: () => clock });
    expect(r.status.guards[0]).toMatchObject({ phase: 'failed', attempts: 1, lastError: 'not reached within 100 ms (1 attempt): no default route' });
    expect(lines()).toContainEqual(expect.objectContaining({ msg: 'guard deadline passed', level: 'error', guard: 'network-online', attempts: 1, diagnosis: 'not reached within 100 ms (1 attempt): no default route' }));
  });

  it('the reconcile signal stays live until the deadline', async () => {
    const g = testDoubleGuard('registries', { deadlineMs: 2_000, reconcile: async (ctx) => {
      await new Promise((r) => setTimeout(r, 5));
      return ctx.signal.aborted ? { status: 'retry', reason: 'aborted before the deadline' } : { status: 'ok' };
    } });
    const r = await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['registries'], guards: guardSet([g]) });
    expect(r.status.guards[0]).toMatchObject({ phase: 'succeeded', attempts: 1 });
  });

  it('in once mode a dependency that missed its deadline blocks its dependents', async () => {
    const order: string[] = [];
    const guards = [
      testDoubleGuard('network-online', { deadlineMs: 30, reconcile: async () => ({ status: 'retry', reason: 'no carrier' }) }),
      testDoubleGuard('registries', { dependsOn: ['network-online'], log: order }),
    ];
    const r = await runGuards({ mode: 'once', rootDir: dir, settings, log, signal: new AbortController().signal, names: ['network-online', 'registries'], guards: guardSet(guards) });
    expect(order).toEqual([]);
    expect(r.status.guards[1]).toMatchObject({ phase: 'failed', lastError: 'not run: dependency network-online failed' });
  });

  it('a stop during the backoff wait ends the guard: no further reconcile and no watch', async () => {
    const stop = new AbortController();
    settings.backoff = { initialMs: 60_000, maxMs: 60_000 };
    let reconciles = 0;
    let watched = false;
    const g = testDoubleGuard('registries', {
      deadlineMs: 3_600_000,
      reconcile: async () => (++reconciles === 1 ? { status: 'retry', reason: 'containerd not up' } : { status: 'ok' }),
      watch: async () => { watched = true; },
    });
    const running = runGuards({ mode: 'run', rootDir: dir, settings, log, signal: stop.signal, names: ['registries'], guards: guardSet([g]) });
    for (let i = 0; i < 400 && !lines().some((l) => l.msg === 'guard not there yet'); i++) await new Promise((r) => setTimeout(r, 5));
    stop.abort();
    const r = await running;
    expect(reconciles).toBe(1);
    expect(watched).toBe(false);
    expect(r.status.guards[0]!.phase).toBe('stopped');
  });

  it('a stop during a reconcile starts no watch', async () => {
    const stop = new AbortController();
    let started = false;
    let watched = false;
    const g = testDoubleGuard('registries', {
      reconcile: (ctx) => new Promise((resolve) => {
        started = true;
        ctx.signal.addEventListener('abort', () => resolve({ status: 'ok' }));
      }),
      watch: async () => { watched = true; },
    });
    const running = runGuards({ mode: 'run', rootDir: dir, settings, log, signal: stop.signal, names: ['registries'], guards: guardSet([g]) });
    for (let i = 0; i < 400 && !started; i++) await new Promise((r) => setTimeout(r, 5));
    stop.abort();
    await running;
    expect(watched).toBe(false);
  });
});
