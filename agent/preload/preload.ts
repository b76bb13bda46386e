/**
 * A preload pass: find the bundle, list what containerd has, import the archives whose images are
 * missing (a bounded pool, each archive retried with backoff), roll back what a failed attempt left,
 * and finish with a bounded check that every listed image is present.
 */
import { access } from 'node:fs/promises';
import type { Logger } from '../../lib/logger.js';
import { sleep, waitUntil, DeadlineError } from '../../lib/wait.js';
import { loadBundle, type LoadedBundle } from './bundle-reader.js';
import type { BundleArchive } from './bundle.js';
import { containerdProblem, listImages, removeImages, warnEachApiFallback, type CtrTarget } from './containerd.js';
import { formatBytes, type ArchiveOutcome, type FailureKind, type PreloadOutcome } from './diagnosis.js';
import { findMissing, imagesToRollBack, importOrder, planImports } from './plan.js';
import { ImportAttemptError, importArchiveOnce } from './stream-import.js';
import { RKE2_CONTAINERD, RKE2_CTR, type PreloadSettings } from './settings.js';
import { describeUnit, readContainerdUnit, unitWillServe } from './containerd-unit.js';
import { adoptLeftoverContainerd, startStandaloneContainerd, type StandaloneContainerd } from './standalone-containerd.js';
import { sweepStaleImportLeasesOnce } from './lease-sweep.js';

export interface PreloadEnv {
  settings: PreloadSettings;
  /** Node path → real path (ctx.root). */
  root: (p: string) => string;
  log: Logger;
  progress: (detail: string) => void;
  signal: AbortSignal;
  now: () => number;
}

/** The sweep's connection and calls; its deletes wait for containerd's garbage collection. */
const SWEEP_TIMEOUTS = { connectTimeoutMs: 10_000, timeoutMs: 60_000 };

export type PreloadRun =
  | { kind: 'no-bundle'; searched: string[] }
  | { kind: 'containerd-unavailable'; reason: string }
  | { kind: 'done'; outcome: PreloadOutcome };

async function pathExists(p: string): Promise<boolean> {
  return access(p).then(() => true, () => false);
}

/** The first bundle directory (with a metadata.yaml or any content) that exists. */
export async function locateBundle(env: PreloadEnv): Promise<string | undefined> {
  for (const d of env.settings.bundleDirs) {
    const real = env.root(d);
    if (await pathExists(real)) return real;
  }
  return undefined;
}

export async function resolveCtr(env: PreloadEnv): Promise<string> {
  if (env.settings.ctr) return env.settings.ctr.startsWith('/') ? env.root(env.settings.ctr) : env.settings.ctr;
  const rke2 = env.root(RKE2_CTR);
  return (await pathExists(rke2)) ? rke2 : 'ctr';
}

async function resolveContainerdBinary(env: PreloadEnv): Promise<string> {
  const b = env.settings.containerdBinary;
  if (b) return b.startsWith('/') ? env.root(b) : b;
  const rke2 = env.root(RKE2_CONTAINERD);
  return (await pathExists(rke2)) ? rke2 : 'containerd';
}

/** Waits (bounded) until containerd answers; returns the last reason when it never did. */
async function waitForContainerd(target: CtrTarget, env: PreloadEnv): Promise<string | null> {
  try {
    await waitUntil(
      async () => {
        const problem = await containerdProblem(target);
        return problem ? { done: false, reason: problem } : { done: true, value: null };
      },
      { what: 'waiting for containerd', timeoutMs: env.settings.containerdWaitMs, intervalMs: 500, backoff: 1.5, maxIntervalMs: 5000, signal: env.signal, now: env.now },
    );
    return null;
  } catch (err) {
    if (env.signal.aborted) throw err;
    return err instanceof DeadlineError ? err.message : (err as Error).message;
  }
}

/** Progress text for `hvagent status`, throttled. */
class ProgressBoard {
  private readonly active = new Map<string, { n: number; bytes: number; total?: number }>();
  private done = 0;
  private lastEmit = 0;

  constructor(
    private readonly total: number,
    private readonly skipped: number,
    private readonly emit: (s: string) => void,
    private readonly now: () => number,
  ) {}

