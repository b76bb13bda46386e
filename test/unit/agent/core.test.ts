import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HvError } from '../../../lib/errors.js';
import { Redactor } from '../../../lib/redact.js';
import { loadGuards } from '../../../agent/guards/index.js';
import { GUARD_ORDER } from '../../../agent/guard.js';
import { configCandidates, registerConfigSecrets } from '../../../agent/node-config.js';
import { guardDeadlineMs, guardSettings, loadSettings, parseDuration, resolveSettings } from '../../../agent/settings.js';
import { formatStatusTable, readStatus } from '../../../agent/status.js';
import type { StatusDocument } from '../../../agent/guard.js';
import { classifyDrift, desiredRegistries } from '../../../agent/registries/registries-file.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hvagent-core-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('settings', () => {
  it('defaults everything when the file is missing', async () => {
    const s = await loadSettings(path.join(dir, 'nope.yaml'));
    expect(s.backoff).toEqual({ initialMs: 1000, maxMs: 30_000 });
    expect(configCandidates(s.common)).toEqual(['/oem/harvester.config', '/oem/hvinstall/config.json']);
  });

  it('merges common and per-guard settings and parses durations', async () => {
    const f = path.join(dir, 'config.yaml');
    await writeFile(f, 'logLevel: debug\nbackoff: {initial: 2s, max: 1m}\nretryFailedAfter: 10m\ncontainerdSocket: /run/containerd/containerd.sock\nguards:\n  network-online:\n    deadline: 10m\n    netns: test\n');
    const s = await loadSettings(f);
    expect(s.logLevel).toBe('debug');
    expect(s.backoff).toEqual({ initialMs: 2000, maxMs: 60_000 });
    expect(s.retryFailedAfterMs).toBe(600_000);
    expect(guardSettings(s, 'network-online')).toMatchObject({ containerdSocket: '/run/containerd/containerd.sock', netns: 'test', deadline: '10m' });
    expect(guardDeadlineMs(s, 'network-online', 1)).toBe(600_000);
    expect(guardDeadlineMs(s, 'registries', 1234)).toBe(1234);
  });

  it('rejects unknown guards, bad durations, bad log levels and non-YAML, naming the file', async () => {
    expect(() => resolveSettings({ guards: { 'network-offline': {} } }, 'f.yaml')).toThrow('f.yaml: guards.network-offline: unknown guard');
    expect(() => resolveSettings({ guards: { registries: { deadline: 'soon' } } }, 'f.yaml')).toThrow('f.yaml: guards.registries.deadline: invalid duration "soon"');
    expect(() => resolveSettings({ logLevel: 'loud' }, 'f.yaml')).toThrow(/logLevel must be one of/);
    expect(() => resolveSettings(['x'], 'f.yaml')).toThrow('f.yaml: the agent settings must be a YAML mapping');
    const f = path.join(dir, 'bad.yaml');
    await writeFile(f, 'guards: [\n');
    await expect(loadSettings(f)).rejects.toThrow(new RegExp(`^${f}: not valid YAML`));
    expect(parseDuration('1.5s', 'x')).toBe(1500);
    expect(parseDuration(250, 'x')).toBe(250);
  });
});

describe('the guard set', () => {
  it('has one guard for every name in the dependency order, under its own name, depending only on guards before it', async () => {
    const guards = await loadGuards();
    expect(Object.keys(guards).sort()).toEqual([...GUARD_ORDER].sort());
    for (const [i, name] of GUARD_ORDER.entries()) {
      const g = guards[name]!;
      expect(g.name).toBe(name);
      expect(typeof g.reconcile).toBe('function');
      expect(g.deadlineMs).toBeGreaterThan(0);
      for (const d of g.dependsOn) expect(GUARD_ORDER.indexOf(d), `${name} depends on ${d}`).toBeLessThan(i);
    }
  });

  it('loads the guards it is asked for and no others', async () => {
    const some = await loadGuards(['image-preload', 'network-online']);
    expect(Object.keys(some).sort()).toEqual(['image-preload', 'network-online']);
    expect(some['image-preload']!.name).toBe('image-preload');
    expect(some['network-online']!.name).toBe('network-online');
  });
});

