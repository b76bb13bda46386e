/**
 * The agent's own settings file (`/etc/hvagent/config.yaml` under the root): deadlines, backoff,
 * socket and binary paths. Everything has a default, so the file is optional.
 */
import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { HvError, ExitCode } from '../lib/errors.js';
import { GUARD_ORDER, type GuardName } from './guard.js';
import { CANONICAL_CONFIG_PATH, HARVESTER_CONFIG_PATH } from '../node/index.js';

export const SETTINGS_PATH = '/etc/hvagent/config.yaml';
export const STATUS_PATH = '/run/hvagent/status.json';

export interface BackoffSettings {
  /** First delay after a `retry` result. */
  initialMs: number;
  /** Upper bound of the doubling delay. */
  maxMs: number;
}

export interface AgentSettings {
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  backoff: BackoffSettings;
  /**
   * In `run` mode a guard that failed (deadline or `fail`) is tried again after this long, with a
   * fresh deadline; its dependents wait meanwhile. `once` never retries a failed guard.
   */
  retryFailedAfterMs: number;
  /** Settings every guard sees (containerd socket, rke2 binary, …), overridden per guard. */
  common: Record<string, unknown>;
  /** Per-guard settings; `deadline` (duration) overrides the guard's default deadline. */
  guards: Partial<Record<GuardName, Record<string, unknown>>>;
}

export const DEFAULT_COMMON: Record<string, unknown> = {
  containerdSocket: '/run/k3s/containerd/containerd.sock',
  rke2Binary: '/opt/rke2/bin/rke2',
  /** What the installer wrote, in Harvester's lowercase form: read first. */
  configFile: HARVESTER_CONFIG_PATH,
  /** The renderer's canonical (camelCase JSON) copy: read when harvester.config is missing or unreadable. */
  canonicalConfigFile: CANONICAL_CONFIG_PATH,
};

export function defaultSettings(): AgentSettings {
  return {
    logLevel: 'info',
    backoff: { initialMs: 1000, maxMs: 30_000 },
    retryFailedAfterMs: 300_000,
    common: { ...DEFAULT_COMMON },
    guards: {},
  };
}

/** Parses "300ms", "30s", "5m", "1h" or a number of milliseconds. */
export function parseDuration(value: unknown, where: string): number {
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return value;
  if (typeof value === 'string') {
    const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(value);
    if (m) {
      const n = Number(m[1]);
      const unit = m[2] ?? 'ms';
      return Math.round(n * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit]!);
    }
  }
  throw new HvError(`${where}: invalid duration ${JSON.stringify(value)}`, {
    hint: 'write a number of milliseconds or a number with a unit: 500ms, 30s, 5m, 1h',
    exitCode: ExitCode.usage,
  });
}

const RUNNER_KEYS = new Set(['logLevel', 'backoff', 'retryFailedAfter', 'guards']);
const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;

/** Validates a parsed settings document and merges it over the defaults. Pure. */
export function resolveSettings(raw: unknown, source: string): AgentSettings {
  const s = defaultSettings();
  if (raw === null || raw === undefined) return s;
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    throw new HvError(`${source}: the agent settings must be a YAML mapping`, { exitCode: ExitCode.usage });
  }
  const doc = raw as Record<string, unknown>;
  if (doc.logLevel !== undefined) {
    if (!LOG_LEVELS.includes(doc.logLevel as never)) {
      throw new HvError(`${source}: logLevel must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(doc.logLevel)}`, { exitCode: ExitCode.usage });
    }
    s.logLevel = doc.logLevel as AgentSettings['logLevel'];
  }
  if (doc.backoff !== undefined) {
    if (typeof doc.backoff !== 'object' || doc.backoff === null) {
      throw new HvError(`${source}: backoff must be a mapping {initial, max}`, { exitCode: ExitCode.usage });
    }
    const b = doc.backoff as Record<string, unknown>;
    if (b.initial !== undefined) s.backoff.initialMs = parseDuration(b.initial, `${source}: backoff.initial`);
    if (b.max !== undefined) s.backoff.maxMs = parseDuration(b.max, `${source}: backoff.max`);
    if (s.backoff.maxMs < s.backoff.initialMs) s.backoff.maxMs = s.backoff.initialMs;
  }
  if (doc.retryFailedAfter !== undefined) s.retryFailedAfterMs = parseDuration(doc.retryFailedAfter, `${source}: retryFailedAfter`);
  for (const [k, v] of Object.entries(doc)) if (!RUNNER_KEYS.has(k)) s.common[k] = v;
  if (doc.guards !== undefined) {
    if (typeof doc.guards !== 'object' || doc.guards === null || Array.isArray(doc.guards)) {
      throw new HvError(`${source}: guards must be a mapping of guard name to settings`, { exitCode: ExitCode.usage });
    }
    for (const [name, v] of Object.entries(doc.guards as Record<string, unknown>)) {
      if (!GUARD_ORDER.includes(name as GuardName)) {
        throw new HvError(`${source}: guards.${name}: unknown guard`, { hint: `guards are: ${GUARD_ORDER.join(', ')}`, exitCode: ExitCode.usage });
      }
      if (v === null || v === undefined) continue;
      if (typeof v !== 'object' || Array.isArray(v)) {
        throw new HvError(`${source}: guards.${name} must be a mapping`, { exitCode: ExitCode.usage });
      }
      const g = { ...(v as Record<string, unknown>) };
      if (g.deadline !== undefined) parseDuration(g.deadline, `${source}: guards.${name}.deadline`);
      s.guards[name as GuardName] = g;
    }
  }
  return s;
}

/** Reads the settings file; a missing file means all defaults. */
export async function loadSettings(file: string): Promise<AgentSettings> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return defaultSettings();
    throw new HvError(`cannot read the agent settings ${file}: ${(err as Error).message}`, { exitCode: ExitCode.usage });
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new HvError(`${file}: not valid YAML: ${(err as Error).message}`, { exitCode: ExitCode.usage });
  }
  return resolveSettings(raw, file);
}

/** The settings one guard sees: common settings overlaid with its own section. */
export function guardSettings(s: AgentSettings, name: GuardName): Record<string, unknown> {
  return { ...s.common, ...(s.guards[name] ?? {}) };
}

/** The guard's deadline: its `deadline` setting, else its own default. */
export function guardDeadlineMs(s: AgentSettings, name: GuardName, fallbackMs: number): number {
  const d = s.guards[name]?.deadline;
  return d === undefined ? fallbackMs : parseDuration(d, `guards.${name}.deadline`);
}