  start(a: BundleArchive, n: number): void {
    this.active.set(a.id, { n, bytes: 0, total: a.sizeBytes });
    this.flush(true);
  }

  bytes(a: BundleArchive, bytes: number): void {
    const e = this.active.get(a.id);
    if (e) e.bytes = bytes;
    this.flush(false);
  }

  end(a: BundleArchive): void {
    this.active.delete(a.id);
    this.done++;
    this.flush(true);
  }

  private trailing: NodeJS.Timeout | undefined;

  /** No more lines after the pass (a pending trailing update is dropped). */
  close(): void {
    if (this.trailing) clearTimeout(this.trailing);
    this.trailing = undefined;
    this.closed = true;
  }

  private closed = false;

  /** At most one line a second; a throttled update is emitted later, so the last figure is never lost. */
  flush(force: boolean): void {
    if (this.closed) return;
    if (!force && this.now() - this.lastEmit < 1000) {
      this.trailing ??= setTimeout(() => {
        this.trailing = undefined;
        this.flush(true);
      }, 1000).unref();
      return;
    }
    if (this.trailing) {
      clearTimeout(this.trailing);
      this.trailing = undefined;
    }
    this.lastEmit = this.now();
    const parts = [...this.active.entries()].map(([id, e]) => {
      const name = id.slice(id.lastIndexOf('/') + 1);
      const pct = e.total ? ` (${Math.floor((100 * e.bytes) / e.total)}%)` : '';
      return `archive ${e.n}/${this.total} ${name}: ${formatBytes(e.bytes)}${e.total ? ` of ${formatBytes(e.total)}` : ''}${pct}`;
    });
    const tailParts = [`${this.done} done`];
    if (this.skipped) tailParts.push(`${this.skipped} skipped`);
    this.emit([...parts, tailParts.join(', ')].join('; '));
  }
}

/** Runs `worker` over `items` with at most `limit` running at once. */
async function pool<T>(items: readonly T[], limit: number, worker: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      await worker(items[i]!, i);
    }
  });
  await Promise.all(lanes);
}

export async function runPreload(env: PreloadEnv): Promise<PreloadRun> {
  const { settings: s, log } = env;
  const dir = await locateBundle(env);
  if (!dir) return { kind: 'no-bundle', searched: s.bundleDirs.map((d) => env.root(d)) };
  const bundle: LoadedBundle = await loadBundle(dir, s.sections);
  const target: CtrTarget = { ctr: await resolveCtr(env), socket: env.root(s.containerdSocket), namespace: s.namespace, onApiFallback: warnEachApiFallback(log) };
  log.info('image bundle found', { bundle: dir, archives: bundle.archives.length, fromMetadata: bundle.fromMetadata, socket: target.socket });

  let standalone: StandaloneContainerd | undefined = await adoptLeftoverContainerd(env.root('/run/hvagent'));
  if (standalone) log.warn('adopted a standalone containerd left running by an earlier pass; it is stopped at the end of this one', { pid: standalone.pid });
  // Listing the images doubles as the "is containerd there" probe (one ctr call fewer per pass).
  const listed = await listImages(target).catch(() => undefined);
  let problem = listed ? null : await containerdProblem(target);
  if (problem && standalone) {
    // The leftover is alive but does not answer: replace it.
    await standalone.stop();
    standalone = undefined;
  }
  if (problem && s.startContainerd === 'auto') {
    // The image's containerd up or starting (hvagent is not ordered after it): wait for it instead.
    const unit = await readContainerdUnit(s.containerdUnit, env.root('/'));
    if (unit && unitWillServe(unit)) {
      log.info('waiting for the image\'s containerd', { unit: describeUnit(unit), socket: target.socket });
      problem = await waitForContainerd(target, env);
      if (problem) return { kind: 'containerd-unavailable', reason: `${describeUnit(unit)} but nothing answered on ${target.socket} within ${Math.round(s.containerdWaitMs / 1000)} s: ${problem}` };
      return await importBundle(bundle, dir, target, env, true, undefined);
    }
  }
  if (problem && s.startContainerd === 'auto') {
    const binary = await resolveContainerdBinary(env);
    try {
      standalone = await startStandaloneContainerd({
        binary,
        root: env.root(s.containerdRoot),
        state: env.root(s.containerdState),
        socket: target.socket,
        workDir: env.root('/run/hvagent'),
        readyTimeoutMs: s.containerdWaitMs,
        ctr: target.ctr,
        signal: env.signal,
      });
      log.info('started a standalone containerd for the preload', { pid: standalone.pid, binary, config: standalone.config, log: standalone.log });
      problem = null;
    } catch (err) {
      if (env.signal.aborted) throw err;
      return { kind: 'containerd-unavailable', reason: `nothing answers on ${target.socket} and a standalone containerd did not start: ${(err as Error).message}` };
    }
  }
  try {
    return await importBundle(bundle, dir, target, env, problem === null, listed);
  } finally {
    if (standalone) {
      await standalone.stop();
      log.info('stopped the standalone containerd', { pid: standalone.pid });
    }
  }
}

