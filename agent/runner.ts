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
import { loadGuards } from './guards/index.js';
import { guardDeadlineMs, guardSettings, type AgentSettings } from './settings.js';
import { METRICS_TEXTFILE_PATH } from './metrics.js';
import { StatusStore, statusFile } from './status.js';
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
  /** The guards by name (default: those of `names`, loaded from agent/guards/index.ts); tests pass their own. */
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

export async function runGuards(opts: RunnerOptions): Promise<RunOutcome> {
  const names = selectedGuards(opts);
  const run = new GuardRun(opts, names, opts.guards ?? (await loadGuards(names)));
  opts.log.info('hvagent starting', { mode: opts.mode, guards: run.names, root: opts.rootDir, bootstrapper: run.bootstrap.by, why: run.bootstrap.why });
  // Every guard is driven at once; each waits only for its own dependencies.
  await Promise.all(run.names.map((n) => run.drive(n)));
  return run.finish();
}

/** The guards a run drives: its set (default: all), narrowed by `--guard`. */
function selectedGuards(opts: RunnerOptions): GuardName[] {
  const all = opts.names ?? GUARD_ORDER;
  return opts.only ? all.filter((n) => opts.only!.includes(n)) : all;
}

/** One run of the guard set: the status store, the outcomes so far, and each guard's loop. */
class GuardRun {
  readonly names: GuardName[];
  readonly bootstrap: BootstrapMode;
  private readonly registry: Partial<Record<GuardName, Guard>>;
  private readonly now: () => number;
  private readonly grace: number;
  private readonly store: StatusStore;
  private readonly outcomes = new Map<GuardName, Outcome>();
  private readonly changes = new Changes();
  private readonly stop: AbortSignal;
  private readySent = false;

  constructor(
    private readonly opts: RunnerOptions,
    names: GuardName[],
    registry: Partial<Record<GuardName, Guard>>,
  ) {
    this.now = opts.now ?? Date.now;
    this.names = names;
    this.registry = registry;
    const missing = this.names.filter((n) => !this.registry[n]);
    if (missing.length) throw new Error(`runGuards: no guard named ${missing.join(', ')}`);
    this.grace = opts.overrunGraceMs ?? 10_000;
    this.store = new StatusStore(statusFile(opts.rootDir), this.names, opts.mode, opts.log.redactor, opts.log, this.now, this.root(METRICS_TEXTFILE_PATH));
    this.bootstrap = opts.bootstrap ?? { by: 'hvagent', why: 'not detected (default)' };
    this.store.setBootstrap(this.bootstrap);
    this.stop = opts.signal;
  }

  private iso(t = this.now()): string {
    return new Date(t).toISOString();
  }

  private readonly root = (p: string): string => (this.opts.rootDir === '/' ? p : path.join(this.opts.rootDir, p));

  /** Records a guard's outcome, wakes the guards waiting on it, and says ready once the pre-bootstrap guards have settled. */
  private setOutcome(name: GuardName, o: Outcome): void {
    this.outcomes.set(name, o);
    this.changes.notify();
    if (this.readySent || !this.opts.onReady) return;
    const r = readiness(this.outcomes as Map<GuardName, SettledOutcome | 'stopped'>, this.names);
    if (!r.ready) return;
    this.readySent = true;
    this.store.setReady(r.status);
    this.opts.log.info('node prepared for the bootstrap', { status: r.status, bootstrapper: this.bootstrap.by });
    void Promise.resolve(this.opts.onReady(r.status)).catch((err: Error) => this.opts.log.warn('readiness notification failed', { error: err.message }));
  }

  private contextFor(guard: Guard, signal: AbortSignal): GuardContext {
    return {
      root: this.root,
      config: this.opts.config,
      log: this.opts.log.child({ guard: guard.name }),
      signal,
      stopping: this.stop,
      settings: guardSettings(this.opts.settings, guard.name),
      progress: (detail) => this.store.update(guard.name, { detail }),
      report: (data) => this.store.update(guard.name, { data }),
      now: this.now,
      bootstrapper: this.bootstrap.by,
    };
  }

