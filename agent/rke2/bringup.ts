/**
 * Brings one RKE2 role up and waits, bounded, until it is ready. Shared by the rke2 guard and by
 * promotion (agent → server). The answer is a Probe: ready, or a reason that already carries the
 * service's last log lines so the diagnosis needs no second look at the node.
 */
import path from 'node:path';
import { access } from 'node:fs/promises';
import { waitUntil, DeadlineError, type Probe } from '../../lib/wait.js';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import type { GuardContext } from '../guard.js';
import type { HarvesterConfig } from '../../config/types.js';
import { chooseServices, type Rke2Services } from './services.js';
import { loadServerTls, probeUrl } from './health.js';
import { readMergedDropIns, checkDropIns } from './dropins.js';
import { isWitness, PROMOTED_MARKER, type Rke2Role } from './role.js';
import type { Rke2Settings } from './settings.js';
import { explainCertificateTime, findCertificateTimeError } from './clock-hint.js';
import { joinServerClockUrl, observeServerClock } from '../time/observe.js';

export interface BringUpOutcome {
  ready: boolean;
  /** When not ready: why, with log lines. */
  reason?: string;
  /** The process keeps dying: retrying will not help. */
  fatal?: boolean;
  services: Rke2Services;
}

/** Crash counts per (root, role), kept across reconcile passes of one agent process. */
const crashes = new Map<string, number>();

export async function isPromoted(ctx: GuardContext): Promise<boolean> {
  return access(ctx.root(PROMOTED_MARKER)).then(() => true, () => false);
}

/** The readiness probe for a role: the API server for servers (not for an etcd-only witness), the kubelet otherwise. */
export async function probeRole(role: Rke2Role, config: HarvesterConfig, s: Rke2Settings, ctx: GuardContext): Promise<Probe<string>> {
  if (role === 'server' && !isWitness(config)) {
    return probeUrl(`${s.apiServerUrl.replace(/\/$/, '')}/readyz`, await loadServerTls(ctx.root(s.serverTlsDir)), { signal: ctx.stopping });
  }
  return probeUrl(s.kubeletHealthzUrl, {}, { signal: ctx.stopping });
}

export async function bringUp(
  ctx: GuardContext,
  config: HarvesterConfig,
  role: Rke2Role,
  s: Rke2Settings,
  joining: boolean,
): Promise<BringUpOutcome> {
  const services = await chooseServices(s.supervisor, s.binary, ctx.root, s.env);
  const configDir = ctx.root(s.configDir);
  const { merged, errors } = await readMergedDropIns(configDir);
  if (errors.length) {
    return { ready: false, fatal: true, services, reason: `RKE2 drop-ins in ${s.configDir} do not parse: ${errors.join('; ')}` };
  }
  const check = checkDropIns(role, merged, config, joining);
  for (const [file, content] of Object.entries(check.toWrite)) {
    await writeFileAtomic(path.join(configDir, file), content, { mode: 0o600 });
    ctx.log.info('wrote RKE2 drop-in', { file: `${s.configDir}/${file}` });
  }
  if (check.missing.length) {
    return { ready: false, fatal: true, services, reason: `RKE2 ${role} config incomplete: ${check.missing.join('; ')}` };
  }

  const other: Rke2Role = role === 'server' ? 'agent' : 'server';
  const states = await services.states();
  if (states[other].active) {
    ctx.progress(`stopping rke2-${other}`);
    await services.stop(other);
  }

  const key = `${ctx.root('/')}:${role}`;
  const st = states[role];
  if (!st.active) {
    if (st.exited) {
      const n = (crashes.get(key) ?? 0) + 1;
      crashes.set(key, n);
      const tail = await services.logTail(role);
      ctx.log.warn('rke2 exited', { role, exited: st.exited, crashes: n });
      if (n >= s.maxCrashes) {
        return { ready: false, fatal: true, services, reason: `rke2-${role} exited ${n} times: ${st.exited}${await explainTail(tail, config, ctx)}` };
      }
    }
    ctx.progress(`starting rke2-${role} (${services.kind})`);
    await services.start(role);
  }

  try {
    const value = await waitUntil(
      // The service's state was just seen (running, or started): the wait asks again STATE_EVERY_MS on.
      readinessProbe(role, () => probeRole(role, config, s, ctx), () => services.state(role), ctx.now, STATE_EVERY_MS, ctx.now()),
      { what: `rke2-${role} ready`, timeoutMs: s.probeWindowMs, intervalMs: s.probeIntervalMs, signal: ctx.signal },
    );
    crashes.delete(key);
    return { ready: true, reason: value, services };
  } catch (err) {
    const reason = err instanceof DeadlineError ? err.diagnosis : (err as Error).message;
    return { ready: false, services, reason: `rke2-${role} not ready: ${reason}${await explainTail(await services.logTail(role), config, ctx)}` };
  }
}

/** How often the wait for readiness asks whether RKE2's service still runs (a crash is named within this). */
export const STATE_EVERY_MS = 5_000;

/**
 * One look of the wait for readiness: RKE2's health endpoint each time, and whether its service
 * still runs at the first look (or, when the caller has just seen it, `stateEveryMs` after
 * `stateSeenAt`), at most every `stateEveryMs` after, and at the look that finds it ready (an
 * endpoint that answers for a stopped unit is not the unit's). Under systemd the state is a
 * `systemctl` run, which a booting node pays for in CPU, so not one a second.
 */
export function readinessProbe(
  role: Rke2Role,
  probe: () => Promise<Probe<string>>,
  state: () => Promise<{ active: boolean; exited?: string }>,
  now: () => number,
  stateEveryMs: number,
  stateSeenAt?: number,
): () => Promise<Probe<string>> {
  let askedAt = stateSeenAt;
  return async () => {
    const p = await probe();
    if (p.done || askedAt === undefined || now() - askedAt >= stateEveryMs) {
      askedAt = now();
      const st = await state();
      if (!st.active) throw new Error(st.exited ?? `rke2-${role} is not running`);
    }
    return p;
  };
}

function withTail(tail: string): string {
  return tail ? `\nlast log lines of rke2:\n${tail.split('\n').map((l) => `  ${l}`).join('\n')}` : '';
}

/** The log tail for a diagnosis, led by the clock when the tail shows a certificate-time error. */
export async function explainTail(tail: string, config: HarvesterConfig, ctx: Pick<GuardContext, 'now' | 'stopping'>): Promise<string> {
  const e = findCertificateTimeError(tail);
  if (!e) return withTail(tail);
  const url = e.relation ? undefined : joinServerClockUrl(config);
  const server = url ? await observeServerClock(url, ctx.now, ctx.stopping) : undefined;
  return `\n${explainCertificateTime(e, server)}${withTail(tail)}`;
}
