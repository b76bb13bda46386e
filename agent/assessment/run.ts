/**
 * The boot-assessment controller hvagent runs beside its guards: on an attempt it judges the node
 * (decide.ts gateVerdict over the guards' statuses) and commits the upgrade or reboots once into
 * the previous image; on the fallback boot it makes the fallback permanent, says why everywhere,
 * and judges the previous image too, without ever rebooting it (no loop).
 */
import { readFile } from 'node:fs/promises';
import type { Logger } from '../../lib/logger.js';
import { formatMetrics } from '../../lib/prometheus.js';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import type { GuardStatus } from '../guard.js';
import { ENABLED_VAR, FAILED_IMAGE_FILE, STATE_VAR, type UpgradeRecord } from '../../node/boot-assessment.js';
import { bootAction, gateVerdict, type GateVerdict } from './decide.js';
import { commitFallback, commitUpgrade, readAssessmentEnv, tidyCommittedFallback, type CosState } from './cos-state.js';
import { fallbackReason, readAssessmentRecord, writeAssessmentRecord, type AssessmentOutcome, type AssessmentRecord, type HvpxeTold } from './record.js';
import type { NodeEventBody } from '../../config/hvpxe-protocol.js';
import type { GateSettings } from './settings.js';
import { readBackText, type CosRecovery } from './cos-recovery.js';
import { copyStateYamlToRecovery } from '../../node/state-yaml-copy.js';

export interface AssessmentDeps {
  cos: CosState;
  /** COS_RECOVERY, whose state.yaml copy follows COS_STATE's at each commit (none in some tests). */
  recovery?: CosRecovery;
  recordFile: string;
  upgradeFile: string;
  metricsFile: string;
  cmdline: string;
  /** This boot's id (/proc/sys/kernel/random/boot_id): an agent restarted on the same boot keeps the gate's start. */
  bootId: string;
  settings: GateSettings;
  readGuards(): Promise<GuardStatus[]>;
  /** `systemctl reboot`; tests pass a recorder. */
  reboot(): Promise<void>;
  /** Lines for the node's console (and the log, at `level`). */
  announce(level: 'info' | 'error', lines: string[]): Promise<void>;
  /** After a fallback is committed: cordon, annotate and an Event when the API answers (best effort). */
  tellCluster?(record: AssessmentRecord): Promise<void>;
  /** After a commit: FALLBACK or UPGRADED to hvpxe when the node came from it (tell-hvpxe.ts; bounded, never throws). */
  tellHvpxe?(event: NodeEventBody): Promise<HvpxeTold>;
  log: Logger;
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  signal: AbortSignal;
}

const iso = (d: AssessmentDeps): string => new Date(d.now()).toISOString();
const imageOf = (u: UpgradeRecord | undefined, which: 'to' | 'from'): string => u?.[which].name ?? (which === 'to' ? 'the upgraded image' : 'the previous image');

async function save(d: AssessmentDeps, r: AssessmentRecord): Promise<void> {
  await writeAssessmentRecord(d.recordFile, r);
  const fellBack = r.outcome === 'fell-back' ? 1 : 0;
  await writeFileAtomic(d.metricsFile, formatMetrics([
    { name: 'hvagent_boot_assessment_outcome', help: "The last upgrade's assessment: 1 for its outcome.", type: 'gauge', samples: [{ labels: { outcome: r.outcome }, value: 1 }] },
    { name: 'hvagent_boot_assessment_fell_back', help: 'The last upgrade failed its attempt and the node runs the previous image.', type: 'gauge', samples: [{ labels: {}, value: fellBack }] },
    { name: 'hvagent_boot_assessment_fallback_unhealthy', help: 'The previous image the node fell back to is not healthy either.', type: 'gauge', samples: [{ labels: {}, value: r.fallback?.health === 'unhealthy' ? 1 : 0 }] },
  ])).catch((err: Error) => d.log.warn('boot assessment: metrics not written', { error: err.message }));
}

/**
 * COS_RECOVERY's state.yaml made COS_STATE's again after a commit (Elemental writes both). Best
 * effort: the commit stands whatever happens here, and a later commit copies it again.
 */
