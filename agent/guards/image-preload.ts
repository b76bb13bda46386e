/**
 * Guard `image-preload`: imports the ISO's image bundle into containerd's k8s.io namespace before
 * RKE2 needs the images — streamed, in parallel, with a stall watchdog, checksums and a final
 * check (agent/preload/). Harvester's own preload has no timeout anywhere (harvester/harvester#2651, #8606, #4728).
 */
import { HvError } from '../../lib/errors.js';
import { CommandError } from '../../lib/exec.js';
import type { Guard, GuardContext, GuardResult } from '../guard.js';
import { sleep } from '../../lib/wait.js';
import { diagnose, summarise } from '../preload/diagnosis.js';
import { locateBundle, resolveCtr, runPreload, type PreloadEnv } from '../preload/preload.js';
import { resolvePreloadSettings } from '../preload/settings.js';
import { loadBundle } from '../preload/bundle-reader.js';
import { containerdProblem, listImages, warnEachApiFallback } from '../preload/containerd.js';
import { findMissing } from '../preload/plan.js';
import { planReimport } from '../preload/reimport.js';

async function reconcile(ctx: GuardContext): Promise<GuardResult> {
  let settings;
  try {
    settings = resolvePreloadSettings(ctx.settings);
  } catch (err) {
    const e = err as HvError;
    return { status: 'fail', diagnosis: e.message, hint: e.hint };
  }
  let result;
  try {
    result = await runPreload({ settings, root: ctx.root, log: ctx.log.child({ guard: 'image-preload' }), progress: ctx.progress, signal: ctx.signal, now: ctx.now });
  } catch (err) {
    if (ctx.signal.aborted) throw err;
    // A ctr call failed (containerd went away between checks): a later pass may succeed.
    if (err instanceof CommandError) return { status: 'retry', reason: err.message };
    if (err instanceof HvError) {
      // A malformed or incomplete bundle: no retry fixes it.
      return { status: 'fail', diagnosis: `${err.message}${err.where ? ` (${err.where})` : ''}`, hint: err.hint };
    }
    return { status: 'retry', reason: (err as Error).message };
  }
  switch (result.kind) {
    case 'no-bundle':
      return settings.required
        ? { status: 'fail', diagnosis: `no image bundle at ${result.searched.join(' or ')}`, hint: 'set guards.image-preload.bundleDir to the bundle/ directory of the ISO' }
        : { status: 'skip', reason: `no image bundle at ${result.searched.join(' or ')}: RKE2 will pull or import images itself` };
    case 'containerd-unavailable':
      return { status: 'retry', reason: result.reason };
    case 'done': {
      const o = result.outcome;
      const imported = o.archives.filter((a) => a.status === 'imported');
      ctx.report?.({ importedBytes: imported.reduce((n, a) => n + a.bytes, 0), importedArchives: imported.length, listedImages: o.listedImages });
      if (o.missing.length === 0 && o.archives.every((a) => a.status !== 'failed')) {
        return { status: 'ok', detail: summarise(o) };
      }
      const d = diagnose(o);
      return d.permanent ? { status: 'fail', diagnosis: d.diagnosis, hint: d.hint } : { status: 'retry', reason: d.diagnosis };
    }
  }
}

/** When this agent process re-imported images, per node root (the rate limit's memory). */
const reimports = new Map<string, number[]>();

/**
 * After success (run mode): every watchInterval, compare the bundle's images with containerd's and
 * re-import the archives of those that went missing (kubelet's image GC), at a bounded rate. Only
 * RKE2's own containerd is asked: no standalone one is started beside a running RKE2.
 */
