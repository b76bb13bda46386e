/**
 * The image-preload guard's settings (the agent config file's `guards.image-preload` mapping, over
 * the common settings). Paths are node paths: the guard passes them through ctx.root().
 */
import { HvError, ExitCode } from '../../lib/errors.js';

export interface PreloadSettings {
  /** containerd's gRPC socket (common setting `containerdSocket`). */
  containerdSocket: string;
  /** The bundle directory; when unset, the first of DEFAULT_BUNDLE_DIRS that exists. */
  bundleDirs: string[];
  /** Fail (instead of skip) when no bundle is found. */
  required: boolean;
  /** metadata.yaml sections to import; undefined = all. */
  sections?: string[];
  namespace: string;
  /** Imports running at once. */
  parallelism: number;
  /** No byte through the import pipe for this long → kill the import and retry. */
  stallTimeoutMs: number;
  /** After the last byte: how long ctr may take to finish (it commits and creates the images). */
  finishTimeoutMs: number;
  /** Attempts per archive in one pass. */
  attempts: number;
  retryDelayMs: number;
  retryMaxDelayMs: number;
  /** How long to wait for containerd to answer before an attempt. */
  containerdWaitMs: number;
  /** The bounded final check that every listed image is present. */
  verifyTimeoutMs: number;
  /** ctr and zstd executables; ctr default: RKE2's, else ctr on PATH. */
  ctr?: string;
  zstd: string;
  /** Unpack into the snapshotter during import (Harvester imports with --no-unpack). */
  unpack: boolean;
  /**
   * `api`: docker archives go into containerd over its own API from the agent (no ctr process);
   * OCI layouts, other platforms and `unpack: true` still go through ctr. `ctr`: ctr for every archive.
   */
  importer: 'api' | 'ctr';
  /**
   * `auto`: when nothing answers on the socket, start a standalone containerd on RKE2's root and
   * state for the preload and stop it afterwards (RKE2 is not running yet: the rke2 guard waits
   * for this one). `never`: only wait (bounded) for a running containerd.
   */
  startContainerd: 'auto' | 'never';
  /**
   * The image's own containerd unit on the socket, if it has one: while systemd has it up or
   * starting, the preload waits for it (containerdWait) instead of starting a standalone one.
   */
  containerdUnit: string;
  /** For the standalone containerd; binary default: RKE2's, else containerd on PATH. */
  containerdBinary?: string;
  containerdRoot: string;
  containerdState: string;
  /** run mode, after success: how often the bundle's images are checked against containerd's. */
  watchIntervalMs: number;
  /** At most one re-import of images kubelet's image GC removed per this interval … */
  reimportMinIntervalMs: number;
  /** … and at most this many a day (GC under disk pressure would remove them again at once). */
  reimportsPerDay: number;
}

/** Where the bundle is looked for, in order (node paths). */
export const DEFAULT_BUNDLE_DIRS = [
  // Where the installer copies the ISO's bundle/ for the agent: under /var/lib/rancher, which
  // cOS keeps on COS_PERSISTENT (PERSISTENT_STATE_PATHS), so it survives reboots until imported.
  '/var/lib/rancher/hvagent/bundle',
  // The live ISO itself, when the node still runs from it (dracut dmsquash-live mounts it here).
  '/run/initramfs/live/bundle',
];
export const DEFAULT_CONTAINERD_SOCKET = '/run/k3s/containerd/containerd.sock';
export const RKE2_CTR = '/var/lib/rancher/rke2/bin/ctr';
export const RKE2_CONTAINERD = '/var/lib/rancher/rke2/bin/containerd';
export const RKE2_CONTAINERD_ROOT = '/var/lib/rancher/rke2/agent/containerd';
export const RKE2_CONTAINERD_STATE = '/run/k3s/containerd';

export function defaultPreloadSettings(): PreloadSettings {
  return {
    containerdSocket: DEFAULT_CONTAINERD_SOCKET,
    bundleDirs: [...DEFAULT_BUNDLE_DIRS],
    required: false,
    namespace: 'k8s.io',
    parallelism: 3,
    stallTimeoutMs: 120_000,
    finishTimeoutMs: 600_000,
    attempts: 3,
    retryDelayMs: 2_000,
    retryMaxDelayMs: 30_000,
    containerdWaitMs: 60_000,
    verifyTimeoutMs: 30_000,
    zstd: 'zstd',
    unpack: false,
    importer: 'api',
    startContainerd: 'auto',
    containerdUnit: 'containerd.service',
    containerdRoot: RKE2_CONTAINERD_ROOT,
    containerdState: RKE2_CONTAINERD_STATE,
    watchIntervalMs: 300_000,
    reimportMinIntervalMs: 900_000,
    reimportsPerDay: 12,
  };
}

function settingError(key: string, message: string, hint?: string): HvError {
  return new HvError(`image-preload setting ${key}: ${message}`, { where: `guards.image-preload.${key}`, hint, exitCode: ExitCode.usage });
}

/** "500ms", "30s", "5m", "1h" or a number of milliseconds. */
export function parseDurationSetting(key: string, value: unknown): number {
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return value;
  if (typeof value === 'string') {
    const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(value);
    if (m) return Math.round(Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 'ms') as 'ms']);
  }
  throw settingError(key, `invalid duration ${JSON.stringify(value)}`, 'write milliseconds or a number with a unit: 500ms, 30s, 5m, 1h');
}

