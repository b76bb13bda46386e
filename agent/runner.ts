/**
 * The guard runner: runs each guard once its dependencies have succeeded, retries a
 * `retry` result with doubling backoff until the guard's deadline (then reports the last reason as
 * the diagnosis), keeps the state with watch() in `run` mode, writes the status document after every
 * change, and stops cleanly when its signal aborts (SIGTERM/SIGINT in the CLI).
 */
import path from 'node:path';
import type { HarvesterConfig } from '../config/types.js';
import type { Logger } from '../lib/logger.js';
import { sleep } from '../lib/wait.js';
import { GUARD_ORDER, type Guard, type GuardContext, type GuardName, type GuardResult, type StatusDocument } from './guard.js';
import { GUARDS } from './guards/index.js';
import { guardDeadlineMs, guardSettings, STATUS_PATH, type AgentSettings } from './settings.js';
import { METRICS_TEXTFILE_PATH } from './metrics.js';
import { StatusStore } from './status.js';
import type { BootstrapMode } from './mode.js';
import { readiness, type SettledOutcome } from './sd-notify.js';

export interface RunnerOptions {
  mode: 'run' | 'once';
  /** Every node path lives under this directory (`/` in production). */
  rootDir: string;
  settings: AgentSettings;
  config?: HarvesterConfig;
  log: Logger;
  /** Aborting stops the run: sleeps end, watches end, the status document says stopped. */
  signal: AbortSignal;
  /** `--guard`: run only these, without their dependencies. */
  only?: GuardName[];
  /** The guard set (default: all of GUARD_ORDER). */
  names?: GuardName[];
  /** The guards by name (default: agent/guards/index.ts); tests pass their own. */
  guards?: Partial<Record<GuardName, Guard>>;
  /** Time a reconcile may overrun the deadline (when it ignores its abort signal) before it is abandoned. */
  overrunGraceMs?: number;
  now?: () => number;
  /** Who bootstraps RKE2 (default: hvagent). */
  bootstrap?: BootstrapMode;
  /** Called once, when the pre-bootstrap guards have all settled (agent/sd-notify.ts), with the status line. */
  onReady?: (status: string) => void | Promise<void>;
}

export interface RunOutcome {
  /** Every guard succeeded or was skipped. */
  ok: boolean;
  stopped: boolean;
  status: StatusDocument;
}

type Outcome = 'ok' | 'skip' | 'failed' | 'stopped';

