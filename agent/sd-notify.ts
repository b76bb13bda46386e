/**
 * Readiness for systemd (Type=notify): READY=1 once the guards that must run before the bootstrap
 * (network-online, node-identity, time-sync, registries, image-preload, longhorn-disk) have each come
 * to an end — succeeded,
 * skipped or failed at their deadline — so rancherd, ordered after hvagent, starts on a prepared
 * node and never waits forever. Sent with systemd-notify (Node has no AF_UNIX datagram sockets;
 * NotifyAccess=all in the unit lets the child speak for the service). Nothing is sent without
 * NOTIFY_SOCKET (a terminal, the tests, `once`).
 */
import { run } from '../lib/exec.js';
import type { Logger } from '../lib/logger.js';
import type { GuardName, GuardPhase } from './guard.js';

/** What rancherd (and RKE2) must find done. */
export const PRE_BOOTSTRAP_GUARDS: GuardName[] = ['network-online', 'node-identity', 'time-sync', 'registries', 'image-preload', 'longhorn-disk'];

/** An outcome the runner reached for a guard; undefined while it is still at work. */
export type SettledOutcome = 'ok' | 'skip' | 'failed' | 'unavailable';

export interface Readiness {
  ready: boolean;
  /** For STATUS=: each guard's outcome, failures named. */
  status: string;
}

/** Ready when every pre-bootstrap guard in the run has settled. Guards not in the run do not count. Pure. */
export function readiness(outcomes: ReadonlyMap<GuardName, SettledOutcome | 'stopped' | undefined>, inRun: GuardName[], guards: GuardName[] = PRE_BOOTSTRAP_GUARDS): Readiness {
  const wanted = guards.filter((g) => inRun.includes(g));
  const pending = wanted.filter((g) => !['ok', 'skip', 'failed', 'unavailable'].includes(outcomes.get(g) ?? ''));
  if (pending.length) return { ready: false, status: `preparing the node: waiting for ${pending.join(', ')}` };
  const failed = wanted.filter((g) => outcomes.get(g) === 'failed' || outcomes.get(g) === 'unavailable');
  const word: Record<string, string> = { ok: 'ok', skip: 'skipped', failed: 'FAILED', unavailable: 'FAILED' };
  const list = wanted.map((g) => `${g} ${word[outcomes.get(g)!]}`).join(', ');
  return { ready: true, status: failed.length ? `bootstrap may start, with failures (hvagent status): ${list}` : `node prepared: ${list}` };
}

/** The phases of a status document mapped to settled outcomes (for readiness from a document). Pure. */
export function settledFromPhase(phase: GuardPhase): SettledOutcome | undefined {
  return phase === 'succeeded' || phase === 'watching' ? 'ok' : phase === 'skipped' ? 'skip' : phase === 'failed' ? 'failed' : undefined;
}

export type Notify = (fields: Record<string, string>) => Promise<void>;

/** systemd-notify with each field as VAR=VALUE; a no-op without NOTIFY_SOCKET. Failures are logged, never thrown. */
export function systemdNotifier(env: NodeJS.ProcessEnv, log: Logger): Notify {
  if (!env.NOTIFY_SOCKET) return async () => undefined;
  return async (fields) => {
    const args = Object.entries(fields).map(([k, v]) => `${k}=${v.replace(/\n/g, ' ')}`);
    const r = await run('systemd-notify', args, { allowFailure: true, timeoutMs: 30_000 }).catch((err: Error) => ({ exitCode: -1, stderr: err.message }));
    if (r.exitCode !== 0) log.warn('systemd-notify failed: systemd may not see the agent as started', { fields, error: r.stderr.trim() });
  };
}
