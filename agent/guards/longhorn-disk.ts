/**
 * longhorn-disk: HARV_LH_DEFAULT resolves to exactly one device, ext4 and healthy, mounted at
 * /var/lib/harvester/defaultdisk (mounted here if it is not); reports capacity and free space.
 * It needs nothing else (no network, no RKE2), so it depends on no guard and runs early.
 */
import { everyInterval } from './every-interval.js';
import type { Guard, GuardContext, GuardResult } from '../guard.js';
import { judgeLonghornDisk, LH_LABEL, LH_MOUNT, mountLonghornDisk, probeLonghornDisk, type ProbeOptions } from '../longhorn/disk.js';

function probeOptions(ctx: GuardContext): ProbeOptions {
  const s = ctx.settings;
  return {
    root: ctx.root,
    label: typeof s.label === 'string' ? s.label : LH_LABEL,
    mountPoint: typeof s.mountPoint === 'string' ? s.mountPoint : LH_MOUNT,
    devices: Array.isArray(s.devices) ? (s.devices as string[]) : undefined,
  };
}

/** Why this node has no Longhorn default disk, if it has none by design. */
export function notApplicable(ctx: Pick<GuardContext, 'config'>): string | undefined {
  const install = ctx.config?.install;
  if (install?.role === 'witness') return 'witness nodes have no Longhorn default disk';
  if (install?.forceMbr && !install.dataDisk) return 'an MBR install without data_disk has no HARV_LH_DEFAULT partition';
  return undefined;
}

async function reconcile(ctx: GuardContext): Promise<GuardResult> {
  const na = notApplicable(ctx);
  if (na) return { status: 'skip', reason: na };
  const o = probeOptions(ctx);
  let decision = judgeLonghornDisk(await probeLonghornDisk(o));
  if (decision.action === 'mount') {
    ctx.log.info('mounting the Longhorn default disk', { device: decision.device, mountPoint: o.mountPoint });
    await mountLonghornDisk(o, decision.device);
    decision = judgeLonghornDisk(await probeLonghornDisk(o));
    if (decision.action === 'mount') return { status: 'retry', reason: `mounted ${decision.device} at ${o.mountPoint} but it does not show in mountinfo` };
  }
  switch (decision.action) {
    case 'ok':
      return { status: 'ok', detail: decision.detail };
    case 'retry':
      return { status: 'retry', reason: decision.reason };
    case 'fail':
      return { status: 'fail', diagnosis: decision.diagnosis, hint: decision.hint };
  }
}

/** Every `watchIntervalMs` (default 60 s): still mounted and healthy? Remount if it went away. */
async function watch(ctx: GuardContext): Promise<void> {
  const every = typeof ctx.settings.watchIntervalMs === 'number' ? ctx.settings.watchIntervalMs : 60_000;
  await everyInterval(ctx.signal, every, async () => {
    const r = await reconcile(ctx).catch((err: Error): GuardResult => ({ status: 'retry', reason: err.message }));
    if (r.status === 'ok') ctx.progress(r.detail ?? 'ok');
    else {
      const why = r.status === 'fail' ? r.diagnosis : r.status === 'retry' ? r.reason : r.reason;
      ctx.log.warn('Longhorn default disk drifted', { problem: why });
      ctx.progress(`problem since ${new Date(ctx.now()).toISOString()}: ${why}`);
    }
  });
}

const guard: Guard = {
  name: 'longhorn-disk',
  dependsOn: [],
  deadlineMs: 2 * 60_000,
  reconcile,
  watch,
};
export default guard;
