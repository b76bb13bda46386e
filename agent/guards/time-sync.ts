/**
 * time-sync: before RKE2 (and rancherd) start, the clock is synchronised or at least known to be
 * close: waits, bounded, for the image's time daemon (systemd-timesyncd or chronyd) and, on a join
 * node, compares the clock with the join server's (the Date of its HTTPS answer). A clock that is
 * measurably wrong holds RKE2 back with the offset named, instead of RKE2 looping on "x509:
 * certificate has expired or is not yet valid" (harvester/harvester#2860, #6837). A clock nothing
 * can confirm lets the bootstrap go ahead after the wait, as Harvester's time-wait-sync does.
 */
import { sleep } from '../../lib/wait.js';
import { everyInterval } from './every-interval.js';
import type { Guard, GuardContext, GuardResult } from '../guard.js';
import { parseDuration } from '../settings.js';
import { judgeClock, type ClockFacts, type ClockJudgement, type ClockWant, type TimeDaemonKind } from '../time/clock.js';
import { installFinishedAt, joinServerClockUrl, observeDaemon, observeServerClock, type TimeObserveOptions } from '../time/observe.js';
import { nudgeTimesyncd, timesyncdNeedsNudge, type TimesyncdRestart } from '../time/nudge.js';

export const TIMESYNCD_SYNC_FILE = '/run/systemd/timesync/synchronized';
const TIMESYNCD_BINARIES = ['/usr/lib/systemd/systemd-timesyncd', '/lib/systemd/systemd-timesyncd'];

interface TimeSettings {
  want: ClockWant;
  observe: TimeObserveOptions;
  /** The URL whose Date is compared on a join node (default: the supervisor, https://<vip>:9345/ping). */
  serverUrl?: string;
  pollWindowMs: number;
  pollIntervalMs: number;
  watchIntervalMs: number;
  restartTimesyncd: TimesyncdRestart;
}

function duration(s: Record<string, unknown>, key: string, fallback: number): number {
  return s[key] === undefined ? fallback : parseDuration(s[key], `guards.time-sync.${key}`);
}

function timeSettings(ctx: GuardContext): TimeSettings {
  const s = ctx.settings;
  const daemon = typeof s.daemon === 'string' && ['auto', 'timesyncd', 'chrony', 'none'].includes(s.daemon) ? (s.daemon as TimeDaemonKind | 'auto') : 'auto';
  return {
    want: { syncWaitMs: duration(s, 'syncWait', 180_000), maxOffsetMs: duration(s, 'maxOffset', 5_000) },
    observe: {
      root: ctx.root,
      daemon,
      chronyc: typeof s.chronyc === 'string' ? s.chronyc : 'chronyc',
      chronySocket: typeof s.chronySocket === 'string' ? s.chronySocket : undefined,
      netns: typeof s.netns === 'string' ? s.netns : undefined,
      timesyncdSyncFile: typeof s.timesyncdSyncFile === 'string' ? s.timesyncdSyncFile : TIMESYNCD_SYNC_FILE,
      timesyncdBinaries: TIMESYNCD_BINARIES,
    },
    serverUrl: typeof s.serverUrl === 'string' ? s.serverUrl : undefined,
    pollWindowMs: duration(s, 'pollWindow', 10_000),
    pollIntervalMs: duration(s, 'pollInterval', 1_000),
    watchIntervalMs: duration(s, 'watchInterval', 60_000),
    restartTimesyncd: restartSetting(s.restartTimesyncd),
  };
}