  /** Waits until every dependency succeeded or was skipped; says which one blocks otherwise. */
  private async waitForDependencies(name: GuardName, deps: GuardName[]): Promise<'ready' | 'stopped' | { why: string }> {
    for (;;) {
      if (this.stop.aborted) return 'stopped';
      const waitingFor: string[] = [];
      for (const d of deps) {
        const o = this.outcomes.get(d);
        if (o === 'ok' || o === 'skip') continue;
        if (o === 'failed' && this.opts.mode === 'once') return { why: `dependency ${d} failed` };
        waitingFor.push(o === 'failed' ? `${d} (failed; retried later)` : d);
      }
      if (waitingFor.length === 0) return 'ready';
      this.store.update(name, { phase: 'pending', detail: `waiting for ${waitingFor.join(', ')}` });
      await this.changes.next(this.stop);
    }
  }

  /**
   * One reconcile pass, bounded by the deadline even if the guard ignores its signal; `cut` when the
   * deadline's abort fired (its timer may fire a millisecond before the wall clock says it is due).
   */
  private async reconcileOnce(guard: Guard, deadlineAt: number): Promise<{ r: GuardResult | 'stopped'; cut: boolean }> {
    const attempt = new AbortController();
    const remaining = Math.max(0, deadlineAt - this.now());
    const onDeadline = setTimeout(() => attempt.abort(new Error(`the ${guard.name} deadline passed`)), remaining);
    let abandon: NodeJS.Timeout | undefined;
    const overrun = new Promise<GuardResult>((resolve) => {
      abandon = setTimeout(
        () => resolve({ status: 'fail', diagnosis: `reconcile did not return within the deadline (+${Math.round(this.grace / 1000)} s) and was abandoned` }),
        remaining + this.grace,
      );
    });
    const cut = (): boolean => attempt.signal.aborted;
    try {
      const result = await Promise.race([guard.reconcile(this.contextFor(guard, AbortSignal.any([this.stop, attempt.signal]))), overrun]);
      return { r: this.stop.aborted ? 'stopped' : result, cut: cut() };
    } catch (err) {
      return { r: this.stop.aborted ? 'stopped' : { status: 'retry', reason: message(err) }, cut: cut() };
    } finally {
      clearTimeout(onDeadline);
      clearTimeout(abandon);
    }
  }

  /** Reconciles with backoff until ok/skip/fail or the deadline. */
  private async reconcileUntilDeadline(guard: Guard): Promise<Outcome> {
    const name = guard.name;
    const deadlineMs = guardDeadlineMs(this.opts.settings, name, guard.deadlineMs);
    const start = this.now();
    let delay = this.opts.settings.backoff.initialMs;
    this.store.update(name, { startedAt: this.iso(start), finishedAt: undefined, nextRetryAt: undefined, hint: undefined });
    for (;;) {
      const attempts = this.store.get(name).attempts + 1;
      this.store.update(name, { phase: 'running', attempts, nextRetryAt: undefined });
      await this.store.flush();
      const { r, cut } = await this.reconcileOnce(guard, start + deadlineMs);
      if (r === 'stopped') return 'stopped';
      if (r.status !== 'retry') return this.settled(name, r, attempts, this.now() - start);
      const elapsed = this.now() - start;
      if (cut || elapsed >= deadlineMs) return this.deadlinePassed(name, deadlineMs, attempts, r.reason, elapsed);
      if (!(await this.waitToRetry(name, Math.min(delay, deadlineMs - elapsed), attempts, r.reason))) return 'stopped';
      delay = Math.min(delay * 2, this.opts.settings.backoff.maxMs);
    }
  }

  /** Records a final result (ok, skip, fail); the log says how long the guard took (tookMs). */
  private settled(name: GuardName, r: Exclude<GuardResult, { status: 'retry' }>, attempts: number, tookMs: number): Outcome {
    const log = this.opts.log.child({ guard: name });
    switch (r.status) {
      case 'ok':
        this.store.update(name, { phase: 'succeeded', detail: r.detail, lastError: undefined, finishedAt: this.iso() });
        log.info('guard succeeded', { attempts, detail: r.detail, tookMs });
        return 'ok';
      case 'skip':
        this.store.update(name, { phase: 'skipped', detail: r.reason, lastError: undefined, finishedAt: this.iso() });
        log.info('guard skipped', { reason: r.reason, tookMs });
        return 'skip';
      case 'fail':
        this.store.update(name, { phase: 'failed', lastError: r.diagnosis, hint: r.hint, finishedAt: this.iso() });
        log.error('guard failed', { attempts, diagnosis: r.diagnosis, hint: r.hint, tookMs });
        return 'failed';
    }
  }

