/**
 * Guard `image-preload`: imports the ISO's image bundle into containerd's k8s.io namespace before
 * RKE2 needs the images — streamed, in parallel, with a stall watchdog, checksums and a final
 * check (agent/preload/). Harvester's own preload has no timeout anywhere (harvester/harvester#2651, #8606, #4728).
 */
import { HvError } from '../../lib/errors.js';
import { CommandError } from '../../lib/exec.js';
import type { Guard, GuardContext, GuardResult } from '../guard.js';
import { diagnose, summarise } from '../preload/diagnosis.js';
import { runPreload } from '../preload/preload.js';
import { resolvePreloadSettings } from '../preload/settings.js';

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
      if (o.missing.length === 0 && o.archives.every((a) => a.status !== 'failed')) {
        return { status: 'ok', detail: summarise(o) };
      }
      const d = diagnose(o);
      return d.permanent ? { status: 'fail', diagnosis: d.diagnosis, hint: d.hint } : { status: 'retry', reason: d.diagnosis };
    }
  }
}

const imagePreload: Guard = {
  name: 'image-preload',
  dependsOn: [],
  // Slow virtual media can need an hour for a full bundle; stalls are caught by the watchdog long before.
  deadlineMs: 90 * 60_000,
  reconcile,
};

export default imagePreload;
