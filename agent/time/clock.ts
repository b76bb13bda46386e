/**
 * Is the node's clock good enough to start RKE2? A pure judgement over what was observed: the time
 * daemon's state (systemd-timesyncd or chronyd), the join server's clock (the Date of its HTTPS
 * answer), and the install record's time. A join node whose clock is behind the cluster's loops on
 * `x509: certificate has expired or is not yet valid` (harvester/harvester#2860, #6837); the
 * judgement names the offset instead. Evidence ranks: the join server's clock, then NTP, then the
 * install record (written by the installer's clock, so only a clock before it is called wrong).
 */

export type TimeDaemonKind = 'timesyncd' | 'chrony' | 'none';

export interface DaemonState {
  kind: TimeDaemonKind;
  synced: boolean;
  /** chrony: how far the system clock is ahead of NTP time, in ms (negative: behind). */
  offsetMs?: number;
  /** The NTP server in use, or the ones configured. */
  server?: string;
  /** Why it is not synchronised, when known ("no NTP source reachable: 10.0.0.1 unreachable"). */
  problem?: string;
}

export interface ServerClock {
  url: string;
  /** The server's clock from its Date header (whole seconds, as sent). */
  dateMs?: number;
  /** The local clock halfway through the request. */
  localMs?: number;
  rttMs?: number;
  /** Why there is nothing to compare: unreachable, or an answer without a Date. */
  problem?: string;
}

export interface ClockFacts {
  now: number;
  daemon: DaemonState;
  /** Since the guard first looked at the clock this boot (the synchronisation wait). */
  waitedMs: number;
  /** The supervisor of the cluster a join node registers with. */
  server?: ServerClock;
  /** When the install finished, by the installer's clock (/oem/install/journal.json). */
  installedAt?: number;
}

export interface ClockWant {
  /** How long to wait for the daemon to synchronise (Harvester's time-wait-sync: 180 s). */
  syncWaitMs: number;
  /** Larger offsets fail TLS against freshly issued certificates and upset etcd. */
  maxOffsetMs: number;
}

export type ClockVerdict = 'ok' | 'waiting' | 'wrong';

export interface ClockJudgement {
  verdict: ClockVerdict;
  text: string;
  /** How far the local clock is ahead of the best reference (negative: behind), when measured. */
  offsetMs?: number;
  /** What the offset was measured against. */
  reference: 'server' | 'ntp' | 'install-record' | 'none';
  /** Whether the clock was seen synchronised (by NTP, or matching the server). */
  confirmed: boolean;
}

const DAEMON_NAME: Record<TimeDaemonKind, string> = { timesyncd: 'systemd-timesyncd', chrony: 'chronyd', none: 'no time daemon' };

/** "94608000 s (1095 days)", "12.4 s": the exact seconds first, a rounded unit for large values. */
export function formatOffset(ms: number): string {
  const a = Math.abs(ms);
  const s = a >= 10_000 ? `${Math.round(a / 1000)} s` : `${(Math.round(a / 100) / 10).toFixed(1)} s`;
  const unit = a >= 2 * 86_400_000 ? `${Math.round(a / 86_400_000)} days` : a >= 2 * 3_600_000 ? `${Math.round(a / 3_600_000)} h` : a >= 120_000 ? `${Math.round(a / 60_000)} min` : '';
  return unit ? `${s} (${unit})` : s;
}

/** "the clock is N s behind the join server's" */
export function offsetSentence(offsetMs: number, reference: string): string {
  return `the clock is ${formatOffset(offsetMs)} ${offsetMs < 0 ? 'behind' : 'ahead of'} ${reference}`;
}

/**
 * The local clock's offset against a server's Date header: the Date has whole seconds, so the
 * server's clock was somewhere in [Date, Date + 1 s) when it answered; the uncertainty adds half
 * the round trip.
 */
