/**
 * The edges of the clock judgement and its parsers the first agent mutation run left open: the
 * boundaries of the offset wording, the uncertainty of a Date header, each verdict's reference and
 * confirmation, and chronyc's and timesyncd's formats. Expected values are written out by hand.
 */
import { describe, expect, it } from 'vitest';
import { chronySourcesProblem, formatOffset, judgeClock, offsetSentence, parseChronyTracking, serverOffset, timesyncdServers, type ClockFacts } from '../../../agent/time/clock.js';

const WANT = { syncWaitMs: 180_000, maxOffsetMs: 5_000 };
const NOW = Date.parse('2026-12-01T10:00:00Z');
const base = (over: Partial<ClockFacts> = {}): ClockFacts => ({ now: NOW, daemon: { kind: 'timesyncd', synced: false }, waitedMs: 0, ...over });
/** A server whose Date says `dateMs`, read at local time `localMs` with a round trip of `rttMs`. */
const srv = (dateMs: number, localMs: number, rttMs?: number) => ({ url: 'https://vip:9345/ping', dateMs, localMs, ...(rttMs === undefined ? {} : { rttMs }) });

describe('formatOffset and offsetSentence at their boundaries', () => {
  it('tenths below 10 s, whole seconds from 10 s; minutes from 2 min, hours from 2 h, days from 2 days', () => {
    expect(formatOffset(9_999)).toBe('10.0 s');
    expect(formatOffset(10_000)).toBe('10 s');
    expect(formatOffset(119_999)).toBe('120 s');
    expect(formatOffset(120_000)).toBe('120 s (2 min)');
    expect(formatOffset(7_200_000)).toBe('7200 s (2 h)');
    expect(formatOffset(172_800_000)).toBe('172800 s (2 days)');
    expect(formatOffset(172_799_999)).toBe('172800 s (48 h)');
    expect(formatOffset(-172_800_000)).toBe('172800 s (2 days)');
  });

  it('zero is "ahead of", only a negative offset is "behind"', () => {
    expect(offsetSentence(0, 'x')).toBe('the clock is 0.0 s ahead of x');
    expect(offsetSentence(-1, 'x')).toBe('the clock is 0.0 s behind x');
  });
});

describe('serverOffset', () => {
  it('the Date names a whole second: the server was at Date + 0.5 s give or take 0.5 s plus half the round trip', () => {
    expect(serverOffset(srv(NOW, NOW + 2_000, 300))).toEqual({ offsetMs: 1_500, uncertaintyMs: 650 });
    expect(serverOffset(srv(NOW, NOW))).toEqual({ offsetMs: -500, uncertaintyMs: 500 });
    expect(serverOffset({ url: 'u', localMs: NOW })).toBeUndefined();
    expect(serverOffset({ url: 'u', dateMs: NOW })).toBeUndefined();
  });
});

describe('judgeClock: the join server decides', () => {
  it('an offset counts only beyond its uncertainty: 5.5 s off with 1 s of uncertainty is within 5 s', () => {
    // offset 5 500 - 500 = 5 000... the Date's half second: local 6 000 ahead of Date → offset 5 500, uncertainty 500 + 1 000 / 2 = 1 000.
    const within = judgeClock(base({ daemon: { kind: 'chrony', synced: true, server: 'ntp' }, server: srv(NOW, NOW + 6_000, 1_000) }), WANT);
    expect(within).toMatchObject({ verdict: 'ok', reference: 'server', confirmed: true, offsetMs: 5_500 });
    // exactly at the limit (|5 500| - 500 = 5 000): not beyond it.
    const edge = judgeClock(base({ daemon: { kind: 'chrony', synced: true }, server: srv(NOW, NOW + 6_000, 0) }), WANT);
    expect(edge.verdict).toBe('ok');
    const beyond = judgeClock(base({ daemon: { kind: 'chrony', synced: true, server: 'ntp' }, server: srv(NOW, NOW + 6_001, 0) }), WANT);
    expect(beyond).toMatchObject({ verdict: 'wrong', reference: 'server', confirmed: false });
    expect(beyond.text).toBe(
      "the clock is 5.5 s ahead of the join server's (https://vip:9345/ping Date 2026-12-01T10:00:00.000Z); chronyd synchronised to ntp, so the two clocks disagree: check the NTP servers of the node and of the cluster. RKE2 would fail with \"x509: certificate has expired or is not yet valid\"",
    );
    const unsynced = judgeClock(base({ daemon: { kind: 'timesyncd', synced: false }, server: srv(NOW, NOW + 60_000, 0) }), WANT);
    expect(unsynced.text).toContain('; systemd-timesyncd not synchronised. RKE2 would fail');
  });

  it('a matching clock while the daemon has not synchronised yet: waiting, naming how long of how long', () => {
    const j = judgeClock(base({ waitedMs: 42_000, server: srv(NOW, NOW + 1_000, 0) }), WANT);
    expect(j).toEqual({ verdict: 'waiting', text: "waiting for systemd-timesyncd (42 s of 180 s; within 0.5 s of the join server's clock): systemd-timesyncd not synchronised", offsetMs: 500, reference: 'server', confirmed: false });
  });

  it('a synchronised daemon names its server and offset only when it has them', () => {
    expect(judgeClock(base({ daemon: { kind: 'chrony', synced: true, offsetMs: 0 } }), WANT).text).toBe('chronyd synchronised (offset 0.0 s)');
    expect(judgeClock(base({ daemon: { kind: 'chrony', synced: true } }), WANT).text).toBe('chronyd synchronised');
  });
});

