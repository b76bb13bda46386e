/**
 * `hvagent assessment status|disarm|arm`: what the last upgrade's assessment concluded, and the
 * operator's switch. Disarm cancels what is pending (the next boot is an ordinary one, a running
 * gate stops without rebooting) and leaves later upgrades unassessed until `arm`; arm enables it
 * again (an upgrade arms the next boot, as `hvinstall upgrade` and `elemental upgrade` do).
 */
import path from 'node:path';
import { ExitCode, HvError } from '../../lib/errors.js';
import { ASSESSMENT_RECORD_PATH, COS_STATE_MOUNT, ENABLED_VAR, STATE_VAR } from '../../node/boot-assessment.js';
import { cosState, readAssessmentEnv, setAssessmentEnv } from './cos-state.js';
import { readAssessmentRecord, type AssessmentRecord } from './record.js';

export const ASSESSMENT_USAGE = `usage: hvagent assessment [status|disarm|arm] [--json] [--root DIR]

Boot assessment of upgrades (docs/upgrade.md).
  status   the grub state on COS_STATE and what hvagent concluded about the last upgrade (default)
  disarm   cancel a pending attempt or fallback decision and assess no later upgrade (no reboot,
           no fallback) until 'arm'
  arm      assess upgrades again: the next upgrade's first boot is tried once
  --json   status as JSON
  --root DIR  the node's root (default /)
Exit codes: 0 ok; 1 the last upgrade fell back or could not be assessed; 2 usage or no COS_STATE.`;

export interface AssessmentView {
  enabled: boolean;
  state: string;
  record?: AssessmentRecord;
}

/** One line for `hvagent status` and the console. Pure. */
export function assessmentLine(v: AssessmentView | undefined): string {
  if (!v) return 'boot assessment: not installed on this node';
  const sw = v.enabled ? 'enabled' : 'DISABLED (hvagent assessment arm)';
  const pending = v.state ? `, pending: ${v.state}` : '';
  const hv = v.record?.fallback?.hvpxe;
  const told = hv ? (hv.told ? '; hvpxe told' : `; hvpxe NOT told: ${hv.detail}`) : '';
  return `boot assessment: ${sw}${pending}${v.record ? `; last: ${v.record.outcome}: ${v.record.message}${told}` : ''}`;
}

/** The line for the node's status screen, only when it matters now: an attempt, a fallback, an unassessed upgrade. Pure. */
export function notableAssessment(v: AssessmentView | undefined): string | undefined {
  const o = v?.record?.outcome;
  return o === 'trying' || o === 'failed-rebooting' || o === 'fell-back' || o === 'unrecorded' ? assessmentLine(v) : undefined;
}

export async function readAssessmentView(rootDir: string): Promise<AssessmentView | undefined> {
  const root = (p: string): string => (rootDir === '/' ? p : path.join(rootDir, p));
  const env = await readAssessmentEnv(cosState(root(COS_STATE_MOUNT), false)).catch(() => undefined);
  if (!env) return undefined;
  return { enabled: env[ENABLED_VAR] === 'yes', state: env[STATE_VAR] ?? '', record: await readAssessmentRecord(root(ASSESSMENT_RECORD_PATH)) };
}

export async function assessmentCommand(action: string, rootDir: string, json: boolean): Promise<number> {
  const root = (p: string): string => (rootDir === '/' ? p : path.join(rootDir, p));
  const cos = cosState(root(COS_STATE_MOUNT), rootDir === '/');
  if (action === 'disarm' || action === 'arm') {
    if (!(await readAssessmentEnv(cos).catch(() => undefined))) {
      throw new HvError(`no boot-assessment state on COS_STATE (${root(COS_STATE_MOUNT)})`, { hint: 'hvinstall installs it; a node installed before it gets it with its first hvinstall upgrade', exitCode: ExitCode.usage });
    }
    await setAssessmentEnv(cos, action === 'disarm' ? { [ENABLED_VAR]: 'no', [STATE_VAR]: '' } : { [ENABLED_VAR]: 'yes' });
    process.stdout.write(action === 'disarm' ? 'boot assessment disarmed: nothing pending, later upgrades are not assessed until `hvagent assessment arm`\n' : 'boot assessment armed: the first boot after the next upgrade is tried once\n');
    return ExitCode.ok;
  }
  if (action !== 'status') throw new HvError(`unknown assessment action '${action}'`, { hint: ASSESSMENT_USAGE, exitCode: ExitCode.usage });
  const view = await readAssessmentView(rootDir);
  process.stdout.write(json ? JSON.stringify(view ?? null, null, 2) + '\n' : assessmentLine(view) + '\n');
  const bad = view?.record?.outcome === 'fell-back' || view?.record?.outcome === 'unrecorded' || view?.record?.outcome === 'failed-rebooting';
  return bad ? ExitCode.checkFailed : ExitCode.ok;
}