  /** The deadline passed on a retry: the last reason becomes the diagnosis. */
  private deadlinePassed(name: GuardName, deadlineMs: number, attempts: number, reason: string, tookMs: number): Outcome {
    const diagnosis = `not reached within ${formatMs(deadlineMs)} (${attempts} attempt${attempts === 1 ? '' : 's'}): ${reason}`;
    this.store.update(name, { phase: 'failed', lastError: diagnosis, finishedAt: this.iso() });
    this.opts.log.child({ guard: name }).error('guard deadline passed', { attempts, diagnosis, tookMs });
    return 'failed';
  }

  /** The backoff wait before the next attempt; false when the run was stopped during it. */
  private async waitToRetry(name: GuardName, wait: number, attempts: number, reason: string): Promise<boolean> {
    this.store.update(name, { phase: 'waiting', lastError: reason, nextRetryAt: this.iso(this.now() + wait) });
    this.opts.log.child({ guard: name }).info('guard not there yet', { attempts, reason, retryInMs: wait });
    await this.store.flush();
    return sleep(wait, this.stop).then(
      () => true,
      () => false,
    );
  }

  /** A guard's whole life: its dependencies, its reconcile, the retry after a failure, its watch. */
  async drive(name: GuardName): Promise<void> {
    const guard = this.registry[name]!;
    const deps = this.opts.only ? [] : guard.dependsOn.filter((d) => this.names.includes(d));
    for (;;) {
      const ready = await this.waitForDependencies(name, deps);
      if (ready === 'stopped') return this.setOutcome(name, 'stopped');
      if (ready !== 'ready') {
        this.store.update(name, { phase: 'failed', detail: undefined, lastError: `not run: ${ready.why}`, finishedAt: this.iso() });
        this.opts.log.error('guard not run', { guard: name, reason: ready.why });
        return this.setOutcome(name, 'failed');
      }
      const o = await this.reconcileUntilDeadline(guard);
      this.setOutcome(name, o);
      if (o === 'stopped' || o === 'skip') return;
      if (o === 'failed') {
        if (this.opts.mode === 'once') return;
        if (!(await this.waitAfterFailure(name))) return this.setOutcome(name, 'stopped');
        continue;
      }
      if (this.opts.mode === 'once' || !guard.watch) return;
      if ((await this.watch(guard)) === 'done') return;
    }
  }

  /** `run` mode retries a failed guard after retryFailedAfterMs; false when stopped meanwhile. */
  private async waitAfterFailure(name: GuardName): Promise<boolean> {
    const retryAt = this.now() + this.opts.settings.retryFailedAfterMs;
    this.store.update(name, { nextRetryAt: this.iso(retryAt) });
    return sleep(this.opts.settings.retryFailedAfterMs, this.stop).then(
      () => true,
      () => false,
    );
  }

  /** Keeps the state with the guard's watch; 'again' when the watch broke and the guard must reconcile again. */
  private async watch(guard: Guard): Promise<'done' | 'again'> {
    const name = guard.name;
    this.store.update(name, { phase: 'watching' });
    try {
      await guard.watch!(this.contextFor(guard, this.stop));
      if (this.stop.aborted) return 'done';
      this.store.update(name, { phase: 'succeeded' });
      return 'done';
    } catch (err) {
      if (this.stop.aborted) return 'done';
      // The watch broke (not a stop): reconcile again from the top, with a fresh deadline.
      this.store.update(name, { phase: 'waiting', lastError: `watch ended: ${message(err)}` });
      this.opts.log.warn('guard watch ended; reconciling again', { guard: name, error: message(err) });
      const slept = await sleep(this.opts.settings.backoff.initialMs, this.stop).then(
        () => true,
        () => false,
      );
      return slept ? 'again' : 'done';
    }
  }

  /** Marks what a stop interrupted, writes the final status document and says whether all went well. */
  async finish(): Promise<RunOutcome> {
    const stopped = this.stop.aborted;
    if (stopped) {
      for (const g of this.store.snapshot().guards) {
        if (['pending', 'running', 'waiting', 'watching'].includes(g.phase)) {
          this.store.update(g.name, { phase: 'stopped', nextRetryAt: undefined, finishedAt: this.iso() });
        }
      }
    }
    this.store.setState(stopped ? 'stopped' : 'finished');
    await this.store.flush();
    const status = this.store.snapshot();
    const ok = status.guards.every((g) => g.phase === 'succeeded' || g.phase === 'skipped');
    this.opts.log.info(stopped ? 'hvagent stopped' : 'hvagent finished', { ok });
    return { ok, stopped, status };
  }
}

export function formatMs(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${Math.round(ms / 100) / 10} s`;
  return `${Math.round(ms / 6000) / 10} min`;
}
