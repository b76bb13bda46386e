/**
 * The time-sync judgement and the parsers of what chronyc and timesyncd say; the x509 clock hint.
 * Expected offsets are written out as numbers (computed by hand), not derived with the product's code.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { observeDaemon, type TimeObserveOptions } from '../../../agent/time/observe.js';
import { testTempDir } from '../temp-dir.js';
import { chronySourcesProblem, formatOffset, judgeClock, parseChronyTracking, timesyncdServers, type ClockFacts } from '../../../agent/time/clock.js';
import { explainCertificateTime, findCertificateTimeError } from '../../../agent/rke2/clock-hint.js';

const WANT = { syncWaitMs: 180_000, maxOffsetMs: 5_000 };
const NOW = Date.parse('2026-12-01T10:00:00Z');
const base = (over: Partial<ClockFacts> = {}): ClockFacts => ({ now: NOW, daemon: { kind: 'timesyncd', synced: false }, waitedMs: 0, ...over });
const server = (dateIso: string, localMs = NOW, rttMs = 20) => ({ url: 'https://10.0.0.100:9345/ping', dateMs: Date.parse(dateIso), localMs, rttMs });

describe('judgeClock', () => {
  it('is ok and confirmed once timesyncd has synchronised (create node, no join server)', () => {
    const j = judgeClock(base({ daemon: { kind: 'timesyncd', synced: true, server: 'ntp.lan' } }), WANT);
    expect(j).toMatchObject({ verdict: 'ok', confirmed: true, reference: 'ntp' });
    expect(j.text).toBe('systemd-timesyncd synchronised to ntp.lan');
  });

  it('waits for the daemon within the synchronisation wait, naming how long it has waited', () => {
    const j = judgeClock(base({ waitedMs: 42_000, daemon: { kind: 'timesyncd', synced: false, server: '10.9.9.9', problem: '/run/systemd/timesync/synchronized not written yet' } }), WANT);
    expect(j.verdict).toBe('waiting');
    expect(j.text).toBe('waiting for systemd-timesyncd to synchronise (42 s of 180 s): systemd-timesyncd not synchronised: /run/systemd/timesync/synchronized not written yet (servers: 10.9.9.9)');
  });

  it('lets the bootstrap go ahead unconfirmed after the wait when nothing says the clock is wrong', () => {
    const j = judgeClock(base({ waitedMs: 180_000, daemon: { kind: 'chrony', synced: false, problem: 'no NTP source selected: 10.0.0.1 unreachable' } }), WANT);
    expect(j).toMatchObject({ verdict: 'ok', confirmed: false, reference: 'none' });
    expect(j.text).toBe('clock not confirmed (2026-12-01T10:00:00.000Z): chronyd not synchronised: no NTP source selected: 10.0.0.1 unreachable after 180 s; RKE2 starts anyway');
  });

  it('names a clock years behind the join server in seconds and days', () => {
    const now = Date.parse('2001-01-01T00:00:05Z');
    const j = judgeClock(base({ now, daemon: { kind: 'none', synced: false }, server: server('2026-12-01T10:00:00Z', now, 0) }), WANT);
    expect(j.verdict).toBe('wrong');
    // 817811995 s between the two, plus the half second the Date's resolution adds.
    expect(j.offsetMs).toBe(-817_811_995_500);
    expect(j.text).toContain('the clock is 817811996 s (9465 days) behind the join server\'s (https://10.0.0.100:9345/ping Date 2026-12-01T10:00:00.000Z)');
    expect(j.text).toContain('RKE2 would fail with "x509: certificate has expired or is not yet valid"');
  });

  it('no time daemon and a clock that matches the join server: ok at once, confirmed (there is nothing to wait for)', () => {
    const j = judgeClock(base({ waitedMs: 0, daemon: { kind: 'none', synced: false }, server: server('2026-12-01T10:00:00Z', NOW + 500, 0) }), WANT);
    expect(j).toMatchObject({ verdict: 'ok', confirmed: true, reference: 'server', offsetMs: 0 });
    expect(j.text).toBe("within 0.5 s of the join server's clock; no time daemon runs (neither chronyd nor systemd-timesyncd): nothing keeps the clock");
  });

  it('names a clock ahead of the join server', () => {
    const j = judgeClock(base({ server: server('2026-12-01T09:58:00Z'), waitedMs: 200_000 }), WANT);
    expect(j.verdict).toBe('wrong');
    // 120 s minus the half second of the Date's resolution: below two minutes, so seconds only.
    expect(j.text).toMatch(/^the clock is 120 s ahead of the join server's/);
  });

  it('calls out disagreeing clocks when NTP is synchronised but the join server differs', () => {
    const j = judgeClock(base({ daemon: { kind: 'chrony', synced: true, server: '10.0.0.1', offsetMs: 1 }, server: server('2026-12-01T09:59:30Z') }), WANT);
    expect(j.verdict).toBe('wrong');
    expect(j.text).toContain('the two clocks disagree: check the NTP servers of the node and of the cluster');
  });

  it('accepts a clock within the limit of the join server, and still waits for NTP during the wait', () => {
    const close = server('2026-12-01T10:00:01Z');
    expect(judgeClock(base({ server: close, waitedMs: 10_000 }), WANT).verdict).toBe('waiting');
    const after = judgeClock(base({ server: close, waitedMs: 180_000 }), WANT);
    expect(after).toMatchObject({ verdict: 'ok', confirmed: true, reference: 'server' });
    expect(after.text).toMatch(/^within 1\.5 s of the join server's clock; systemd-timesyncd not synchronised/);
  });

  it('treats a join server that answers without a Date as no evidence, and says so', () => {
    const j = judgeClock(base({ daemon: { kind: 'timesyncd', synced: true }, server: { url: 'https://10.0.0.100:9345/ping', rttMs: 3, problem: 'it answered HTTP 404 without a Date header' } }), WANT);
    expect(j).toMatchObject({ verdict: 'ok', confirmed: true, reference: 'ntp' });
    expect(j.text).toBe("systemd-timesyncd synchronised; the join server's clock is unknown: it answered HTTP 404 without a Date header");
  });

  it('calls a clock before the install record wrong once the wait is over (no network needed)', () => {
    const installedAt = Date.parse('2026-11-30T12:00:00Z');
    const now = Date.parse('2020-01-01T00:00:00Z');
    expect(judgeClock(base({ now, installedAt, waitedMs: 1_000 }), WANT).verdict).toBe('waiting');
    const j = judgeClock(base({ now, installedAt, waitedMs: 180_000 }), WANT);
    expect(j).toMatchObject({ verdict: 'wrong', reference: 'install-record' });
    expect(j.text).toMatch(/^the clock is 218203200 s \(2526 days\) behind the install record at least \(the clock reads 2020-01-01T00:00:00.000Z, the node was installed 2026-11-30T12:00:00.000Z\)/);
    // Without a time daemon there is nothing to wait for.
    expect(judgeClock(base({ now, installedAt, daemon: { kind: 'none', synced: false } }), WANT).verdict).toBe('wrong');
  });

  it('ignores the install record once NTP has synchronised (the installer\'s own clock may have been off)', () => {
    const j = judgeClock(base({ installedAt: NOW + 86_400_000, daemon: { kind: 'timesyncd', synced: true } }), WANT);
    expect(j.verdict).toBe('ok');
  });

  it('waits while chrony is still slewing a large offset', () => {
    const j = judgeClock(base({ daemon: { kind: 'chrony', synced: true, offsetMs: -40_000 } }), WANT);
    expect(j.verdict).toBe('waiting');
    expect(j.text).toBe('chronyd is still correcting the clock: the clock is 40 s behind NTP time');
  });
});

describe('what chronyc and timesyncd say', () => {
  // Captured from chronyd 4.3 (Debian) in a network namespace, client of another chronyd.
  const SYNCED = '0A580001,10.88.0.1,9,1796123328.729027850,-0.000002958,-0.000000013,0.000000503,-0.014,-0.001,0.223,0.000010466,0.000000927,0.5,Normal';
  const UNSYNCED = '00000000,,0,0.000000000,0.000000049,0.000000000,0.000000000,-0.024,0.000,0.000,1.000000000,1.000000000,0.0,Not synchronised';

  it('reads tracking: synchronised with the offset the text form calls "seconds fast"', () => {
    const t = parseChronyTracking(SYNCED)!;
    expect(t.synced).toBe(true);
    expect(t.server).toBe('10.88.0.1');
    // "System time : 0.000002958 seconds fast of NTP time": the clock is ahead.
    expect(t.offsetMs).toBeCloseTo(0.002958, 9);
    expect(parseChronyTracking(UNSYNCED)).toEqual({ synced: false, offsetMs: undefined, server: undefined });
    expect(parseChronyTracking('506 Cannot talk to daemon')).toBeUndefined();
  });

  it('says why no source is selected', () => {
    expect(chronySourcesProblem('^,?,10.88.0.1,0,0,0,4294967295,0.000000000,0.000000000,0.000000000\n')).toBe('no NTP source selected: 10.88.0.1 unreachable');
    expect(chronySourcesProblem('^,*,10.88.0.1,8,-1,377,0,0.000000783,0.000000770,0.000006062\n')).toBeUndefined();
    expect(chronySourcesProblem('')).toBe('no NTP source configured');
  });

  it('reads timesyncd.conf and its drop-ins, the last NTP= winning', () => {
    expect(timesyncdServers(['[Time]\nNTP=a.lan b.lan\n', '[Time]\nNTP=c.lan\n'])).toBe('c.lan');
    expect(timesyncdServers(['[Time]\n#NTP=\nFallbackNTP=pool.ntp.org\n'])).toBe('pool.ntp.org (fallback)');
    expect(timesyncdServers([''])).toBeUndefined();
  });

  it('formats offsets as exact seconds with a rounded unit', () => {
    expect(formatOffset(1_234)).toBe('1.2 s');
    expect(formatOffset(-125_000)).toBe('125 s (2 min)');
    expect(formatOffset(7_200_000)).toBe('7200 s (2 h)');
    expect(formatOffset(3 * 86_400_000)).toBe('259200 s (3 days)');
  });
});

describe('the x509 clock hint', () => {
  const line = 'time="2001-01-01T00:00:05Z" level=info msg="Waiting to retrieve agent configuration; server is not ready: Get \\"https://10.0.0.100:9345/v1-rke2/serving-kubelet.crt\\": tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2001-01-01T00:00:05Z is before 2026-12-01T10:00:00Z"';

  it('turns "current time T is before NOTBEFORE" into the offset', () => {
    const e = findCertificateTimeError(`some line\n${line}\nanother`)!;
    expect(e.relation).toBe('before');
    const text = explainCertificateTime(e);
    expect(text).toMatch(/^the clock is 817811995 s \(9465 days\) behind the certificate's start at least: RKE2 logged "x509: certificate has expired or is not yet valid: current time 2001-01-01T00:00:05Z is before 2026-12-01T10:00:00Z"/);
  });

  it('says an expired certificate may be a clock ahead', () => {
    const e = findCertificateTimeError('x509: certificate has expired or is not yet valid: current time 2027-01-01T00:00:00Z is after 2026-12-31T00:00:00Z')!;
    expect(explainCertificateTime(e)).toMatch(/^a certificate expired 86400 s \(24 h\) ago by this node's clock/);
  });

  it('without times, measures against the join server when it can, else points at time-sync', () => {
    const e = findCertificateTimeError('x509: certificate has expired or is not yet valid')!;
    const now = Date.parse('2026-12-01T09:00:00Z');
    expect(explainCertificateTime(e, { url: 'https://vip:9345/ping', dateMs: Date.parse('2026-12-01T10:00:00Z'), localMs: now, rttMs: 0 })).toMatch(/^the clock is 3601 s \(60 min\) behind the join server's \(https:\/\/vip:9345\/ping\)/);
    expect(explainCertificateTime(e, { url: 'https://vip:9345/ping', problem: 'connection refused' })).toContain("the join server's clock is unknown: connection refused");
    expect(findCertificateTimeError('level=error msg="etcd: dial tcp: connection refused"')).toBeUndefined();
  });
});

describe('which time daemon to ask (daemon: auto)', () => {
  const SYNCED = '0A580001,10.88.0.1,9,1796123328.729027850,-0.000002958,-0.000000013,0.000000503,-0.014,-0.001,0.223,0.000010466,0.000000927,0.5,Normal';
  async function nodeRoot(): Promise<{ root: string; opts: (chronyc: string) => TimeObserveOptions; calls: () => Promise<string[]>; chronyc: (script: string) => Promise<string> }> {
    const root = await testTempDir('hv-time-daemon-');
    await mkdir(path.join(root, 'usr/lib/systemd'), { recursive: true });
    await writeFile(path.join(root, 'usr/lib/systemd/systemd-timesyncd'), '');
    await mkdir(path.join(root, 'run/systemd/timesync'), { recursive: true });
    await writeFile(path.join(root, 'run/systemd/timesync/synchronized'), '');
    const log = path.join(root, 'chronyc-calls');
    return {
      root,
      opts: (chronyc) => ({ root: (p) => path.join(root, p), daemon: 'auto', chronyc, timesyncdSyncFile: '/run/systemd/timesync/synchronized', timesyncdBinaries: ['/usr/lib/systemd/systemd-timesyncd'] }),
      calls: async () => (await readFile(log, 'utf8').catch(() => '')).split('\n').filter(Boolean),
      chronyc: async (body) => {
        const file = path.join(root, 'chronyc');
        await writeFile(file, `#!/bin/sh\necho "$*" >> '${log}'\n${body}\n`, { mode: 0o755 });
        return file;
      },
    };
  }

  it('asks chronyd when chronyc is installed and it answers', async () => {
    const n = await nodeRoot();
    const state = await observeDaemon(n.opts(await n.chronyc(`echo '${SYNCED}'`)));
    expect(state).toMatchObject({ kind: 'chrony', synced: true, server: '10.88.0.1' });
    expect(await n.calls()).toEqual(['-n -c tracking']);
  });

  it("falls back to systemd-timesyncd's file when chronyd does not answer", async () => {
    const n = await nodeRoot();
    const state = await observeDaemon(n.opts(await n.chronyc('echo "506 Cannot talk to daemon" >&2; exit 1')));
    expect(state).toMatchObject({ kind: 'timesyncd', synced: true });
    expect(await n.calls()).toEqual(['-n -c tracking']);
  });

  it('reads systemd-timesyncd when there is no chronyc, by path or on PATH', async () => {
    const n = await nodeRoot();
    expect(await observeDaemon(n.opts(path.join(n.root, 'usr/bin/chronyc')))).toMatchObject({ kind: 'timesyncd', synced: true });
    expect(await observeDaemon(n.opts('hv-test-no-such-chronyc'))).toMatchObject({ kind: 'timesyncd', synced: true });
  });
});
