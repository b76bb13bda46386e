/**
 * The contract every hvagent guard implements. A guard is a reconciler: it observes, compares with
 * the desired state, acts, and reports. The runner (agent/runner.ts) owns ordering, retries with
 * backoff, deadlines, the status document and SIGTERM; guards own only their job.
 */
import type { Logger } from '../lib/logger.js';
import type { HarvesterConfig } from '../config/types.js';
import type { Bootstrapper } from '../lib/image-profile.js';

export type GuardName =
  | 'network-online'
  | 'node-identity'
  | 'time-sync'
  | 'certificates'
  | 'image-preload'
  | 'registries'
  | 'rke2'
  | 'vip'
  | 'longhorn-disk'
  | 'promotion';

/** Dependency order; a guard runs once everything before it that it depends on has succeeded. */
export const GUARD_ORDER: GuardName[] = ['network-online', 'node-identity', 'time-sync', 'certificates', 'registries', 'image-preload', 'rke2', 'vip', 'longhorn-disk', 'promotion'];

/** `stopped`: the agent was stopped (SIGTERM) before the guard finished. */
export type GuardPhase = 'pending' | 'running' | 'waiting' | 'succeeded' | 'failed' | 'skipped' | 'watching' | 'stopped';

export interface GuardContext {
  /** Every absolute node path goes through root(): `/` in production, a temp dir in tests. */
  root: (p: string) => string;
  /** The installed node's config, as read from /oem (undefined when none could be read). */
  config?: HarvesterConfig;
  log: Logger;
  /** Aborts at the attempt's deadline and when the agent stops: every wait of the guard ends on it. */
  signal: AbortSignal;
  /**
   * Aborts only when the agent stops (SIGTERM/SIGINT), not at the deadline: for requests in flight,
   * which a stop abandons but a deadline lets answer, so that the guard's last reason is the
   * answer (`connect EHOSTUNREACH`), not the deadline's cut.
   */
  stopping?: AbortSignal;
  /** Per-guard settings from the agent config file / flags (deadlines, addresses, binaries). */
  settings: Record<string, unknown>;
  /** Report progress for `hvagent status` (e.g. "archive 3/6: 412 MiB"). */
  progress: (detail: string) => void;
  /**
   * Structured facts for `hvagent status --json` (and the metrics that will read them): the last
   * measured clock offset, the recorded and the current address, re-import counts. Replaces the
   * guard's previous data.
   */
  report?: (data: Record<string, unknown>) => void;
  now: () => number;
  /**
   * Who bootstraps RKE2 on this node (agent/mode.ts): rancherd (hvagent only watches rke2, vip and
   * promotion) or hvagent (also when absent).
   */
  bootstrapper?: Bootstrapper;
}

export type GuardResult =
  /** Desired state reached. */
  | { status: 'ok'; detail?: string }
  /** Not applicable on this node (e.g. promotion on a create node). */
  | { status: 'skip'; reason: string }
  /** Not there yet but may be: retry after backoff, until the guard's deadline. */
  | { status: 'retry'; reason: string }
  /** Cannot succeed without a person: stop and report. */
  | { status: 'fail'; diagnosis: string; hint?: string };

/** What a guard that needs the node's configuration reports without one. */
export const NO_NODE_CONFIG: GuardResult = {
  status: 'fail',
  diagnosis: 'no node configuration found under /oem',
  hint: 'the installer writes /oem/harvester.config; reinstall or restore it',
};

export interface Guard {
  name: GuardName;
  /** Guards this one needs to have succeeded first (ignored with `--guard`). */
  dependsOn: GuardName[];
  /** Default overall deadline in ms for reaching ok (the runner then reports a diagnosis). */
  deadlineMs: number;
  /** One reconcile pass. Must itself be bounded (use lib/wait.ts, timeouts on every call). */
  reconcile(ctx: GuardContext): Promise<GuardResult>;
  /**
   * Optional: after ok, keep the state (registries.yaml restored on drift, promotion watch).
   * Resolves when ctx.signal aborts.
   */
  watch?(ctx: GuardContext): Promise<void>;
}

export interface GuardStatus {
  name: GuardName;
  phase: GuardPhase;
  attempts: number;
  detail?: string;
  lastError?: string;
  hint?: string;
  nextRetryAt?: string;
  startedAt?: string;
  finishedAt?: string;
  updatedAt: string;
  /** What the guard last reported through ctx.report (numbers and names, no prose). */
  data?: Record<string, unknown>;
}

/** /run/hvagent/status.json */
export interface StatusDocument {
  version: 1;
  pid: number;
  startedAt: string;
  updatedAt: string;
  guards: GuardStatus[];
  /** `run` or `once`. */
  mode?: 'run' | 'once';
  /** running; finished (every guard done, nothing to watch); stopped (SIGTERM/SIGINT). */
  state?: 'running' | 'finished' | 'stopped';
  stoppedAt?: string;
  /** Who bootstraps RKE2 and why (agent/mode.ts). */
  bootstrap?: { by: Bootstrapper; why: string };
  /** When systemd was told the node is prepared (READY=1), and the status line sent with it. */
  ready?: { at: string; status: string };
}