export function serverOffset(s: ServerClock): { offsetMs: number; uncertaintyMs: number } | undefined {
  if (s.dateMs === undefined || s.localMs === undefined) return undefined;
  return { offsetMs: s.localMs - (s.dateMs + 500), uncertaintyMs: 500 + (s.rttMs ?? 0) / 2 };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

export function judgeClock(f: ClockFacts, w: ClockWant): ClockJudgement {
  const d = f.daemon;
  const who = DAEMON_NAME[d.kind];
  const ntpText = d.synced
    ? `${who} synchronised${d.server ? ` to ${d.server}` : ''}${d.offsetMs !== undefined ? ` (offset ${formatOffset(d.offsetMs)})` : ''}`
    : d.kind === 'none'
      ? 'no time daemon runs (neither chronyd nor systemd-timesyncd): nothing keeps the clock'
      : `${who} not synchronised${d.problem ? `: ${d.problem}` : ''}${d.server ? ` (servers: ${d.server})` : ''}`;

  // 1. The join server's clock decides when there is one: it is the clock RKE2's certificates follow.
  const so = f.server ? serverOffset(f.server) : undefined;
  if (f.server && so) {
    const ref = `the join server's (${f.server.url} Date ${iso(f.server.dateMs!)})`;
    if (Math.abs(so.offsetMs) - so.uncertaintyMs > w.maxOffsetMs) {
      const cause = d.synced
        ? `; ${ntpText}, so the two clocks disagree: check the NTP servers of the node and of the cluster`
        : `; ${ntpText}`;
      return {
        verdict: 'wrong',
        text: `${offsetSentence(so.offsetMs, ref)}${cause}. RKE2 would fail with "x509: certificate has expired or is not yet valid"`,
        offsetMs: so.offsetMs,
        reference: 'server',
        confirmed: false,
      };
    }
    const within = `within ${formatOffset(Math.max(Math.abs(so.offsetMs), so.uncertaintyMs))} of the join server's clock`;
    if (d.synced || d.kind === 'none' || f.waitedMs >= w.syncWaitMs) {
      return { verdict: 'ok', text: `${within}; ${ntpText}`, offsetMs: so.offsetMs, reference: 'server', confirmed: true };
    }
    return { verdict: 'waiting', text: `waiting for ${who} (${Math.round(f.waitedMs / 1000)} s of ${Math.round(w.syncWaitMs / 1000)} s; ${within}): ${ntpText}`, offsetMs: so.offsetMs, reference: 'server', confirmed: false };
  }
  const noServer = f.server ? `; the join server's clock is unknown: ${f.server.problem ?? 'no answer'}` : '';

  // 2. NTP.
  if (d.synced) {
    if (d.offsetMs !== undefined && Math.abs(d.offsetMs) > w.maxOffsetMs) {
      return { verdict: 'waiting', text: `${who} is still correcting the clock: ${offsetSentence(d.offsetMs, 'NTP time')}${noServer}`, offsetMs: d.offsetMs, reference: 'ntp', confirmed: false };
    }
    return { verdict: 'ok', text: `${ntpText}${noServer}`, offsetMs: d.offsetMs, reference: 'ntp', confirmed: true };
  }

  // 3. Nothing better than the install record: a clock before it is certainly wrong.
  if (f.installedAt !== undefined && f.now < f.installedAt - w.maxOffsetMs) {
    const text = `${offsetSentence(f.now - f.installedAt, `the install record at least (the clock reads ${iso(f.now)}, the node was installed ${iso(f.installedAt)})`)}; ${ntpText}${noServer}`;
    return { verdict: d.kind !== 'none' && f.waitedMs < w.syncWaitMs ? 'waiting' : 'wrong', text, offsetMs: f.now - f.installedAt, reference: 'install-record', confirmed: false };
  }
  if (d.kind !== 'none' && f.waitedMs < w.syncWaitMs) {
    return { verdict: 'waiting', text: `waiting for ${who} to synchronise (${Math.round(f.waitedMs / 1000)} s of ${Math.round(w.syncWaitMs / 1000)} s): ${ntpText}${noServer}`, reference: 'none', confirmed: false };
  }
  // As Harvester's time-wait-sync (TimeoutStartSec=180), the bootstrap goes ahead unconfirmed.
  const gaveUp = d.kind === 'none' ? ntpText : `${ntpText} after ${Math.round(f.waitedMs / 1000)} s`;
  return { verdict: 'ok', text: `clock not confirmed (${iso(f.now)}): ${gaveUp}${noServer}; RKE2 starts anyway`, reference: 'none', confirmed: false };
}

/** chronyc -c tracking: one CSV line; field 5 is NTP time minus system time, in seconds. */
export function parseChronyTracking(line: string): { synced: boolean; offsetMs?: number; server?: string } | undefined {
  const f = line.trim().split(',');
  if (f.length < 14) return undefined;
  const refId = f[0]!;
  const leap = f[13]!;
  const systemTime = Number(f[4]);
  const synced = refId !== '00000000' && leap !== 'Not synchronised';
  return { synced, offsetMs: synced && Number.isFinite(systemTime) ? -systemTime * 1000 : undefined, server: f[1] || undefined };
}

const SOURCE_STATE: Record<string, string> = { '?': 'unreachable', x: 'a falseticker', '~': 'too variable', '-': 'not combined', '+': 'combined', '*': 'selected' };

/** chronyc -c sources: why nothing is selected ("10.0.0.1 unreachable"), or undefined. */
export function chronySourcesProblem(text: string): string | undefined {
  const rows = text.split('\n').map((l) => l.trim().split(',')).filter((r) => r.length >= 3 && r[0] !== '');
  if (rows.length === 0) return 'no NTP source configured';
  if (rows.some((r) => r[1] === '*')) return undefined;
  return `no NTP source selected: ${rows.map((r) => `${r[2]} ${SOURCE_STATE[r[1]!] ?? `state ${r[1]}`}`).join(', ')}`;
}

/** NTP= (and FallbackNTP=) of timesyncd.conf and its drop-ins, later files winning. */
export function timesyncdServers(texts: string[]): string | undefined {
  let ntp: string | undefined;
  let fallback: string | undefined;
  for (const t of texts) {
    for (const line of t.split('\n')) {
      const m = /^\s*(NTP|FallbackNTP)\s*=\s*(.*?)\s*$/.exec(line);
      if (!m) continue;
      if (m[1] === 'NTP') ntp = m[2] || undefined;
      else fallback = m[2] || undefined;
    }
  }
  return ntp ?? (fallback ? `${fallback} (fallback)` : undefined);
}