describe('status document', () => {
  const doc: StatusDocument = {
    version: 1,
    pid: 4242,
    startedAt: '2026-11-29T10:00:00.000Z',
    updatedAt: '2026-11-29T10:05:00.000Z',
    mode: 'run',
    state: 'running',
    guards: [
      { name: 'network-online', phase: 'succeeded', attempts: 3, detail: 'mgmt-br 10.0.0.5/24, default via 10.0.0.1', startedAt: '2026-11-29T10:00:00.000Z', finishedAt: '2026-11-29T10:00:09.000Z', updatedAt: '2026-11-29T10:00:09.000Z' },
      { name: 'registries', phase: 'waiting', attempts: 2, lastError: 'cannot read the declared source', nextRetryAt: '2026-11-29T10:05:30.000Z', startedAt: '2026-11-29T10:00:09.000Z', updatedAt: '2026-11-29T10:05:00.000Z' },
      { name: 'longhorn-disk', phase: 'failed', attempts: 1, lastError: '2 devices labelled HARV_LH_DEFAULT: /dev/sdb, /dev/sdc', hint: "tune2fs -L '' DEVICE", updatedAt: '2026-11-29T10:00:01.000Z' },
    ],
  };

  it('formats the human table with phase, attempts, next retry, timestamps, detail or error, and hints', () => {
    const t = formatStatusTable(doc, { now: Date.parse('2026-11-29T10:05:00.000Z'), alive: true });
    const lines = t.split('\n');
    expect(lines[0]).toBe('hvagent run: running (pid 4242), started 2026-11-29T10:00:00.000Z, updated 2026-11-29T10:05:00.000Z');
    expect(lines[2]).toMatch(/^GUARD\s+PHASE\s+ATTEMPTS\s+NEXT RETRY\s+STARTED\s+FINISHED\s+DETAIL \/ LAST ERROR$/);
    expect(lines[3]).toMatch(/^network-online\s+succeeded\s+3\s+-\s+10:00:00\s+10:00:09\s+mgmt-br 10\.0\.0\.5\/24, default via 10\.0\.0\.1$/);
    expect(lines[4]).toMatch(/^registries\s+waiting\s+2\s+10:05:30 \(in 30s\)\s+10:00:09\s+-\s+cannot read the declared source$/);
    expect(lines[5]).toMatch(/^longhorn-disk\s+failed\s+1\s+-\s+-\s+-\s+2 devices labelled/);
    expect(t).toContain("hint (longhorn-disk): tune2fs -L '' DEVICE");
  });

  it('says when the agent that wrote a running document is gone', () => {
    expect(formatStatusTable(doc, { now: 0, alive: false }).split('\n')[0]).toMatch(/^hvagent run: not running \(pid 4242 is gone\)/);
  });

  it('explains a missing or broken document', async () => {
    await expect(readStatus(path.join(dir, 'none.json'))).rejects.toMatchObject({ message: `no status document at ${dir}/none.json`, hint: expect.stringMatching(/has not run/), exitCode: 2 });
    await writeFile(path.join(dir, 'bad.json'), '{"version": 2}');
    await expect(readStatus(path.join(dir, 'bad.json'))).rejects.toBeInstanceOf(HvError);
  });
});

describe('config secrets', () => {
  it('registers the token, password, registry credentials and webhook auth', () => {
    const r = new Redactor();
    registerConfigSecrets(r, {
      token: 'cluster-token-1',
      os: { password: 'rootpass1' },
      systemSettings: { 'containerd-registry': '{"Configs":{"r.example":{"Auth":{"Username":"bob","Password":"regpass1"}}}}' },
      install: { webhooks: [{ event: 'STARTED', url: 'https://h.example', basicAuth: { user: 'u', password: 'hookpass1' }, headers: { Authorization: ['Bearer hooktoken1'] } }] },
    });
    const s = r.redactString('cluster-token-1 rootpass1 regpass1 hookpass1 Bearer hooktoken1');
    expect(s).toBe('<redacted> <redacted> <redacted> <redacted> <redacted>');
  });
});

describe('registries drift', () => {
  const desired = desiredRegistries('{"Mirrors":{"docker.io":{"Endpoints":["https://m.example"]}}}');
  it('tells deleted, truncated, edited and mode drift apart, and accepts equivalent content', () => {
    expect(classifyDrift({}, desired)).toBe('deleted');
    expect(classifyDrift({ content: '', mode: 0o644 }, desired)).toBe('truncated');
    expect(classifyDrift({ content: 'mirrors: {docker.io: {endpoint: ["https://other"]}}', mode: 0o644 }, desired)).toBe('edited');
    expect(classifyDrift({ content: ': : not yaml [', mode: 0o644 }, desired)).toBe('edited');
    expect(classifyDrift({ content: desired.content, mode: 0o666 }, desired)).toBe('mode');
    expect(classifyDrift({ content: 'mirrors:\n  docker.io:\n    endpoint: [https://m.example]\n', mode: 0o644 }, desired)).toBe('none');
  });
  it('a change to configs only is a change', () => {
    const withAuth = desiredRegistries('{"Mirrors":{"docker.io":{"Endpoints":["https://m.example"]}},"Configs":{"m.example":{"TLS":{"InsecureSkipVerify":true}}}}');
    expect(classifyDrift({ content: desired.content, mode: 0o644 }, withAuth)).toBe('edited');
  });
});