function restartSetting(v: unknown): TimesyncdRestart {
  if (v === 'never') return 'never';
  if (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string')) return v as string[];
  return 'auto';
}

/** The node roots whose timesyncd this agent process has asked to try its servers (once each: see time/nudge.ts). */
const nudged = new Set<string>();

/** When this agent process first looked at the clock, per node root: the synchronisation wait starts there. */
const firstLook = new Map<string, number>();

async function look(ctx: GuardContext, t: TimeSettings): Promise<{ facts: ClockFacts; judgement: ClockJudgement }> {
  const key = ctx.root('/');
  if (!firstLook.has(key)) firstLook.set(key, ctx.now());
  const url = joinServerClockUrl(ctx.config, t.serverUrl);
  const [daemon, server, installedAt] = await Promise.all([observeDaemon(t.observe), url ? observeServerClock(url, ctx.now, ctx.stopping) : undefined, installFinishedAt(ctx.root)]);
  const facts: ClockFacts = { now: ctx.now(), daemon, waitedMs: ctx.now() - firstLook.get(key)!, server, installedAt };
  return { facts, judgement: judgeClock(facts, t.want) };
}

function report(ctx: GuardContext, f: ClockFacts, j: ClockJudgement): void {
  ctx.report?.({
    verdict: j.verdict,
    confirmed: j.confirmed,
    reference: j.reference,
    offsetMs: j.offsetMs,
    daemon: f.daemon.kind,
    synchronised: f.daemon.synced,
    ntpServer: f.daemon.server,
    waitedMs: f.waitedMs,
    server: f.server?.url,
    serverProblem: f.server?.problem,
  });
}

async function reconcile(ctx: GuardContext): Promise<GuardResult> {
  const t = timeSettings(ctx);
  const windowEnd = ctx.now() + t.pollWindowMs;
  let last = '';
  for (;;) {
    const { facts, judgement } = await look(ctx, t);
    // A stop abandons the join server's Date request: a look without its answer is no verdict.
    if (ctx.stopping?.aborted) return { status: 'retry', reason: 'stopped before the clock was judged' };
    report(ctx, facts, judgement);
    if (judgement.verdict === 'ok') {
      if (!judgement.confirmed) ctx.log.warn('clock not confirmed; the bootstrap goes ahead', { detail: judgement.text });
      return { status: 'ok', detail: judgement.text };
    }
    if (judgement.text !== last) ctx.log.info(judgement.verdict === 'wrong' ? 'clock is wrong' : 'clock not confirmed yet', { detail: judgement.text });
    last = judgement.text;
    if (timesyncdNeedsNudge(facts.daemon, nudged.has(ctx.root('/')))) {
      nudged.add(ctx.root('/'));
      ctx.log.info('systemd-timesyncd asked to try its servers now (the network is online; its next try could be minutes away)', { detail: await nudgeTimesyncd(t.restartTimesyncd, ctx.root('/')) });
      continue;
    }
    ctx.progress(judgement.text);
    if (ctx.now() >= windowEnd || ctx.signal.aborted) return { status: 'retry', reason: judgement.text };
    await sleep(t.pollIntervalMs, ctx.signal).catch(() => undefined);
  }
}

/** After success: keep an eye on the clock (logged and shown, not fatal: RKE2 already runs on it). */
async function watch(ctx: GuardContext): Promise<void> {
  const t = timeSettings(ctx);
  let lastVerdict: string | undefined;
  await everyInterval(ctx.signal, t.watchIntervalMs, async () => {
    const { facts, judgement } = await look(ctx, t);
    if (ctx.stopping?.aborted) return;
    report(ctx, facts, judgement);
    const state = `${judgement.verdict}/${judgement.confirmed}`;
    if (state !== lastVerdict) {
      if (judgement.verdict === 'wrong') ctx.log.warn('clock went wrong', { detail: judgement.text });
      else ctx.log.info('clock', { detail: judgement.text });
      ctx.progress(judgement.text);
    }
    lastVerdict = state;
  });
}

const guard: Guard = {
  name: 'time-sync',
  dependsOn: ['network-online'],
  // The synchronisation wait is 3 min; a clock measurably wrong is retried until this deadline.
  deadlineMs: 10 * 60_000,
  reconcile,
  watch,
};

export default guard;
