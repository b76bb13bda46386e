/**
 * hvagent's boot-assessment controller over a COS_STATE directory with real ext2 images (mke2fs,
 * tune2fs: no root), fake guard statuses and a recorded reboot: what a node does on an attempt
 * and on the fallback boot, and what it leaves on disk and tells.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { link, mkdir, mkdtemp, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { Logger } from '../../../lib/logger.js';
import type { GuardName, GuardStatus } from '../../../agent/guard.js';
import { cosState, commitFallback, readAssessmentEnv } from '../../../agent/assessment/cos-state.js';
import { runAssessment, type AssessmentDeps } from '../../../agent/assessment/run.js';
import { cosRecovery } from '../../../agent/assessment/cos-recovery.js';
import { tellHvpxe } from '../../../agent/assessment/tell-hvpxe.js';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readAssessmentRecord, type AssessmentRecord } from '../../../agent/assessment/record.js';
import { renderGrubenv } from '../../../node/grubenv.js';
import { upgradedStateYaml } from '../../../node/state-yaml.js';

let dir: string;
let cos: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'hv-assess-'));
  cos = path.join(dir, 'cos-state');
  await mkdir(path.join(cos, 'cOS'), { recursive: true });
});
afterEach(() => rm(dir, { recursive: true, force: true }));

async function image(name: string, label: string, marker: string): Promise<void> {
  const tree = path.join(dir, `tree-${marker}`);
  await mkdir(tree, { recursive: true });
  await writeFile(path.join(tree, 'marker'), marker);
  await execa('truncate', ['-s', '8M', path.join(cos, 'cOS', name)]);
  await execa('mke2fs', ['-q', '-F', '-t', 'ext2', '-L', label, '-d', tree, path.join(cos, 'cOS', name)]);
}
const markerOf = async (name: string) => (await execa('debugfs', ['-R', 'cat /marker', path.join(cos, 'cOS', name)], { stderr: 'ignore' })).stdout;
const labelOf = async (name: string) => (await execa('blkid', ['-p', '-o', 'value', '-s', 'LABEL', path.join(cos, 'cOS', name)])).stdout.trim();
const exists = (f: string) => stat(path.join(cos, f)).then(() => true, () => false);
const envState = async () => (await execa('grub-editenv', [path.join(cos, 'hv_assessment'), 'list'])).stdout;
const oneliner = async (f: string) => `sha256-4m:${(await execa('sh', ['-c', `split -b 4194304 --filter='sha256sum | cut -c1-64' "$1" | sha256sum | cut -c1-64`, 'sh', f])).stdout.trim()}`;

const upgrade = { version: 1 as const, at: '2026-12-02T10:00:00Z', from: { name: 'test OS v2', digest: 'd2' }, to: { name: 'test OS v3', digest: 'd3', source: 'file:///v3', sourceDigest: 's3' }, armed: true };
const guard = (name: GuardName, phase: GuardStatus['phase'], lastError?: string): GuardStatus => ({ name, phase, attempts: 1, updatedAt: 'x', lastError });
const ALL_OK: GuardStatus[] = (['network-online', 'node-identity', 'time-sync', 'rke2', 'longhorn-disk'] as const).map((n) => guard(n, 'succeeded'));

interface Run { deps: AssessmentDeps; reboots: number; console: string[]; cluster: AssessmentRecord[] }
function deps(cmdline: string, guards: () => GuardStatus[], clock = { t: 0 }): Run {
  const r: Run = { reboots: 0, console: [], cluster: [], deps: undefined as unknown as AssessmentDeps };
  r.deps = {
    cos: cosState(cos, false),
    recordFile: path.join(dir, 'oem/hvinstall/assessment.json'),
    upgradeFile: path.join(dir, 'oem/hvinstall/upgrade.json'),
    metricsFile: path.join(dir, 'metrics/hvagent_assessment.prom'),
    cmdline,
    bootId: 'boot-1',
    settings: { deadlineMs: 60_000, require: ['network-online', 'node-identity', 'time-sync', 'rke2', 'longhorn-disk'], pollMs: 1000 },
    readGuards: async () => guards(),
    reboot: async () => void r.reboots++,
    announce: async (_l, lines) => void r.console.push(...lines),
    tellCluster: async (rec) => void r.cluster.push(rec),
    log: new Logger({ write: () => undefined }),
    now: () => clock.t,
    sleep: async (ms) => void (clock.t += ms),
    signal: new AbortController().signal,
  };
  return r;
}
const ACTIVE = 'root=LABEL=COS_STATE cos-img/filename=/cOS/active.img panic=5 hv.assessment=attempt';
const PASSIVE = 'root=LABEL=COS_STATE cos-img/filename=/cOS/passive.img upgrade_failure hv.assessment=fallback';

async function node(state: string): Promise<void> {
  await writeFile(path.join(cos, 'hv_assessment'), renderGrubenv({ hv_assessment_enabled: 'yes', hv_assessment_state: state }));
  await mkdir(path.join(dir, 'oem/hvinstall'), { recursive: true });
  await writeFile(path.join(dir, 'oem/hvinstall/upgrade.json'), JSON.stringify(upgrade));
}

describe('on the attempt (the upgraded image, state trying)', () => {
  it('healthy: commits (nothing pending, the last failed image gone), no reboot', async () => {
    await node('trying');
    await writeFile(path.join(cos, 'cOS/failed.img'), 'old failure');
    let looks = 0;
    const r = deps(ACTIVE, () => (++looks < 3 ? [guard('network-online', 'running')] : ALL_OK));
    expect(await runAssessment(r.deps)).toBe('committed');
    expect(await envState()).toMatch(/^hv_assessment_state=$/m);
    expect(await exists('cOS/failed.img')).toBe(false);
    expect(r.reboots).toBe(0);
    expect((await readAssessmentRecord(r.deps.recordFile))?.outcome).toBe('committed');
    expect(await readFile(r.deps.metricsFile, 'utf8')).toMatch(/hvagent_boot_assessment_outcome\{outcome="committed"\} 1/);
  });

  it('a required guard failed: records which and why, says it on the console, reboots exactly once, leaves "trying" for grub', async () => {
    await node('trying');
    const r = deps(ACTIVE, () => [guard('network-online', 'failed', 'mgmt-br has no IPv4 address: no DHCP lease yet'), ...ALL_OK.slice(1)]);
    expect(await runAssessment(r.deps)).toBe('failed-rebooting');
    expect(r.reboots).toBe(1);
    expect(await envState()).toContain('hv_assessment_state=trying');
    const rec = await readAssessmentRecord(r.deps.recordFile);
    expect(rec?.attempt?.verdict).toEqual({ guard: 'network-online', evidence: 'mgmt-br has no IPv4 address: no DHCP lease yet', reason: 'failed' });
    expect(r.console.join('\n')).toMatch(/test OS v3 is NOT healthy: network-online failed: mgmt-br has no IPv4 address.*rebooting once into test OS v2/);
  });

  it('the deadline passes with RKE2 not ready: fails naming it and its last error', async () => {
    await node('trying');
    const r = deps(ACTIVE, () => [...ALL_OK.filter((g) => g.name !== 'rke2'), guard('rke2', 'waiting', 'rke2-server is activating')]);
    expect(await runAssessment(r.deps)).toBe('failed-rebooting');
    expect((await readAssessmentRecord(r.deps.recordFile))?.attempt?.verdict).toMatchObject({ guard: 'rke2', reason: 'deadline', evidence: 'rke2-server is activating' });
    expect(r.reboots).toBe(1);
  });

  it('an agent restarted on the same boot keeps the attempt\'s deadline (no fresh 60 s)', async () => {
    await node('trying');
    await writeFile(path.join(dir, 'oem/hvinstall/assessment.json'), JSON.stringify({ version: 1, outcome: 'trying', updatedAt: 'x', message: 'm', upgrade, attempt: { startedAt: new Date(-50_000).toISOString(), bootId: 'boot-1' } }));
    const clock = { t: 0 };
    const r = deps(ACTIVE, () => [guard('network-online', 'running', 'no carrier')], clock);
    expect(await runAssessment(r.deps)).toBe('failed-rebooting');
    expect(clock.t).toBe(10_000);
  });

  it('an environment block that stays unreadable is an error naming the file and the way out, not a guess', async () => {
    await node('trying');
    await writeFile(path.join(cos, 'hv_assessment'), 'hv_assessment_state=trying\n');
    const err = await readAssessmentEnv(cosState(cos, false)).then(() => undefined, (e: unknown) => e as Error);
    expect(err?.message).toContain(`${path.join(cos, 'hv_assessment')}: not a grub environment block`);
    expect(err?.message).toContain(`grub2-editenv ${path.join(cos, 'hv_assessment')} create`);
  });

  it('disarmed by the operator while the gate waits, its block read half-written once: no verdict, no reboot', async () => {
    await node('trying');
    let looks = 0;
    const r = deps(ACTIVE, () => {
      // As grub2-editenv sets a variable: the file truncated in place, then written; the gate looks between the two.
      if (++looks === 2) {
        writeFileSync(path.join(cos, 'hv_assessment'), '');
        setTimeout(() => writeFileSync(path.join(cos, 'hv_assessment'), renderGrubenv({ hv_assessment_enabled: 'no', hv_assessment_state: '' })), 30);
      }
      return [guard('network-online', 'running')];
    });
    expect(await runAssessment(r.deps)).toBe('disarmed');
    expect(r.reboots).toBe(0);
  });

  it('armed but booted without the attempt marker (grub could not write COS_STATE): loud, no reboot', async () => {
    await node('armed');
    const r = deps('cos-img/filename=/cOS/active.img', () => ALL_OK);
    expect(await runAssessment(r.deps)).toBe('unrecorded');
    expect(r.reboots).toBe(0);
    expect(r.console.join()).toMatch(/cannot write COS_STATE/);
  });

  it('nothing pending: decides nothing, writes nothing', async () => {
    await node('');
    const r = deps(ACTIVE, () => ALL_OK);
    expect(await runAssessment(r.deps)).toBeUndefined();
    expect(await readAssessmentRecord(r.deps.recordFile)).toBeUndefined();
  });
});

async function fellBackNode(): Promise<void> {
  await node('fallback');
  await image('active.img', 'COS_ACTIVE', 'v3-broken');
  await image('passive.img', 'COS_PASSIVE', 'v2-good');
  const installed = 'state:\n  label: COS_STATE\n  active: {source: dir:///v2, label: COS_ACTIVE, fs: ext2, file: cOS/active.img, size: 1, digest: "sha256-4m:old"}\n';
  await writeFile(path.join(cos, 'state.yaml'), upgradedStateYaml(installed, { source: 'file:///v3', sourceDigest: 's3', sizeBytes: 8388608, digest: 'sha256-4m:v3' }, 'sha256-4m:v2p', 'D'));
}

describe('on the fallback boot (the previous image, state fallback)', () => {
  it('makes the fallback permanent: the good image active.img and COS_ACTIVE, the failed one aside, state.yaml and grub state right, the attempt\'s reason told', async () => {
    await fellBackNode();
    await writeFile(path.join(dir, 'oem/hvinstall/assessment.json'), JSON.stringify({ version: 1, outcome: 'failed-rebooting', updatedAt: 'x', message: 'm', upgrade, attempt: { startedAt: 'T', verdict: { guard: 'network-online', evidence: 'mgmt-br has no carrier', reason: 'failed' } } }));
    const r = deps(PASSIVE, () => ALL_OK);
    expect(await runAssessment(r.deps)).toBe('fell-back');
    expect(await markerOf('active.img')).toBe('v2-good');
    expect(await labelOf('active.img')).toBe('COS_ACTIVE');
    expect(await markerOf('failed.img')).toBe('v3-broken');
    expect(await exists('cOS/passive.img')).toBe(false);
    expect(await envState()).toMatch(/^hv_assessment_state=$/m);
    const st = parse(await readFile(path.join(cos, 'state.yaml'), 'utf8'));
    expect(st.state.active.digest).toBe(await oneliner(path.join(cos, 'cOS/active.img')));
    expect(st.state.active.source).toBe('dir:///v2');
    expect(st.state.failed.file).toBe('cOS/failed.img');
    const rec = await readAssessmentRecord(r.deps.recordFile);
    expect(rec?.outcome).toBe('fell-back');
    expect(rec?.fallback?.health).toBe('healthy');
    expect(rec?.message).toMatch(/UPGRADE FAILED: test OS v3: network-online failed: mgmt-br has no carrier.*runs test OS v2/);
    expect(r.console.join('\n')).toMatch(/UPGRADE FAILED/);
    expect(r.cluster).toHaveLength(1);
    expect(r.reboots).toBe(0);
  });

  it('after a kernel panic (no verdict recorded): says the image never reached hvagent', async () => {
    await fellBackNode();
    const r = deps(PASSIVE, () => ALL_OK);
    await runAssessment(r.deps);
    expect((await readAssessmentRecord(r.deps.recordFile))?.message).toMatch(/never reached hvagent: a kernel panic/);
  });

  it('a previous image that is unhealthy too stays up: loud, no reboot', async () => {
    await fellBackNode();
    const r = deps(PASSIVE, () => [guard('network-online', 'failed', 'mgmt-br has no carrier'), ...ALL_OK.slice(1)]);
    expect(await runAssessment(r.deps)).toBe('fell-back');
    expect(r.reboots).toBe(0);
    const rec = await readAssessmentRecord(r.deps.recordFile);
    expect(rec?.fallback).toMatchObject({ health: 'unhealthy', unhealthy: { guard: 'network-online' } });
    expect(r.console.join('\n')).toMatch(/NOT healthy either.*no reboot/);
    expect(await readFile(r.deps.metricsFile, 'utf8')).toMatch(/hvagent_boot_assessment_fallback_unhealthy 1/);
  });

  it.each([
    ['after the failed image moved aside', async () => rename(path.join(cos, 'cOS/active.img'), path.join(cos, 'cOS/failed.img'))],
    ['after the second name was made', async () => {
      await rename(path.join(cos, 'cOS/active.img'), path.join(cos, 'cOS/failed.img'));
      await link(path.join(cos, 'cOS/passive.img'), path.join(cos, 'cOS/active.img'));
    }],
  ])('a commit cut short %s finishes on the next try with the same result', async (_what, cut) => {
    await fellBackNode();
    await cut();
    const did = await commitFallback(cosState(cos, false));
    // The digest names the image's chunks as its size counts them; whether holes were skipped depends on the filesystem's FIEMAP.
    const chunks = Math.ceil((await stat(path.join(cos, 'cOS/active.img'))).size / (4 * 1024 * 1024));
    const line = did.find((l) => l.startsWith('cOS/active.img digested: '));
    const m = /^cOS\/active\.img digested: (?:all (\d+) of its 4 MiB chunks read|(\d+) of its (\d+) 4 MiB chunks read, the other (\d+) holes \(no data on disk\))$/.exec(line ?? '');
    expect(m, line).not.toBeNull();
    if (m![1] !== undefined) expect(Number(m![1])).toBe(chunks);
    else expect([Number(m![3]), Number(m![2]) + Number(m![4])]).toEqual([chunks, chunks]);
    expect(await markerOf('active.img')).toBe('v2-good');
    expect(await markerOf('failed.img')).toBe('v3-broken');
    expect(await exists('cOS/passive.img')).toBe(false);
    expect(await labelOf('active.img')).toBe('COS_ACTIVE');
  });
});

describe("COS_RECOVERY's copy of state.yaml (Elemental writes the same document on both)", () => {
  const recoveryDir = (): string => path.join(dir, 'cos-recovery');
  const withRecovery = (r: Run, logged: string[]): Run => {
    r.deps.recovery = cosRecovery(recoveryDir(), false);
    r.deps.log = new Logger({ write: (line: string) => void logged.push(line) });
    return r;
  };

  it('a fallback commit leaves the recovery copy byte for byte COS_STATE\'s new state.yaml (the failed image aside)', async () => {
    await fellBackNode();
    await mkdir(recoveryDir());
    const before = await readFile(path.join(cos, 'state.yaml'), 'utf8');
    await writeFile(path.join(recoveryDir(), 'state.yaml'), before);
    const r = withRecovery(deps(PASSIVE, () => ALL_OK), []);
    expect(await runAssessment(r.deps)).toBe('fell-back');
    const copy = await readFile(path.join(recoveryDir(), 'state.yaml'), 'utf8');
    expect(copy).not.toBe(before);
    expect(copy).toBe(await readFile(path.join(cos, 'state.yaml'), 'utf8'));
    expect(parse(copy).state.failed.file).toBe('cOS/failed.img');
    expect(parse(copy).state.active.source).toBe('dir:///v2');
  });

  it('an upgrade commit repairs a recovery copy left behind (the upgrade wrote COS_STATE\'s only)', async () => {
    await node('trying');
    await writeFile(path.join(cos, 'state.yaml'), 'state:\n  active: {digest: "sha256-4m:v3"}\n');
    await mkdir(recoveryDir());
    await writeFile(path.join(recoveryDir(), 'state.yaml'), 'state:\n  active: {digest: "sha256-4m:v2"}\n');
    const r = withRecovery(deps(ACTIVE, () => ALL_OK), []);
    expect(await runAssessment(r.deps)).toBe('committed');
    expect(await readFile(path.join(recoveryDir(), 'state.yaml'), 'utf8')).toContain('sha256-4m:v3');
  });

  it('a recovery copy that cannot be written does not undo or stop the commit: warned, the node committed', async () => {
    await fellBackNode();
    await writeFile(recoveryDir(), 'not a directory');
    const logged: string[] = [];
    const r = withRecovery(deps(PASSIVE, () => ALL_OK), logged);
    expect(await runAssessment(r.deps)).toBe('fell-back');
    expect(await markerOf('active.img')).toBe('v2-good');
    expect(await envState()).toMatch(/^hv_assessment_state=$/m);
    expect(logged.join('')).toMatch(/COS_RECOVERY's state\.yaml was not updated/);
  });
});

describe('the fallback told to hvpxe (the node came from it: its grant on COS_OEM)', () => {
  const TOKEN = `hvnr_${'n'.repeat(43)}`;
  async function withGrant(r: Run, url: string): Promise<void> {
    const file = path.join(dir, 'oem/hvinstall/hvpxe-report.json');
    await writeFile(file, JSON.stringify({ url, token: TOKEN, machine: 'node-1', events: ['FALLBACK'] }), { mode: 0o600 });
    r.deps.tellHvpxe = (event) => tellHvpxe(file, event, { log: r.deps.log, now: r.deps.now, sleep: r.deps.sleep, deadlineMs: 30_000, retryDelayMs: 5_000 });
  }

  it('the commit posts FALLBACK with what failed and what runs; the record says told', async () => {
    const got: Array<{ auth?: string; body: string }> = [];
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => void (got.push({ auth: req.headers.authorization, body }), res.writeHead(204).end()));
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
    try {
      await fellBackNode();
      const r = deps(PASSIVE, () => ALL_OK);
      await withGrant(r, `http://127.0.0.1:${(server.address() as AddressInfo).port}/node-events/node-1`);
      expect(await runAssessment(r.deps)).toBe('fell-back');
      expect(got).toHaveLength(1);
      expect(got[0]!.auth).toBe(`Bearer ${TOKEN}`);
      expect(JSON.parse(got[0]!.body)).toMatchObject({ event: 'FALLBACK', running: 'test OS v2', failed: 'test OS v3' });
      const rec = await readAssessmentRecord(r.deps.recordFile);
      expect(rec?.fallback?.hvpxe).toMatchObject({ told: true });
      expect(rec?.fallback?.health).toBe('healthy');
    } finally {
      await new Promise<void>((ok) => server.close(() => ok()));
    }
  });

  it('a committed upgrade is told as UPGRADED, with the image now running', async () => {
    await node('trying');
    const events: unknown[] = [];
    const r = deps(ACTIVE, () => ALL_OK);
    r.deps.tellHvpxe = async (e) => (events.push(e), { told: true, at: 'x', detail: 'd' });
    expect(await runAssessment(r.deps)).toBe('committed');
    expect(events).toEqual([{ event: 'UPGRADED', at: new Date(0).toISOString(), running: 'test OS v3' }]);
  });

  it('hvpxe down: the fallback is committed and judged all the same, recorded as not told, no reboot', async () => {
    const s = http.createServer();
    await new Promise<void>((ok) => s.listen(0, '127.0.0.1', () => ok()));
    const port = (s.address() as AddressInfo).port;
    await new Promise<void>((ok) => s.close(() => ok()));
    await fellBackNode();
    const r = deps(PASSIVE, () => ALL_OK);
    await withGrant(r, `http://127.0.0.1:${port}/node-events/node-1`);
    expect(await runAssessment(r.deps)).toBe('fell-back');
    expect(await markerOf('active.img')).toBe('v2-good');
    expect(r.reboots).toBe(0);
    const rec = await readAssessmentRecord(r.deps.recordFile);
    expect(rec?.fallback?.hvpxe).toMatchObject({ told: false });
    expect(rec?.fallback?.hvpxe?.detail).toMatch(/not reached within 30 s/);
    expect(rec?.fallback?.health).toBe('healthy');
  });
});