describe('judgeClock: NTP, then the install record', () => {
  it('a synchronised daemon still correcting a large offset is waiting; within the limit it is ok', () => {
    expect(judgeClock(base({ daemon: { kind: 'chrony', synced: true, offsetMs: 5_001 } }), WANT)).toMatchObject({ verdict: 'waiting', reference: 'ntp', confirmed: false, offsetMs: 5_001 });
    expect(judgeClock(base({ daemon: { kind: 'chrony', synced: true, offsetMs: -5_000 } }), WANT)).toMatchObject({ verdict: 'ok', reference: 'ntp', confirmed: true });
    expect(judgeClock(base({ daemon: { kind: 'chrony', synced: true } }), WANT)).toMatchObject({ verdict: 'ok', reference: 'ntp', confirmed: true, offsetMs: undefined });
  });

  it('the server asked but silent is named after the NTP verdict', () => {
    const j = judgeClock(base({ daemon: { kind: 'chrony', synced: true }, server: { url: 'https://vip:9345/ping', problem: 'connection refused' } }), WANT);
    expect(j.text).toBe("chronyd synchronised; the join server's clock is unknown: connection refused");
    expect(judgeClock(base({ daemon: { kind: 'chrony', synced: true }, server: { url: 'u' } }), WANT).text).toBe("chronyd synchronised; the join server's clock is unknown: no answer");
  });

  it('a clock more than the limit before the install: waiting while the daemon may still fix it, wrong after', () => {
    const installedAt = NOW + 5_001;
    const early = judgeClock(base({ installedAt, waitedMs: 1_000 }), WANT);
    expect(early).toMatchObject({ verdict: 'waiting', reference: 'install-record', offsetMs: -5_001, confirmed: false });
    expect(judgeClock(base({ installedAt, waitedMs: 180_000 }), WANT).verdict).toBe('wrong');
    expect(judgeClock(base({ installedAt, daemon: { kind: 'none', synced: false } }), WANT).verdict).toBe('wrong');
    // Exactly at the limit, or after the install, the record says nothing.
    expect(judgeClock(base({ installedAt: NOW + 5_000, waitedMs: 180_000 }), WANT).reference).toBe('none');
    expect(judgeClock(base({ installedAt: NOW - 1, waitedMs: 180_000 }), WANT).reference).toBe('none');
  });

  it('no daemon: not waited for; ok unconfirmed at once, saying nothing keeps the clock', () => {
    expect(judgeClock(base({ daemon: { kind: 'none', synced: false } }), WANT)).toEqual({
      verdict: 'ok',
      text: 'clock not confirmed (2026-12-01T10:00:00.000Z): no time daemon runs (neither chronyd nor systemd-timesyncd): nothing keeps the clock; RKE2 starts anyway',
      reference: 'none',
      confirmed: false,
    });
    expect(judgeClock(base({ waitedMs: 0 }), WANT)).toMatchObject({ verdict: 'waiting', reference: 'none', confirmed: false, text: 'waiting for systemd-timesyncd to synchronise (0 s of 180 s): systemd-timesyncd not synchronised' });
  });
});

describe('chronyc and timesyncd', () => {
  const tracking = (refId: string, leap: string, system = '-0.5') => ` ${refId},10.0.0.1,3,1700000000.1,${system},0.0001,0.0002,1.0,-0.01,0.02,0.001,0.002,64.0,${leap} \n`;

  it('tracking: synced unless the reference id is zero or the leap says not synchronised; the offset is minus the system time', () => {
    expect(parseChronyTracking(tracking('0A000001', 'Normal'))).toEqual({ synced: true, offsetMs: 500, server: '10.0.0.1' });
    expect(parseChronyTracking(tracking('00000000', 'Normal'))).toEqual({ synced: false, offsetMs: undefined, server: '10.0.0.1' });
    expect(parseChronyTracking(tracking('0A000001', 'Not synchronised'))).toEqual({ synced: false, offsetMs: undefined, server: '10.0.0.1' });
    expect(parseChronyTracking('a,b,c')).toBeUndefined();
  });

  it('sources: rows of at least three fields, named by their state; one selected source is enough', () => {
    const rows = ' ^,?,10.0.0.1,2\n^,x,10.0.0.2,2\n^,~,10.0.0.3\n^,-,10.0.0.4\n^,+,10.0.0.5\n^,#,10.0.0.6\n,,\n^,*\n';
    expect(chronySourcesProblem(rows)).toBe('no NTP source selected: 10.0.0.1 unreachable, 10.0.0.2 a falseticker, 10.0.0.3 too variable, 10.0.0.4 not combined, 10.0.0.5 combined, 10.0.0.6 state #');
    expect(chronySourcesProblem('^,+,10.0.0.5\n^,*,10.0.0.1\n')).toBeUndefined();
    expect(chronySourcesProblem('\n,*,x\n')).toBe('no NTP source configured');
  });

  it('timesyncd: NTP= and FallbackNTP= lines only (not a commented or differently named key), later files winning', () => {
    expect(timesyncdServers(['[Time]\n#NTP=commented\n  NTP = 10.0.0.1 10.0.0.2  \nFallbackNTPServers=x\n'])).toBe('10.0.0.1 10.0.0.2');
    expect(timesyncdServers(['[Time]\nFallbackNTP=pool.ntp.org\n', '[Time]\nNTPX=nope\n'])).toBe('pool.ntp.org (fallback)');
    expect(timesyncdServers(['NTP=a\n', 'NTP=\n'])).toBeUndefined();
  });
});

describe('timesyncdServers: comments', () => {
  it('a commented-out NTP= is not a server', () => {
    expect(timesyncdServers(['[Time]\n#NTP=10.0.0.1\n'])).toBeUndefined();
    expect(timesyncdServers(['[Time]\n;NTP=10.0.0.1\nFallbackNTP=10.0.0.2\n'])).toBe('10.0.0.2 (fallback)');
  });
});