async function copyToRecovery(d: AssessmentDeps): Promise<void> {
  if (!d.recovery) return;
  try {
    const did = await d.recovery.writable((dir) => copyStateYamlToRecovery(d.cos.dir, dir, readBackText));
    d.log.info('boot assessment: recovery copy of state.yaml', { did: did ?? 'no COS_RECOVERY partition: nothing to copy' });
  } catch (err) {
    d.log.warn("boot assessment: COS_RECOVERY's state.yaml was not updated (a recovery boot sees the images as they were before)", { error: (err as Error).message, hint: 'the next commit copies it again' });
  }
}

/** A node event (the fallback, a committed upgrade) told to hvpxe, logged either way; undefined when there is no way to tell it. */
async function tellHvpxeOf(d: AssessmentDeps, event: NodeEventBody): Promise<HvpxeTold | undefined> {
  if (!d.tellHvpxe) return undefined;
  const told = await d.tellHvpxe(event).catch((err: Error) => ({ told: false, at: iso(d), detail: err.message }));
  if (told.told) d.log.info(`boot assessment: hvpxe told: ${event.event}`, { detail: told.detail });
  else d.log.warn(`boot assessment: hvpxe NOT told: ${event.event}`, { detail: told.detail });
  return told;
}

/** Polls the gate until it passes or fails (or the agent stops: undefined), re-reading the environment for a disarm. */
async function judge(d: AssessmentDeps, startedAt: number, stillArmed: () => Promise<boolean>): Promise<GateVerdict | 'disarmed' | undefined> {
  for (;;) {
    if (d.signal.aborted) return undefined;
    if (!(await stillArmed())) return 'disarmed';
    const v = gateVerdict({ guards: await d.readGuards().catch(() => []), required: d.settings.require, elapsedMs: d.now() - startedAt, deadlineMs: d.settings.deadlineMs });
    if (v.verdict !== 'wait') return v;
    await d.sleep(d.settings.pollMs, d.signal).catch(() => undefined);
  }
}

async function gate(d: AssessmentDeps, upgrade: UpgradeRecord | undefined): Promise<AssessmentOutcome | undefined> {
  // A restarted agent (Restart=on-failure) goes on with the deadline of this boot's attempt, not a fresh one.
  const previous = await readAssessmentRecord(d.recordFile);
  const resumed = previous?.outcome === 'trying' && previous.upgrade?.at === upgrade?.at && previous.attempt?.bootId === d.bootId ? previous.attempt.startedAt : undefined;
  const startedAt = resumed ? Date.parse(resumed) : d.now();
  const name = imageOf(upgrade, 'to');
  const record: AssessmentRecord = { version: 1, outcome: 'trying', updatedAt: iso(d), upgrade, attempt: { startedAt: new Date(startedAt).toISOString(), bootId: d.bootId }, message: `judging ${name}: the node must be healthy (${d.settings.require.join(', ')}) within ${Math.round(d.settings.deadlineMs / 1000)} s, else it boots ${imageOf(upgrade, 'from')} again` };
  await save(d, record);
  await d.announce('info', [`boot assessment: ${record.message}`]);
  const trying = async (): Promise<boolean> => {
    const env = await readAssessmentEnv(d.cos);
    return env?.[ENABLED_VAR] === 'yes' && env[STATE_VAR] === 'trying';
  };
  const v = await judge(d, startedAt, trying);
  if (v === undefined) return undefined;
  if (v === 'disarmed') {
    await save(d, { ...record, outcome: 'disarmed', updatedAt: iso(d), message: `disarmed by the operator while ${name} was judged: no verdict, no reboot` });
    return 'disarmed';
  }
  if (v.verdict === 'pass') {
    await commitUpgrade(d.cos);
    await copyToRecovery(d);
    await save(d, { ...record, outcome: 'committed', updatedAt: iso(d), attempt: { ...record.attempt!, decidedAt: iso(d) }, message: `${name} is healthy and committed (${v.detail})` });
    await d.announce('info', [`boot assessment: ${name} is healthy: committed`]);
    await tellHvpxeOf(d, { event: 'UPGRADED', at: iso(d), running: name });
    return 'committed';
  }
  if (v.verdict !== 'fail') return undefined;
  const verdict = { guard: v.guard, evidence: v.evidence, reason: v.reason };
  const message = `${name} is NOT healthy: ${fallbackReason({ ...record, attempt: { ...record.attempt!, verdict } }, upgrade)}; rebooting once into ${imageOf(upgrade, 'from')}`;
  await save(d, { ...record, outcome: 'failed-rebooting', updatedAt: iso(d), attempt: { ...record.attempt!, decidedAt: iso(d), verdict }, message });
  await d.announce('error', [`boot assessment: ${message}`]);
  if (!(await trying())) return 'disarmed';
  await d.reboot();
  return 'failed-rebooting';
}

