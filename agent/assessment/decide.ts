/**
 * hvagent's decisions on boot assessment, pure over typed facts (the grub environment on
 * COS_STATE, the kernel line, the guards' statuses): what this boot is (an attempt to judge, a
 * fallback to commit, nothing), and the health gate's verdict. "Healthy" is the node as it was
 * before the upgrade: the guards that bring it up all passed (docs/upgrade.md).
 */
import type { GuardName, GuardStatus } from '../guard.js';
import { ATTEMPT_MARKER, bootedImage, ENABLED_VAR, STATE_VAR } from '../../node/boot-assessment.js';

export type BootAction =
  | { kind: 'none'; why: string }
  | { kind: 'gate' }
  | { kind: 'commit-fallback'; why: string }
  /** Armed, but grub did not record the attempt (it cannot write COS_STATE): no reboot could fall back. */
  | { kind: 'unrecorded'; why: string }
  | { kind: 'disabled'; why: string };

/** What this boot is, from COS_STATE/hv_assessment (undefined: none) and /proc/cmdline. Pure. */
export function bootAction(env: Record<string, string> | undefined, cmdline: string): BootAction {
  if (!env) return { kind: 'none', why: 'no boot assessment on this node (COS_STATE/hv_assessment is missing)' };
  const state = env[STATE_VAR] ?? '';
  const booted = bootedImage(cmdline);
  if (env[ENABLED_VAR] !== 'yes') return { kind: 'disabled', why: `boot assessment is disabled${state ? ` (state ${state} left as it is)` : ''}` };
  if (booted === 'recovery') return { kind: 'none', why: 'booted the recovery image: nothing is assessed' };
  if (state === '') return { kind: 'none', why: 'no upgrade pending' };
  if (state === 'armed') {
    if (booted === 'active') return { kind: 'unrecorded', why: 'an upgrade armed the assessment, but grub booted the new image without recording its attempt (grub cannot write COS_STATE: LVM, RAID or a firmware without disk writes): nothing would fall back from this boot' };
    return { kind: 'none', why: 'an upgrade is armed: the next boot of active.img tries it' };
  }
  if (state === 'trying' && booted === 'active') return { kind: 'gate' };
  if (booted === 'passive') {
    return { kind: 'commit-fallback', why: state === 'trying' ? 'grub could not start the upgraded image and booted the previous one' : 'the upgraded image failed its attempt and grub booted the previous one' };
  }
  return { kind: 'none', why: `assessment state ${state} on ${booted ?? 'an unknown image'}: booted by hand; nothing is decided on this boot` };
}

export interface GateVerdictInput {
  guards: readonly GuardStatus[];
  required: readonly GuardName[];
  elapsedMs: number;
  deadlineMs: number;
}

export type GateVerdict =
  | { verdict: 'pass'; detail: string }
  | { verdict: 'wait'; waitingFor: GuardName; evidence: string }
  | { verdict: 'fail'; guard: GuardName; evidence: string; reason: 'failed' | 'deadline' };

const evidenceOf = (g: GuardStatus | undefined): string => (g ? (g.lastError ?? g.detail ?? `phase ${g.phase}`) + (g.hint ? ` (${g.hint})` : '') : 'not started');

/**
 * The gate over the guards' statuses: pass when every required guard succeeded (or is watching,
 * or was skipped as not applicable); fail at the first required guard that failed, or at the
 * deadline naming the first one not there yet with its last error. Pure.
 */
export function gateVerdict(input: GateVerdictInput): GateVerdict {
  const byName = new Map(input.guards.map((g) => [g.name, g]));
  let waiting: GuardName | undefined;
  for (const name of input.required) {
    const g = byName.get(name);
    if (g && (g.phase === 'succeeded' || g.phase === 'watching' || g.phase === 'skipped')) continue;
    if (g?.phase === 'failed') return { verdict: 'fail', guard: name, evidence: evidenceOf(g), reason: 'failed' };
    waiting ??= name;
  }
  if (waiting === undefined) return { verdict: 'pass', detail: `healthy: ${input.required.join(', ')} passed` };
  const evidence = evidenceOf(byName.get(waiting));
  if (input.elapsedMs >= input.deadlineMs) return { verdict: 'fail', guard: waiting, evidence, reason: 'deadline' };
  return { verdict: 'wait', waitingFor: waiting, evidence };
}

/** The guards the gate requires by default: the node's network, identity, clock, RKE2 and Longhorn disk. */
export const DEFAULT_GATE_GUARDS: readonly GuardName[] = ['network-online', 'node-identity', 'time-sync', 'rke2', 'longhorn-disk'];
export const DEFAULT_GATE_DEADLINE_MS = 15 * 60_000;
