/**
 * certificates: the days left of RKE2's certificates, at start and every `checkInterval` (a day),
 * in the status, the console, the metrics and, from `warnDays` on, a Node Event; and, before hvagent
 * starts RKE2, `rke2 certificate rotate` once for server certificates that expired while the node
 * was off (agent/certs/plan.ts says why and when). It runs after time-sync: a judgement of expiry
 * on a wrong clock would be wrong, and a rotate on one harmful.
 */
import os from 'node:os';
import path from 'node:path';
import type { Guard, GuardContext, GuardResult } from '../guard.js';
import { parseDuration } from '../settings.js';
import { rke2Settings, type Rke2Settings } from '../rke2/settings.js';
import { chooseServices } from '../rke2/services.js';
import { nodeNameOf } from '../rke2/role.js';
import { certificateRows, expiredServerCertificates, planCertificates, type CertificatePlan, type RotationRecord } from '../certs/plan.js';
import { readCertificates, RKE2_DATA_DIR } from '../certs/observe.js';
import { loadRotationRecord, rotateCertificates, saveRotationRecord } from '../certs/rotation.js';
import { certificateEvent, sendCertificateEvent } from '../certs/event.js';
import { everyInterval } from './every-interval.js';

interface CertSettings {
  dataDir: string;
  warnDays: number;
  checkIntervalMs: number;
  /** How soon to look again while RKE2 may still be making certificates (the watch's first 15 minutes), or has made none. */
  waitIntervalMs: number;
  /** How soon while they are appearing: none yet, or the set changed at the last look (within the first 15 minutes). */
  appearIntervalMs: number;
  rotateTimeoutMs: number;
  rke2: Rke2Settings;
}

function certSettings(ctx: GuardContext): CertSettings {
  const s = ctx.settings;
  const duration = (key: string, fallback: number): number => (s[key] === undefined ? fallback : parseDuration(s[key], `guards.certificates.${key}`));
  return {
    dataDir: typeof s.dataDir === 'string' ? s.dataDir : RKE2_DATA_DIR,
    warnDays: typeof s.warnDays === 'number' && s.warnDays >= 0 ? s.warnDays : 30,
    checkIntervalMs: duration('checkInterval', 24 * 3_600_000),
    waitIntervalMs: duration('waitInterval', 60_000),
    appearIntervalMs: duration('appearInterval', 5_000),
    rotateTimeoutMs: duration('rotateTimeout', 120_000),
    rke2: rke2Settings(s),
  };
}

const ROTATE_HINT = 'rotate by hand (systemctl stop rke2-server; rke2 certificate rotate: docs.rke2.io/security/certificates), then hvagent once --guard certificates';

/** When this agent process last sent the Event, per node root: once per checkInterval. */
const lastEvent = new Map<string, number>();

async function look(ctx: GuardContext, s: CertSettings, beforeStart: boolean): Promise<{ plan: CertificatePlan; record?: RotationRecord }> {
  const observed = await readCertificates(ctx.root, s.dataDir);
  const { record, problem } = await loadRotationRecord(ctx.root);
  const hvagent = ctx.bootstrapper !== 'rancherd';
  const nowMs = ctx.now();
  // Asked only where it can change the plan: before hvagent starts RKE2 itself, with server
  // certificates to rotate. Every other boot skips a systemctl run on the way to RKE2's start.
  const asks = hvagent && beforeStart && expiredServerCertificates(certificateRows(observed.certs, nowMs, s.warnDays)).length > 0;
  const running = asks ? (await (await chooseServices(s.rke2.supervisor, s.rke2.binary, ctx.root, s.rke2.env)).state('server')).active : false;
  const plan = planCertificates({ ...observed, nowMs, warnDays: s.warnDays, bootstrapper: hvagent ? 'hvagent' : 'rancherd', rke2ServerRunning: running, beforeStart, record });
  if (problem) plan.notes.push(problem);
  return { plan, record };
}

/** The Event, once per checkInterval while the plan has one; its outcome for the status. */
async function tellCluster(ctx: GuardContext, s: CertSettings, plan: CertificatePlan): Promise<{ eventSent?: boolean; eventProblem?: string }> {
  if (!plan.event) return {};
  const key = ctx.root('/');
  const last = lastEvent.get(key);
  if (last !== undefined && ctx.now() - last < s.checkIntervalMs) return {};
  const node = nodeNameOf(ctx.config, os.hostname(), s.rke2.nodeName);
  const out = await sendCertificateEvent(ctx.root, [s.rke2.adminKubeconfig, s.rke2.kubeletKubeconfig], certificateEvent(node, plan.event, new Date(ctx.now()).toISOString()), ctx.stopping);
  if (out.sent) lastEvent.set(key, ctx.now());
  else ctx.log.info('the certificates Event was not sent', { problem: out.problem });
  return { eventSent: out.sent, eventProblem: out.problem };
}

/** What the status and the metrics carry of a look. */
function reportData(plan: CertificatePlan, record: RotationRecord | undefined, told: Record<string, unknown>): Record<string, unknown> {
  return {
    level: plan.level,
    soonestDays: plan.rows[0]?.daysLeft,
    certificates: plan.rows.map((r) => ({ path: r.path, scope: r.scope, ca: r.ca, notAfter: r.notAfter, daysLeft: r.daysLeft, level: r.level })),
    notes: plan.notes,
    ...(record ? { rotation: { at: record.at, outcome: record.outcome, detail: record.detail } } : {}),
    ...told,
  };
}

