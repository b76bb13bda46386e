/**
 * The certificates guard's reconcile on a node root with the openssl-made fixture (a leaf that
 * expires 2026-06-01T12:00Z, in RKE2's server/tls), a clock the test sets, and a stand-in `rke2`
 * script that records each call: the rotate runs once, only in hvagent mode, and its outcome is in
 * the result and the report. (test/integration/agent-rke2/certificates.test.ts does the same with
 * the runner, the rke2 stand-in and RKE2 started after the rotate.)
 */
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import certificates, { nextLookMs } from '../../../agent/guards/certificates.js';
import type { GuardContext } from '../../../agent/guard.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { Redactor } from '../../../lib/redact.js';

const FIXTURES = fileURLToPath(new URL('../../fixtures/rke2-certs/', import.meta.url));
const SERVING = 'var/lib/rancher/rke2/server/tls/serving-kube-apiserver.crt';
const dirs: string[] = [];
afterEach(async () => {
  while (dirs.length) await rm(dirs.pop()!, { recursive: true, force: true });
});

interface Setup {
  ctx: (by: 'rancherd' | 'hvagent', nowIso: string) => GuardContext & { reported: Array<Record<string, unknown>> };
  calls: () => Promise<string[]>;
}

/** renew: the script puts the ten-year CA fixture where the expired leaf was (as if RKE2 made a new one). */
async function setup(script: 'renews' | 'renews-nothing' | 'fails'): Promise<Setup> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'hv-certs-guard-'));
  dirs.push(root);
  await mkdir(path.join(root, path.dirname(SERVING)), { recursive: true });
  await copyFile(path.join(FIXTURES, 'client-kubelet.crt'), path.join(root, SERVING));
  const log = path.join(root, 'calls');
  const binary = path.join(root, 'rke2');
  const act = { renews: `cp '${path.join(FIXTURES, 'client-ca.crt')}' '${path.join(root, SERVING)}'`, 'renews-nothing': ':', fails: "echo 'level=fatal msg=\"rotate: permission denied\"' >&2; exit 1" }[script];
  await writeFile(binary, `#!/bin/sh\necho "$@" >> '${log}'\n${act}\n`);
  await chmod(binary, 0o755);
  return {
    ctx: (by, nowIso) => {
      const reported: Array<Record<string, unknown>> = [];
      return {
        root: (p) => path.join(root, p),
        log: new Logger(new MemorySink(), new Redactor(), 'debug'),
        signal: new AbortController().signal,
        settings: { supervisor: 'process', binary },
        progress: () => undefined,
        report: (d) => reported.push(d),
        now: () => Date.parse(nowIso),
        bootstrapper: by,
        reported,
      };
    },
    calls: async () => (await readFile(log, 'utf8').catch(() => '')).split('\n').filter(Boolean),
  };
}

describe('certificates guard (reconcile, a stand-in rke2 script)', () => {
  it('expiring: ok with the days left, no rotate', async () => {
    const s = await setup('renews');
    const r = await certificates.reconcile(s.ctx('hvagent', '2026-05-20T12:00:00Z'));
    expect(r).toEqual({ status: 'ok', detail: 'expiring: 1 of 1 RKE2 certificates; soonest: serving-kube-apiserver.crt expires in 12 days (2026-06-01)' });
    expect(await s.calls()).toEqual([]);
  });

  it('expired while RKE2 was off: rotated before RKE2 starts, and ok on the new certificate', async () => {
    const s = await setup('renews');
    const ctx = s.ctx('hvagent', '2026-07-01T00:00:00Z');
    const r = await certificates.reconcile(ctx);
    expect(await s.calls()).toEqual([`certificate rotate --data-dir ${ctx.root('/var/lib/rancher/rke2')}`]);
    expect(r).toMatchObject({ status: 'ok', detail: expect.stringMatching(/^rotated the expired server certificates \(exit 0\); 1 RKE2 certificates; soonest: serving-kube-apiserver\.crt expires in 3805 days \(2036-11-30\)$/) });
    expect(ctx.reported.at(-1)).toMatchObject({ level: 'ok', rotation: { outcome: 'rotated', detail: 'exit 0' } });
  });

  it('a rotate that renews nothing: failed with the reason, and not run again on the next pass', async () => {
    const s = await setup('renews-nothing');
    const first = await certificates.reconcile(s.ctx('hvagent', '2026-07-01T00:00:00Z'));
    expect(first).toMatchObject({ status: 'fail', diagnosis: expect.stringContaining('and they are still expired; it does not run it twice') });
    const second = await certificates.reconcile(s.ctx('hvagent', '2026-07-02T00:00:00Z'));
    expect(second).toMatchObject({ status: 'fail', diagnosis: expect.stringMatching(/^EXPIRED: 1 of 1 RKE2 certificates; soonest: serving-kube-apiserver\.crt expired on 2026-06-01; hvagent ran rke2 certificate rotate/) });
    expect(await s.calls()).toHaveLength(1);
  });

  it('a rotate that fails: its output in the diagnosis and the report, once', async () => {
    const s = await setup('fails');
    const ctx = s.ctx('hvagent', '2026-07-01T00:00:00Z');
    const r = await certificates.reconcile(ctx);
    expect(r).toMatchObject({ status: 'fail', diagnosis: expect.stringMatching(/^rke2 certificate rotate failed for serving-kube-apiserver\.crt: .* exited 1: level=fatal msg="rotate: permission denied"$/) });
    expect(ctx.reported.at(-1)).toMatchObject({ rotation: { outcome: 'failed' } });
    expect(await certificates.reconcile(s.ctx('hvagent', '2026-07-01T01:00:00Z'))).toMatchObject({ status: 'fail', diagnosis: expect.stringContaining('and it failed: ') });
    expect(await s.calls()).toHaveLength(1);
  });

  it('under rancherd: reported as expired, ok, never rotated', async () => {
    const s = await setup('renews');
    const ctx = s.ctx('rancherd', '2026-07-01T00:00:00Z');
    expect(await certificates.reconcile(ctx)).toEqual({ status: 'ok', detail: 'EXPIRED: 1 of 1 RKE2 certificates; soonest: serving-kube-apiserver.crt expired on 2026-06-01' });
    expect(ctx.reported.at(-1)).toMatchObject({ level: 'expired', soonestDays: -30 });
    expect(await s.calls()).toEqual([]);
  });
});