/** What an earlier agent's killed API import still holds is freed before this pass writes its own copy (lease-sweep.ts). */
async function freeKilledImports(target: CtrTarget, env: PreloadEnv): Promise<void> {
  if (env.settings.importer === 'api' && !env.settings.unpack) await sweepStaleImportLeasesOnce(target.socket, target.namespace, env.log, SWEEP_TIMEOUTS);
}

async function importBundle(
  bundle: LoadedBundle,
  dir: string,
  target: CtrTarget,
  env: PreloadEnv,
  answering: boolean,
  presentAtStart: Set<string> | undefined,
): Promise<PreloadRun> {
  const { settings: s, log } = env;
  if (!answering) {
    const down = await waitForContainerd(target, env);
    if (down) return { kind: 'containerd-unavailable', reason: down };
  }

  const present = presentAtStart ?? (await listImages(target));
  const plans = planImports(bundle.archives, present);
  const outcomes = new Map<string, ArchiveOutcome>();
  for (const p of plans) {
    if (p.action === 'skip') {
      outcomes.set(p.archive.id, { id: p.archive.id, status: 'skipped', attempts: 0, bytes: 0, durationMs: 0 });
      log.info('archive skipped: images present', { archive: p.archive.id, reason: p.reason });
    } else {
      log.info('archive to import', { archive: p.archive.id, reason: p.reason, bytes: p.archive.sizeBytes, sha256: p.archive.sha256 ?? null });
    }
  }
  const order = importOrder(plans);
  const board = new ProgressBoard(bundle.archives.length, bundle.archives.length - order.length, env.progress, env.now);
  const numberOf = new Map(bundle.archives.map((a, i) => [a.id, i + 1]));
  // Images of archives imported in this pass: a failed archive's rollback never removes these.
  const vouchedFor = new Set<string>([...present]);

  if (order.length > 0) await freeKilledImports(target, env);
  try {
    await pool(order, s.parallelism, async (archive) => {
      outcomes.set(archive.id, await importWithRetries(archive, target, env, board, numberOf.get(archive.id)!, present, vouchedFor));
    });
  } catch (err) {
    board.close();
    throw err;
  }

  // The bounded final check: poll briefly (containerd is consistent once ctr returns, but a slow
  // metadata store gets a few seconds), then name whatever is still missing.
  const allOk = [...outcomes.values()].every((o) => o.status !== 'failed');
  // Nothing imported: the list this pass began with is the answer (a `ctr` run is seconds of CPU on a booting node).
  let finalPresent = order.length === 0 ? present : await listImages(target);
  if (allOk && findMissing(bundle.archives, finalPresent).length > 0) {
    try {
      await waitUntil(
        async () => {
          finalPresent = await listImages(target);
          const m = findMissing(bundle.archives, finalPresent);
          return m.length === 0 ? { done: true, value: null } : { done: false, reason: `${m.length} images missing` };
        },
        { what: 'checking that every listed image is present', timeoutMs: s.verifyTimeoutMs, intervalMs: 1000, signal: env.signal, now: env.now },
      );
    } catch (err) {
      if (env.signal.aborted) throw err;
    }
  }
  const missing = findMissing(bundle.archives, finalPresent);
  const listedCount = new Set(bundle.archives.flatMap((a) => a.images)).size;
  const outcome: PreloadOutcome = {
    bundleDir: dir,
    archives: bundle.archives.map((a) => outcomes.get(a.id)!),
    missing,
    listedImages: listedCount,
  };
  // An archive ctr imported without error but whose listed images are absent is not a success.
  for (const o of outcome.archives) {
    const lost = missing.filter((m) => m.archive === o.id);
    if (o.status === 'imported' && lost.length > 0) {
      o.status = 'failed';
      o.failure = { kind: 'images-missing', message: `ctr imported it, but ${lost.length} listed images are not present (${lost.slice(0, 3).map((m) => m.image).join(', ')}${lost.length > 3 ? ', …' : ''})` };
    }
  }
  board.flush(true);
  board.close();
  return { kind: 'done', outcome };
}