async function rotate(ctx: GuardContext, s: CertSettings, expired: RotationRecord['expired']): Promise<RotationRecord> {
  ctx.progress(`rotating ${expired.length} expired server certificate(s): rke2 certificate rotate`);
  ctx.log.warn('RKE2 server certificates expired while RKE2 was not running: rke2 certificate rotate', { expired: expired.map((e) => `${e.path} ${e.notAfter}`) });
  const dataDir = ctx.root('/') === '/' ? s.dataDir : ctx.root(s.dataDir);
  const out = await rotateCertificates({ binary: s.rke2.binary, dataDir, env: s.rke2.env, timeoutMs: s.rotateTimeoutMs, signal: ctx.signal });
  const record: RotationRecord = { version: 1, at: new Date(ctx.now()).toISOString(), outcome: out.outcome, detail: out.detail, expired };
  // Recorded whatever the outcome: the rotate runs once for these certificates, never in a loop.
  await saveRotationRecord(ctx.root, record);
  if (out.outcome === 'rotated') ctx.log.info('rke2 certificate rotate done: RKE2 makes new certificates at its start', { detail: out.detail });
  else ctx.log.error('rke2 certificate rotate failed', { detail: out.detail });
  return record;
}

async function reconcile(ctx: GuardContext): Promise<GuardResult> {
  const s = certSettings(ctx);
  let { plan, record } = await look(ctx, s, true);
  let rotated = '';
  if (plan.rotate) {
    record = await rotate(ctx, s, plan.rotate);
    if (record.outcome === 'failed') {
      ctx.report?.(reportData(plan, record, {}));
      return { status: 'fail', diagnosis: `rke2 certificate rotate failed for ${record.expired.map((e) => path.posix.basename(e.path)).join(', ')}: ${record.detail}`, hint: ROTATE_HINT };
    }
    rotated = `rotated the expired server certificates (${record.detail}); `;
    ({ plan, record } = await look(ctx, s, true));
  }
  ctx.report?.(reportData(plan, record, await tellCluster(ctx, s, plan)));
  if (plan.failure) return { status: 'fail', diagnosis: `${rotated}${plan.summary}; ${plan.failure}`, hint: ROTATE_HINT };
  return { status: 'ok', detail: `${rotated}${plan.summary}` };
}

/**
 * RKE2 writes its certificates one by one over its first start (the CA first, the leaves as each
 * component comes up), and the agent starts RKE2 right after its own start: for this long after the
 * watch begins it looks every waitInterval, so the set it reports is complete, not a day stale; and
 * every appearInterval while they appear (none yet, or the set changed at the look before), so a
 * fresh node's status shows them seconds after RKE2 made them, not up to a waitInterval later.
 */
const SETTLE_MS = 15 * 60_000;

/** What the next look is timed by: the last look's level and whether the set changed since the one before. */
export interface LastLook {
  level: CertificatePlan['level'];
  changed: boolean;
}

/** How long until the next look: soonest while certificates appear, sooner while RKE2 may still be making them. Pure. */
export function nextLookMs(s: Pick<CertSettings, 'checkIntervalMs' | 'waitIntervalMs' | 'appearIntervalMs'>, last: LastLook, watchingForMs: number): number {
  const soon = Math.min(s.waitIntervalMs, s.checkIntervalMs);
  if (watchingForMs < SETTLE_MS && (last.level === 'none' || last.changed)) return Math.min(s.appearIntervalMs, soon);
  return last.level === 'none' || watchingForMs < SETTLE_MS ? soon : s.checkIntervalMs;
}

/** The certificate set a look found, to tell whether the next one changed: each path with its notAfter. */
const setOf = (plan: CertificatePlan): string => plan.rows.map((r) => `${r.path}@${r.notAfter}`).sort().join('\n');

/** Every checkInterval (sooner at first, while there are none and while they appear): report again, warn, and send the Event. */
async function watch(ctx: GuardContext): Promise<void> {
  const s = certSettings(ctx);
  const since = ctx.now();
  const first = (await look(ctx, s, false)).plan;
  let last: LastLook = { level: first.level, changed: false };
  let set = setOf(first);
  // The status is written when a look shows something new (a day less, a new certificate, an
  // Event's outcome), not on every look: while they appear that is every few seconds.
  let shown = '';
  await everyInterval(ctx.signal, () => nextLookMs(s, last, ctx.now() - since), async () => {
    const { plan, record } = await look(ctx, s, false);
    const data = reportData(plan, record, await tellCluster(ctx, s, plan));
    const show = JSON.stringify([data, plan.summary]);
    if (show !== shown) {
      ctx.report?.(data);
      ctx.progress(plan.summary);
      shown = show;
    }
    if (plan.level === 'expired' || plan.level === 'expiring') ctx.log.warn('RKE2 certificates run out', { summary: plan.summary, notes: plan.notes });
    const now = setOf(plan);
    last = { level: plan.level, changed: now !== set };
    set = now;
  });
}

const guard: Guard = {
  name: 'certificates',
  dependsOn: ['time-sync'],
  // Reading a few files and, at most once, rke2 certificate rotate (rotateTimeout).
  deadlineMs: 5 * 60_000,
  reconcile,
  watch,
};

export default guard;