/** A `systemctl` first on PATH that records its arguments and says rke2-server is `state`. */
async function withSystemctl<T>(state: string, body: (calls: () => Promise<string[]>) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-certs-systemctl-'));
  dirs.push(dir);
  const log = path.join(dir, 'calls');
  await writeFile(path.join(dir, 'systemctl'), `#!/bin/sh\necho "$@" >> '${log}'\necho ${state}\n`);
  await chmod(path.join(dir, 'systemctl'), 0o755);
  const before = process.env.PATH;
  process.env.PATH = `${dir}:${before ?? ''}`;
  try {
    return await body(async () => (await readFile(log, 'utf8').catch(() => '')).split('\n').filter(Boolean));
  } finally {
    process.env.PATH = before;
  }
}

/** The context with the systemd supervisor: rke2-server's state is asked of `systemctl`. */
function underSystemd<T extends GuardContext>(ctx: T): T {
  ctx.settings = { ...ctx.settings, supervisor: 'systemd' };
  return ctx;
}

describe("certificates guard: whether rke2-server runs is asked only when it matters", () => {
  it('a fresh node (no certificates) is judged without asking systemd', async () => {
    const s = await setup('renews');
    await rm(s.ctx('hvagent', '2026-07-01T00:00:00Z').root(SERVING));
    await withSystemctl('active', async (systemctl) => {
      const ctx = underSystemd(s.ctx('hvagent', '2026-07-01T00:00:00Z'));
      expect(await certificates.reconcile(ctx)).toEqual({ status: 'ok', detail: 'no RKE2 certificates yet (RKE2 makes them at its first start)' });
      expect(await systemctl()).toEqual([]);
    });
  });

  it('certificates within their dates are judged without asking systemd', async () => {
    const s = await setup('renews');
    await withSystemctl('active', async (systemctl) => {
      const ctx = underSystemd(s.ctx('hvagent', '2026-05-20T12:00:00Z'));
      expect(await certificates.reconcile(ctx)).toMatchObject({ status: 'ok' });
      expect(await systemctl()).toEqual([]);
    });
  });

  it('an expired server certificate with rke2-server running: asked, and not rotated under it', async () => {
    const s = await setup('renews');
    await withSystemctl('active', async (systemctl) => {
      const ctx = underSystemd(s.ctx('hvagent', '2026-07-01T00:00:00Z'));
      const r = await certificates.reconcile(ctx);
      expect(await systemctl()).toEqual(['is-active rke2-server.service']);
      expect(await s.calls()).toEqual([]);
      expect(r).toMatchObject({ status: 'ok', detail: 'EXPIRED: 1 of 1 RKE2 certificates; soonest: serving-kube-apiserver.crt expired on 2026-06-01' });
      expect(ctx.reported.at(-1)).toMatchObject({ notes: [expect.stringMatching(/^rke2-server is running: hvagent rotates only before it starts RKE2/)] });
    });
  });

  it('an expired server certificate with rke2-server stopped: asked, then rotated', async () => {
    const s = await setup('renews');
    await withSystemctl('inactive', async (systemctl) => {
      const ctx = underSystemd(s.ctx('hvagent', '2026-07-01T00:00:00Z'));
      expect(await certificates.reconcile(ctx)).toMatchObject({ status: 'ok', detail: expect.stringMatching(/^rotated the expired server certificates/) });
      expect(await s.calls()).toHaveLength(1);
      expect(await systemctl()).toEqual(['is-active rke2-server.service']);
    });
  });
});