async function watch(ctx: GuardContext): Promise<void> {
  const s = { ...resolvePreloadSettings(ctx.settings), startContainerd: 'never' as const };
  const env: PreloadEnv = { settings: s, root: ctx.root, log: ctx.log.child({ guard: 'image-preload' }), progress: ctx.progress, signal: ctx.signal, now: ctx.now };
  const key = ctx.root('/');
  let lastState = '';
  // One for the watch's life: a reason is logged once, not at every interval.
  const onApiFallback = warnEachApiFallback(env.log);
  while (!ctx.signal.aborted) {
    await sleep(s.watchIntervalMs, ctx.signal).catch(() => undefined);
    if (ctx.signal.aborted) return;
    const past = reimports.get(key) ?? [];
    const dir = await locateBundle(env);
    if (!dir) {
      ctx.report?.({ watching: false, why: 'the bundle is gone', reimports: past.length });
      continue;
    }
    const target = { ctr: await resolveCtr(env), socket: ctx.root(s.containerdSocket), namespace: s.namespace, onApiFallback };
    const present = await listImages(target).catch(() => undefined);
    if (!present) {
      // RKE2 (and its containerd) is down or restarting: nothing to compare with, nothing to fight.
      const problem = (await containerdProblem(target)) ?? 'containerd did not list its images';
      if (problem !== lastState) ctx.progress(`watching: not checked (${problem})`);
      lastState = problem;
      continue;
    }
    const bundle = await loadBundle(dir, s.sections);
    const missing = findMissing(bundle.archives, present);
    const d = planReimport(missing, past, ctx.now(), { minIntervalMs: s.reimportMinIntervalMs, perDay: s.reimportsPerDay });
    ctx.report?.({ watching: true, checkedAt: new Date(ctx.now()).toISOString(), missing: missing.length, reimports: past.length, lastReimportAt: past.length ? new Date(Math.max(...past)).toISOString() : undefined, deferredUntil: d.action === 'deferred' ? new Date(d.until).toISOString() : undefined });
    if (d.action === 'none') {
      const text = `watching: all ${new Set(bundle.archives.flatMap((a) => a.images)).size} bundle images present${past.length ? ` (${past.length} re-import${past.length === 1 ? '' : 's'} so far)` : ''}`;
      if (text !== lastState) ctx.progress(text);
      lastState = text;
      continue;
    }
    if (d.action === 'deferred') {
      const text = `watching: ${d.images.length} bundle images missing (${d.images.slice(0, 3).join(', ')}${d.images.length > 3 ? ', …' : ''}); re-import deferred until ${new Date(d.until).toISOString()}: ${d.reason}`;
      if (text !== lastState) {
        ctx.log.warn('bundle images missing; re-import deferred', { images: d.images.length, until: new Date(d.until).toISOString(), reason: d.reason });
        ctx.progress(text);
      }
      lastState = text;
      continue;
    }
    ctx.log.warn('bundle images missing (kubelet image GC?): re-importing', { images: d.images, archives: d.archives });
    reimports.set(key, [...past, ctx.now()]);
    const r = await runPreload(env).catch((err: Error) => ({ kind: 'error' as const, message: err.message }));
    const done = r.kind === 'done' ? (r.outcome.missing.length === 0 ? `re-imported ${d.images.length} bundle images kubelet's image GC had removed (${d.archives.join(', ')})` : `re-import left ${r.outcome.missing.length} images missing: ${diagnose(r.outcome).diagnosis}`) : `re-import failed: ${r.kind === 'error' ? r.message : r.kind === 'containerd-unavailable' ? r.reason : 'the bundle is gone'}`;
    (r.kind === 'done' && r.outcome.missing.length === 0 ? ctx.log.info : ctx.log.warn).call(ctx.log, 'bundle re-import', { detail: done });
    ctx.progress(`watching: ${done}`);
    lastState = done;
  }
}

const imagePreload: Guard = {
  name: 'image-preload',
  dependsOn: [],
  // Slow virtual media can need an hour for a full bundle; stalls are caught by the watchdog long before.
  deadlineMs: 90 * 60_000,
  reconcile,
  watch,
};

export default imagePreload;