function positiveInt(key: string, value: unknown, max: number): number {
  const n = typeof value === 'string' && /^\d+$/.test(value.trim()) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > max) {
    throw settingError(key, `must be a whole number from 1 to ${max}, got ${JSON.stringify(value)}`);
  }
  return n;
}

function nonEmptyString(key: string, value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '') throw settingError(key, `must be a non-empty string, got ${JSON.stringify(value)}`);
  return value.trim();
}

function bool(key: string, value: unknown): boolean {
  if (typeof value === 'boolean') return value;
  if (value === 'true' || value === 'false') return value === 'true';
  throw settingError(key, `must be true or false, got ${JSON.stringify(value)}`);
}

const DURATIONS = {
  stallTimeout: 'stallTimeoutMs',
  finishTimeout: 'finishTimeoutMs',
  retryDelay: 'retryDelayMs',
  retryMaxDelay: 'retryMaxDelayMs',
  containerdWait: 'containerdWaitMs',
  verifyTimeout: 'verifyTimeoutMs',
  watchInterval: 'watchIntervalMs',
  reimportMinInterval: 'reimportMinIntervalMs',
} as const;

const KNOWN = [
  'containerdSocket', 'bundleDir', 'required', 'sections', 'namespace', 'parallelism', 'attempts',
  ...Object.keys(DURATIONS), 'ctr', 'zstd', 'unpack', 'importer', 'startContainerd', 'containerdUnit', 'containerdBinary', 'containerdRoot', 'containerdState', 'reimportsPerDay',
];

/** Edit distance, for telling a misspelt key of ours from another guard's key. */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cur = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = cur;
    }
  }
  return row[b.length]!;
}

function looksLikeOurs(key: string): boolean {
  const k = key.toLowerCase();
  return KNOWN.some((known) => distance(known.toLowerCase(), k) <= 2);
}

/** Keys the runner or other guards own, which this guard ignores. */
const FOREIGN = new Set(['deadline', 'rke2Binary', 'configFile']);

/** Validates the guard's settings mapping and merges it over the defaults. Pure; throws HvError. */
export function resolvePreloadSettings(raw: Record<string, unknown>): PreloadSettings {
  const s = defaultPreloadSettings();
  for (const [key, value] of Object.entries(raw)) {
    if (value === undefined || value === null) continue;
    if (key in DURATIONS) {
      s[DURATIONS[key as keyof typeof DURATIONS]] = parseDurationSetting(key, value);
      continue;
    }
    switch (key) {
      case 'containerdSocket':
      case 'address':
        s.containerdSocket = nonEmptyString(key, value);
        break;
      case 'bundleDir':
        s.bundleDirs = [nonEmptyString(key, value)];
        break;
      case 'required':
        s.required = bool(key, value);
        break;
      case 'sections':
        if (!Array.isArray(value) || value.length === 0 || !value.every((v) => typeof v === 'string' && v !== '')) {
          throw settingError(key, 'must be a non-empty list of metadata.yaml sections (common, rke2, agent)');
        }
        s.sections = value as string[];
        break;
      case 'namespace':
        s.namespace = nonEmptyString(key, value);
        break;
      case 'parallelism':
        s.parallelism = positiveInt(key, value, 16);
        break;
      case 'attempts':
        s.attempts = positiveInt(key, value, 20);
        break;
      case 'ctr':
        s.ctr = nonEmptyString(key, value);
        break;
      case 'zstd':
        s.zstd = nonEmptyString(key, value);
        break;
      case 'unpack':
        s.unpack = bool(key, value);
        break;
      case 'importer':
        if (value !== 'api' && value !== 'ctr') throw settingError(key, `must be api or ctr, got ${JSON.stringify(value)}`);
        s.importer = value;
        break;
      case 'startContainerd':
        if (value !== 'auto' && value !== 'never') throw settingError(key, `must be auto or never, got ${JSON.stringify(value)}`);
        s.startContainerd = value;
        break;
      case 'containerdUnit':
        s.containerdUnit = nonEmptyString(key, value);
        break;
      case 'containerdBinary':
        s.containerdBinary = nonEmptyString(key, value);
        break;
      case 'containerdRoot':
        s.containerdRoot = nonEmptyString(key, value);
        break;
      case 'containerdState':
        s.containerdState = nonEmptyString(key, value);
        break;
      case 'reimportsPerDay':
        s.reimportsPerDay = positiveInt(key, value, 1000);
        break;
      default:
        // Common settings meant for other guards pass through every guard's settings; only a key
        // that looks like a misspelling of one of ours is an error.
        if (!FOREIGN.has(key) && looksLikeOurs(key)) {
          throw settingError(key, 'unknown setting', `known: ${KNOWN.join(', ')}`);
        }
    }
  }
  if (s.stallTimeoutMs < 100) throw settingError('stallTimeout', 'must be at least 100ms');
  if (s.retryMaxDelayMs < s.retryDelayMs) s.retryMaxDelayMs = s.retryDelayMs;
  return s;
}