/** Notifies waiters whenever any guard's outcome changes. */
class Changes {
  private waiters: Array<() => void> = [];
  next(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const done = (): void => {
        signal.removeEventListener('abort', done);
        resolve();
      };
      this.waiters.push(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }
  notify(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function statusFile(rootDir: string): string {
  return path.join(rootDir, STATUS_PATH);
}

export async function runGuards(opts: RunnerOptions): Promise<RunOutcome> {
  const now = opts.now ?? Date.now;
  const iso = (t = now()): string => new Date(t).toISOString();
  const all = opts.names ?? GUARD_ORDER;
  const names = opts.only ? all.filter((n) => opts.only!.includes(n)) : all;
  const registry = opts.guards ?? GUARDS;
  const missing = names.filter((n) => !registry[n]);
  if (missing.length) throw new Error(`runGuards: no guard named ${missing.join(', ')}`);
  const grace = opts.overrunGraceMs ?? 10_000;
  const root = (p: string): string => (opts.rootDir === '/' ? p : path.join(opts.rootDir, p));
  const store = new StatusStore(statusFile(opts.rootDir), names, opts.mode, opts.log.redactor, opts.log, now, root(METRICS_TEXTFILE_PATH));
  const bootstrap = opts.bootstrap ?? { by: 'hvagent', why: 'not detected (default)' };
  store.setBootstrap(bootstrap);
  let readySent = false;
  const outcomes = new Map<GuardName, Outcome>();
  const changes = new Changes();
  const stop = opts.signal;

  const setOutcome = (name: GuardName, o: Outcome): void => {
    outcomes.set(name, o);
    changes.notify();
    if (readySent || !opts.onReady) return;
    const r = readiness(outcomes as Map<GuardName, SettledOutcome | 'stopped'>, names);
    if (!r.ready) return;
    readySent = true;
    store.setReady(r.status);
    opts.log.info('node prepared for the bootstrap', { status: r.status, bootstrapper: bootstrap.by });
    void Promise.resolve(opts.onReady(r.status)).catch((err: Error) => opts.log.warn('readiness notification failed', { error: err.message }));
  };

  function contextFor(guard: Guard, signal: AbortSignal): GuardContext {
    return {
      root,
      config: opts.config,
      log: opts.log.child({ guard: guard.name }),
      signal,
      settings: guardSettings(opts.settings, guard.name),
      progress: (detail) => store.update(guard.name, { detail }),
      report: (data) => store.update(guard.name, { data }),
      now,
      bootstrapper: bootstrap.by,
    };
  }

  /** Waits until every dependency succeeded or was skipped; says which one blocks otherwise. */
  async function waitForDependencies(name: GuardName, deps: GuardName[]): Promise<'ready' | 'stopped' | { why: string }> {
    for (;;) {
      if (stop.aborted) return 'stopped';
      const waitingFor: string[] = [];
      for (const d of deps) {
        const o = outcomes.get(d);
        if (o === 'ok' || o === 'skip') continue;
        if (o === 'failed' && opts.mode === 'once') return { why: `dependency ${d} failed` };
        waitingFor.push(o === 'failed' ? `${d} (failed; retried later)` : d);
      }
      if (waitingFor.length === 0) return 'ready';
      store.update(name, { phase: 'pending', detail: `waiting for ${waitingFor.join(', ')}` });
      await changes.next(stop);
    }
  }

  /** One reconcile pass, bounded by the deadline even if the guard ignores its signal. */
  async function reconcileOnce(guard: Guard, deadlineAt: number): Promise<GuardResult | 'stopped'> {
    const attempt = new AbortController();
    const remaining = Math.max(0, deadlineAt - now());
    const onDeadline = setTimeout(() => attempt.abort(new Error(`the ${guard.name} deadline passed`)), remaining);
    let abandon: NodeJS.Timeout | undefined;
    const overrun = new Promise<GuardResult>((resolve) => {
      abandon = setTimeout(
        () => resolve({ status: 'fail', diagnosis: `reconcile did not return within the deadline (+${Math.round(grace / 1000)} s) and was abandoned` }),
        remaining + grace,
      );
    });
    try {
      const result = await Promise.race([guard.reconcile(contextFor(guard, AbortSignal.any([stop, attempt.signal]))), overrun]);
      return stop.aborted ? 'stopped' : result;
    } catch (err) {
      if (stop.aborted) return 'stopped';
      return { status: 'retry', reason: message(err) };
    } finally {
      clearTimeout(onDeadline);
      clearTimeout(abandon);
    }
  }

  /** Reconciles with backoff until ok/skip/fail or the deadline. */
  async function reconcileUntilDeadline(guard: Guard): Promise<Outcome> {
    const name = guard.name;
    const log = opts.log.child({ guard: name });
    const deadlineMs = guardDeadlineMs(opts.settings, name, guard.deadlineMs);
    const start = now();
    const deadlineAt = start + deadlineMs;
    let delay = opts.settings.backoff.initialMs;
    store.update(name, { startedAt: iso(start), finishedAt: undefined, nextRetryAt: undefined, hint: undefined });
    for (;;) {
      const attempts = store.get(name).attempts + 1;
      store.update(name, { phase: 'running', attempts, nextRetryAt: undefined });
      await store.flush();
      const r = await reconcileOnce(guard, deadlineAt);
      if (r === 'stopped') return 'stopped';
      switch (r.status) {
        case 'ok':
          store.update(name, { phase: 'succeeded', detail: r.detail, lastError: undefined, finishedAt: iso() });
          log.info('guard succeeded', { attempts, detail: r.detail });
          return 'ok';
        case 'skip':
          store.update(name, { phase: 'skipped', detail: r.reason, lastError: undefined, finishedAt: iso() });
          log.info('guard skipped', { reason: r.reason });
          return 'skip';
        case 'fail':
          store.update(name, { phase: 'failed', lastError: r.diagnosis, hint: r.hint, finishedAt: iso() });
          log.error('guard failed', { attempts, diagnosis: r.diagnosis, hint: r.hint });
          return 'failed';
        case 'retry': {
          const elapsed = now() - start;
          if (elapsed >= deadlineMs) {
            const diagnosis = `not reached within ${formatMs(deadlineMs)} (${attempts} attempt${attempts === 1 ? '' : 's'}): ${r.reason}`;
            store.update(name, { phase: 'failed', lastError: diagnosis, finishedAt: iso() });
            log.error('guard deadline passed', { attempts, diagnosis });
            return 'failed';
          }
          const wait = Math.min(delay, deadlineMs - elapsed);
          store.update(name, { phase: 'waiting', lastError: r.reason, nextRetryAt: iso(now() + wait) });
          log.info('guard not there yet', { attempts, reason: r.reason, retryInMs: wait });
          await store.flush();
          try {
            await sleep(wait, stop);
          } catch {
            return 'stopped';
          }
          delay = Math.min(delay * 2, opts.settings.backoff.maxMs);
        }
      }
    }
  }

  async function driveGuard(name: GuardName): Promise<void> {
    const guard = registry[name]!;
    const deps = opts.only ? [] : guard.dependsOn.filter((d) => names.includes(d));
    for (;;) {
      const ready = await waitForDependencies(name, deps);
      if (ready === 'stopped') return setOutcome(name, 'stopped');
      if (ready !== 'ready') {
        store.update(name, { phase: 'failed', detail: undefined, lastError: `not run: ${ready.why}`, finishedAt: iso() });
        opts.log.error('guard not run', { guard: name, reason: ready.why });
        return setOutcome(name, 'failed');
      }
      const o = await reconcileUntilDeadline(guard);
      setOutcome(name, o);
      if (o === 'stopped' || o === 'skip') return;
      if (o === 'failed') {
        if (opts.mode === 'once') return;
        const retryAt = now() + opts.settings.retryFailedAfterMs;
        store.update(name, { nextRetryAt: iso(retryAt) });
        try {
          await sleep(opts.settings.retryFailedAfterMs, stop);
        } catch {
          return setOutcome(name, 'stopped');
        }
        continue;
      }
      if (opts.mode === 'once' || !guard.watch) return;
      store.update(name, { phase: 'watching' });
      try {
        await guard.watch(contextFor(guard, stop));
        if (stop.aborted) return;
        store.update(name, { phase: 'succeeded' });
        return;
      } catch (err) {
        if (stop.aborted) return;
        // The watch broke (not a stop): reconcile again from the top, with a fresh deadline.
        store.update(name, { phase: 'waiting', lastError: `watch ended: ${message(err)}` });
        opts.log.warn('guard watch ended; reconciling again', { guard: name, error: message(err) });
        try {
          await sleep(opts.settings.backoff.initialMs, stop);
        } catch {
          return;
        }
      }
    }
  }

  opts.log.info('hvagent starting', { mode: opts.mode, guards: names, root: opts.rootDir, bootstrapper: bootstrap.by, why: bootstrap.why });
  await Promise.all(names.map((n) => driveGuard(n)));

  const stopped = stop.aborted;
  if (stopped) {
    for (const g of store.snapshot().guards) {
      if (['pending', 'running', 'waiting', 'watching'].includes(g.phase)) {
        store.update(g.name, { phase: 'stopped', nextRetryAt: undefined, finishedAt: iso() });
      }
    }
  }
  store.setState(stopped ? 'stopped' : 'finished');
  await store.flush();
  const status = store.snapshot();
  const ok = status.guards.every((g) => g.phase === 'succeeded' || g.phase === 'skipped');
  opts.log.info(stopped ? 'hvagent stopped' : 'hvagent finished', { ok });
  return { ok, stopped, status };
}

export function formatMs(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${Math.round(ms / 100) / 10} s`;
  return `${Math.round(ms / 6000) / 10} min`;
}
