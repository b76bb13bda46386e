/** The gate's settings: `assessment:` in /etc/hvagent/config.yaml (docs/upgrade.md). */
import { ExitCode, HvError } from '../../lib/errors.js';
import { GUARD_ORDER, type GuardName } from '../guard.js';
import { parseDuration } from '../settings.js';
import { DEFAULT_GATE_DEADLINE_MS, DEFAULT_GATE_GUARDS } from './decide.js';

export interface GateSettings {
  deadlineMs: number;
  require: GuardName[];
  pollMs: number;
}

export function gateSettings(common: Record<string, unknown>): GateSettings {
  const raw = common.assessment;
  if (raw === undefined || raw === null) return { deadlineMs: DEFAULT_GATE_DEADLINE_MS, require: [...DEFAULT_GATE_GUARDS], pollMs: 5000 };
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new HvError('assessment: must be a mapping (deadline, require, pollInterval)', { exitCode: ExitCode.usage });
  const a = raw as Record<string, unknown>;
  const require = a.require === undefined ? [...DEFAULT_GATE_GUARDS] : a.require;
  if (!Array.isArray(require) || require.some((g) => !GUARD_ORDER.includes(g as GuardName))) {
    throw new HvError(`assessment.require: a list of guards (${GUARD_ORDER.join(', ')})`, { exitCode: ExitCode.usage });
  }
  return {
    deadlineMs: a.deadline === undefined ? DEFAULT_GATE_DEADLINE_MS : parseDuration(a.deadline, 'assessment.deadline'),
    require: require as GuardName[],
    pollMs: a.pollInterval === undefined ? 5000 : parseDuration(a.pollInterval, 'assessment.pollInterval'),
  };
}