async function fallback(d: AssessmentDeps, upgrade: UpgradeRecord | undefined, why: string): Promise<AssessmentOutcome | undefined> {
  const previous = await readAssessmentRecord(d.recordFile);
  const reason = fallbackReason(previous, upgrade);
  const message = `UPGRADE FAILED: ${imageOf(upgrade, 'to')}: ${reason}. ${why}; the node runs ${imageOf(upgrade, 'from')}, which is active.img again; the failed image is kept as ${FAILED_IMAGE_FILE} until the next upgrade`;
  const record: AssessmentRecord = { version: 1, outcome: 'fell-back', updatedAt: iso(d), message, upgrade, attempt: previous?.upgrade?.at === upgrade?.at ? previous?.attempt : undefined, fallback: { committedAt: '', why: reason, failedImage: FAILED_IMAGE_FILE, health: 'judging' } };
  // Told before the commit, which reads the previous image's data once (its new digest): minutes on a slow machine.
  await save(d, record);
  await d.announce('error', [`boot assessment: ${message}`]);
  const did = await commitFallback(d.cos, d.signal);
  for (const x of did) d.log.info('boot assessment: fallback commit', { did: x });
  await copyToRecovery(d);
  record.fallback!.committedAt = iso(d);
  await save(d, { ...record, updatedAt: iso(d) });
  // Beside the judgement, not before it: hvpxe may be down, and its deadline is its own.
  const toldHvpxe = tellHvpxeOf(d, { event: 'FALLBACK', at: record.fallback!.committedAt, message: reason, running: imageOf(upgrade, 'from'), failed: imageOf(upgrade, 'to') });
  const v = await judge(d, d.now(), async () => true);
  // After the judgement: RKE2 and its API had the gate's time to come up.
  await d.tellCluster?.(record).catch((err: Error) => d.log.warn('boot assessment: could not tell the cluster', { error: err.message }));
  const hvpxe = await toldHvpxe;
  if (hvpxe) record.fallback!.hvpxe = hvpxe;
  if (v === undefined || v === 'disarmed' || v.verdict === 'wait') {
    if (hvpxe) await save(d, { ...record, updatedAt: iso(d) });
    return 'fell-back';
  }
  if (v.verdict === 'pass') {
    await save(d, { ...record, updatedAt: iso(d), fallback: { ...record.fallback!, health: 'healthy' } });
    return 'fell-back';
  }
  const unhealthy = { guard: v.guard, evidence: v.evidence };
  await save(d, { ...record, updatedAt: iso(d), message: `${message}. The previous image is NOT healthy either: ${v.guard}: ${v.evidence}; it stays up (no reboot loop): look at the node`, fallback: { ...record.fallback!, health: 'unhealthy', unhealthy } });
  await d.announce('error', [`boot assessment: the previous image is NOT healthy either (${v.guard}: ${v.evidence}); staying up, no reboot: an operator must look at this node`]);
  return 'fell-back';
}

/** One decision per boot; returns what happened (undefined: nothing to assess, or stopped). */
export async function runAssessment(d: AssessmentDeps): Promise<AssessmentOutcome | undefined> {
  if (await tidyCommittedFallback(d.cos).catch(() => false)) d.log.info('boot assessment: finished an interrupted fallback commit (passive.img name removed)');
  const env = await readAssessmentEnv(d.cos);
  const action = bootAction(env, d.cmdline);
  const upgrade = await readFile(d.upgradeFile, 'utf8').then((t) => JSON.parse(t) as UpgradeRecord).catch(() => undefined);
  if (action.kind === 'gate') return gate(d, upgrade);
  if (action.kind === 'commit-fallback') return fallback(d, upgrade, action.why);
  if (action.kind === 'unrecorded') {
    await save(d, { version: 1, outcome: 'unrecorded', updatedAt: iso(d), upgrade, message: action.why });
    await d.announce('error', [`boot assessment: ${action.why}`]);
    return 'unrecorded';
  }
  d.log.info('boot assessment: nothing to decide', { why: action.why });
  return undefined;
}