async function importWithRetries(
  archive: BundleArchive,
  target: CtrTarget,
  env: PreloadEnv,
  board: ProgressBoard,
  n: number,
  presentAtStart: ReadonlySet<string>,
  vouchedFor: Set<string>,
): Promise<ArchiveOutcome> {
  const { settings: s } = env;
  const log = env.log.child({ archive: archive.id });
  let delay = s.retryDelayMs;
  let last: { kind: FailureKind; message: string } = { kind: 'import-failed', message: 'not attempted' };
  const rolledBack: string[] = [];
  let bytes = 0;
  const started = env.now();
  board.start(archive, n);
  try {
    for (let attempt = 1; attempt <= s.attempts; attempt++) {
      if (attempt > 1) {
        log.warn('retrying the archive', { attempt, afterMs: delay, lastError: last.message });
        await sleep(delay, env.signal);
        delay = Math.min(delay * 2, s.retryMaxDelayMs);
      }
      // The pass checked containerd before the first attempts; a retry checks again (it may be
      // restarting after a crash) rather than burning its attempt on a refused connection.
      if (attempt > 1) {
        const down = await waitForContainerd(target, env);
        if (down) {
          last = { kind: 'containerd-unavailable', message: down };
          continue;
        }
      }
      try {
        const r = await importArchiveOnce({
          archive,
          target,
          zstd: s.zstd,
          unpack: s.unpack,
          importer: s.importer,
          stallTimeoutMs: s.stallTimeoutMs,
          finishTimeoutMs: s.finishTimeoutMs,
          signal: env.signal,
          onBytes: (b) => board.bytes(archive, b),
          now: env.now,
        });
        bytes = r.bytes;
        for (const i of archive.images) vouchedFor.add(i);
        const secs = Math.max(r.durationMs, 1) / 1000;
        log.info('archive imported', { attempt, bytes: r.bytes, sha256: r.sha256 ?? null, verified: !!archive.sha256, seconds: Math.round(secs * 10) / 10, mibPerSecond: Math.round(r.bytes / 1048576 / secs) });
        return { id: archive.id, status: 'imported', attempts: attempt, bytes, durationMs: env.now() - started, rolledBack: rolledBack.length ? rolledBack : undefined };
      } catch (err) {
        if (env.signal.aborted) throw err;
        last = err instanceof ImportAttemptError ? { kind: err.kind, message: err.message } : { kind: 'import-failed', message: (err as Error).message };
        log.warn('import attempt failed', { attempt, of: s.attempts, kind: last.kind, error: last.message });
        // Whatever this attempt created is not trusted.
        {
          const after = await listImages(target).catch(() => undefined);
          const undo = after ? imagesToRollBack(archive, presentAtStart, after, vouchedFor) : [];
          if (undo.length) {
            await removeImages(target, undo).then(
              () => {
                rolledBack.push(...undo);
                log.warn('removed images left by the failed attempt', { images: undo });
              },
              (e: Error) => log.error('could not remove images left by the failed attempt', { images: undo, error: e.message }),
            );
          }
        }
      }
    }
    log.error('archive failed', { attempts: s.attempts, kind: last.kind, error: last.message });
    return { id: archive.id, status: 'failed', attempts: s.attempts, bytes, durationMs: env.now() - started, failure: last, rolledBack: rolledBack.length ? rolledBack : undefined };
  } finally {
    board.end(archive);
  }
}
