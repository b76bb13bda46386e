/**
 * What hvagent concluded about the last upgrade, kept on COS_OEM (/oem/hvinstall/assessment.json)
 * so that it survives the reboot into the fallback and is told on every boot after: `hvagent
 * status`, `hvagent assessment status`, the console, the metrics.
 */
import { readFile } from 'node:fs/promises';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import type { GuardName } from '../guard.js';
import type { UpgradeRecord } from '../../node/boot-assessment.js';

export type AssessmentOutcome =
  /** The gate is judging the upgraded image on this boot. */
  | 'trying'
  /** The upgraded image passed: it is the node's image now. */
  | 'committed'
  /** The gate failed: the node reboots once into the previous image. */
  | 'failed-rebooting'
  /** Booted the previous image after a failed attempt: it is active.img again. */
  | 'fell-back'
  /** Armed but grub could not record the attempt: booted unassessed. */
  | 'unrecorded'
  | 'disarmed'
  | 'armed';

export interface AssessmentRecord {
  version: 1;
  outcome: AssessmentOutcome;
  updatedAt: string;
  /** One line for people: what happened and what to do. */
  message: string;
  upgrade?: UpgradeRecord;
  attempt?: { startedAt: string; bootId?: string; decidedAt?: string; verdict?: { guard: GuardName; evidence: string; reason: 'failed' | 'deadline' } };
  fallback?: {
    /** '' while the commit runs. */ committedAt: string;
    why: string;
    failedImage: string;
    health?: 'healthy' | 'unhealthy' | 'judging';
    unhealthy?: { guard: GuardName; evidence: string };
    /** Whether hvpxe was told (tell-hvpxe.ts): told, or why not. */
    hvpxe?: HvpxeTold;
  };
}

/** The FALLBACK event to hvpxe: posted (when), or not told (why). */
export interface HvpxeTold {
  told: boolean;
  at: string;
  detail: string;
}

export async function readAssessmentRecord(file: string): Promise<AssessmentRecord | undefined> {
  const text = await readFile(file, 'utf8').catch(() => undefined);
  if (!text) return undefined;
  try {
    const r = JSON.parse(text) as AssessmentRecord;
    return r.version === 1 ? r : undefined;
  } catch {
    return undefined;
  }
}

export async function writeAssessmentRecord(file: string, record: AssessmentRecord): Promise<void> {
  await writeFileAtomic(file, JSON.stringify(record, null, 2) + '\n');
}

/** Why the attempt failed, as the fallback boot tells it, from what the attempt's boot recorded. Pure. */
export function fallbackReason(previous: AssessmentRecord | undefined, upgrade: UpgradeRecord | undefined): string {
  const same = previous?.upgrade?.at !== undefined && previous.upgrade.at === upgrade?.at;
  const v = same ? previous?.attempt?.verdict : undefined;
  if (v) return v.reason === 'deadline' ? `the health gate's deadline passed with ${v.guard} not healthy: ${v.evidence}` : `${v.guard} failed: ${v.evidence}`;
  if (same && previous?.attempt?.startedAt) return `the upgraded image reached hvagent (it began judging at ${previous.attempt.startedAt}) but went back to grub before a verdict: a crash, a reset or a power cut; see the journal of that boot (journalctl --list-boots)`;
  return 'the upgraded image never reached hvagent: a kernel panic, an initramfs emergency, a crashed systemd or a reset before it started (the attempt boots with panic=5 rd.emergency=reboot systemd.crash_reboot, so each of these returns to grub)';
}