describe('certificates guard (watch)', () => {
  it('looks every appearInterval while certificates appear in the first 15 minutes, every waitInterval while RKE2 may still make them, then every checkInterval', () => {
    const s = { checkIntervalMs: 86_400_000, waitIntervalMs: 60_000, appearIntervalMs: 5_000 };
    const none = { level: 'none' as const, changed: false };
    const steady = { level: 'ok' as const, changed: false };
    const grew = { level: 'ok' as const, changed: true };
    // None yet: soon at first, and still every waitInterval after 15 minutes (never a day).
    expect(nextLookMs(s, none, 0)).toBe(5_000);
    expect(nextLookMs(s, none, 15 * 60_000 - 1)).toBe(5_000);
    expect(nextLookMs(s, none, 15 * 60_000)).toBe(60_000);
    expect(nextLookMs(s, none, 10 * 86_400_000)).toBe(60_000);
    // The set changed at the last look: RKE2 is still writing them.
    expect(nextLookMs(s, grew, 0)).toBe(5_000);
    expect(nextLookMs(s, grew, 15 * 60_000)).toBe(86_400_000);
    // Unchanged: every waitInterval for the first 15 minutes, then daily.
    expect(nextLookMs(s, steady, 0)).toBe(60_000);
    expect(nextLookMs(s, steady, 15 * 60_000 - 1)).toBe(60_000);
    expect(nextLookMs(s, steady, 15 * 60_000)).toBe(86_400_000);
    expect(nextLookMs(s, { level: 'expiring', changed: false }, 20 * 60_000)).toBe(86_400_000);
    // Neither interval lengthens a shorter one set below it.
    expect(nextLookMs({ checkIntervalMs: 10_000, waitIntervalMs: 60_000, appearIntervalMs: 5_000 }, steady, 0)).toBe(10_000);
    expect(nextLookMs({ checkIntervalMs: 86_400_000, waitIntervalMs: 2_000, appearIntervalMs: 5_000 }, none, 0)).toBe(2_000);
  });

  it('certificates RKE2 writes one after another are each reported within an appearInterval, not a waitInterval later', async () => {
    const t = await setup('renews-nothing');
    const root0 = t.ctx('hvagent', '').root('/');
    // The fixture's leaf is not there yet: RKE2 has made none when the watch begins.
    await rm(path.join(root0, SERVING));
    const ac = new AbortController();
    const reported: Array<Record<string, unknown>> = [];
    const ctx: GuardContext = { ...t.ctx('hvagent', new Date().toISOString()), now: () => Date.now(), signal: ac.signal, report: (d) => reported.push(d), settings: { ...t.ctx('hvagent', '').settings, waitInterval: '1h', appearInterval: '50ms' } };
    const watching = certificates.watch!(ctx);
    const tls = path.join(root0, 'var/lib/rancher/rke2/server/tls');
    const paths = () => ((reported.at(-1)?.certificates ?? []) as Array<{ path: string }>).map((c) => c.path).sort();
    const until = async (n: number) => {
      const deadline = Date.now() + 10_000;
      while (paths().length < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    };
    try {
      // Six or so looks find none: the status is written once for them, not once a look.
      await new Promise((r) => setTimeout(r, 300));
      expect(reported).toHaveLength(1);
      expect(reported[0]).toMatchObject({ level: 'none', certificates: [] });
      await copyFile(path.join(FIXTURES, 'client-ca.crt'), path.join(tls, 'server-ca.crt'));
      await until(1);
      expect(paths()).toEqual(['/var/lib/rancher/rke2/server/tls/server-ca.crt']);
      // The next one, after the set changed: still looked for soon (a waitInterval here is an hour).
      await copyFile(path.join(FIXTURES, 'client-kubelet.crt'), path.join(root0, SERVING));
      await until(2);
      expect(paths()).toEqual(['/var/lib/rancher/rke2/server/tls/server-ca.crt', `/${SERVING}`]);
    } finally {
      ac.abort();
      await watching;
    }
  });

  it('a certificate RKE2 writes after the first look is reported within a waitInterval, not a checkInterval later', async () => {
    const t = await setup('renews-nothing');
    const ac = new AbortController();
    const reported: Array<Record<string, unknown>> = [];
    const ctx: GuardContext = { ...t.ctx('hvagent', new Date().toISOString()), now: () => Date.now(), signal: ac.signal, report: (d) => reported.push(d), settings: { ...t.ctx('hvagent', '').settings, waitInterval: '50ms' } };
    const watching = certificates.watch!(ctx);
    const root = ctx.root('/');
    await copyFile(path.join(FIXTURES, 'client-ca.crt'), path.join(root, 'var/lib/rancher/rke2/server/tls/server-ca.crt'));
    const deadline = Date.now() + 10_000;
    const paths = () => ((reported.at(-1)?.certificates ?? []) as Array<{ path: string }>).map((c) => c.path).sort();
    while (paths().length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    ac.abort();
    await watching;
    expect(paths()).toEqual(['/var/lib/rancher/rke2/server/tls/server-ca.crt', `/${SERVING}`]);
  });
});
