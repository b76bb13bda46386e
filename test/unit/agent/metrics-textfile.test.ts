/**
 * hvagent's node_exporter textfile: written by a real guard run (test-double guards), each value
 * following what happened (phase, attempts, the success time, the preload's report), and accepted
 * by promtool's parser and linter.
 */
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { Redactor } from '../../../lib/redact.js';
import type { Guard, GuardName, GuardResult } from '../../../agent/guard.js';
import { runGuards } from '../../../agent/runner.js';
import { defaultSettings } from '../../../agent/settings.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hvagent-metrics-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function guard(name: GuardName, results: GuardResult[], report?: Record<string, unknown>): Guard {
  const queue = [...results];
  return {
    name,
    dependsOn: [],
    deadlineMs: 60_000,
    reconcile: async (ctx) => {
      if (report) ctx.report?.(report);
      return queue.length > 1 ? queue.shift()! : queue[0]!;
    },
  };
}

function values(text: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const line of text.split('\n')) {
    const r = /^([a-z0-9_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (r) m.set(r[1]!, Number(r[2]));
  }
  return m;
}

describe('hvagent metrics textfile', () => {
  it('phase, attempts, last success time and the preload report, atomically under the textfile directory', async () => {
    const settings = defaultSettings();
    settings.backoff = { initialMs: 1, maxMs: 2 };
    const T = 1_800_000_000_000;
    const r = await runGuards({
      mode: 'once',
      rootDir: dir,
      settings,
      log: new Logger(new MemorySink(), new Redactor(), 'debug'),
      signal: new AbortController().signal,
      now: () => T,
      names: ['registries', 'image-preload', 'network-online', 'certificates'],
      guards: {
        registries: guard('registries', [{ status: 'retry', reason: 'a' }, { status: 'retry', reason: 'b' }, { status: 'ok' }]),
        'image-preload': guard('image-preload', [{ status: 'ok' }], { importedBytes: 123456789, importedArchives: 2, listedImages: 41 }),
        'network-online': guard('network-online', [{ status: 'fail', diagnosis: 'no carrier' }]),
        certificates: guard('certificates', [{ status: 'ok' }], {
          certificates: [
            { path: '/var/lib/rancher/rke2/server/tls/serving-kube-apiserver.crt', scope: 'server', ca: false, notAfter: '2027-06-01T12:00:00.000Z', daysLeft: 12 },
            { path: '/var/lib/rancher/rke2/agent/client-kubelet.crt', scope: 'agent', ca: false, notAfter: '2027-07-01T00:00:00.000Z', daysLeft: 41 },
          ],
        }),
      },
    });
    expect(r.ok).toBe(false);
    const textDir = path.join(dir, 'var/lib/node_exporter/textfile_collector');
    // Only the finished file: an atomic write leaves no temporary behind for the collector to read.
    expect(await readdir(textDir)).toEqual(['hvagent.prom']);
    const text = await readFile(path.join(textDir, 'hvagent.prom'), 'utf8');
    const v = values(text);
    expect(v.get('hvagent_guard_phase{guard="registries",phase="succeeded"}')).toBe(1);
    expect(v.get('hvagent_guard_phase{guard="registries",phase="failed"}')).toBe(0);
    expect(v.get('hvagent_guard_phase{guard="network-online",phase="failed"}')).toBe(1);
    expect(v.get('hvagent_guard_attempts{guard="registries"}')).toBe(3);
    expect(v.get('hvagent_guard_last_success_timestamp_seconds{guard="registries"}')).toBe(T / 1000);
    expect(v.has('hvagent_guard_last_success_timestamp_seconds{guard="network-online"}')).toBe(false);
    expect(v.get('hvagent_preload_imported_bytes')).toBe(123456789);
    expect(v.get('hvagent_preload_imported_archives')).toBe(2);
    expect(v.get('hvagent_preload_images')).toBe(41);
    // A timestamp per certificate (notAfter), not days left: the file never goes stale between checks.
    expect(v.get('hvagent_rke2_certificate_expiry_timestamp_seconds{path="/var/lib/rancher/rke2/server/tls/serving-kube-apiserver.crt",scope="server"}')).toBe(Date.parse('2027-06-01T12:00:00Z') / 1000);
    expect(v.get('hvagent_rke2_certificate_expiry_timestamp_seconds{path="/var/lib/rancher/rke2/agent/client-kubelet.crt",scope="agent"}')).toBe(Date.parse('2027-07-01T00:00:00Z') / 1000);

    const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(lint.error).toBeUndefined();
    expect({ status: lint.status, out: lint.stdout + lint.stderr }).toEqual({ status: 0, out: '' });
  });
});
