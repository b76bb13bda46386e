/** Under rancherd the rke2 guard never starts RKE2 (the same inputs start it in hvagent mode). */
import { access, chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import rke2Guard from '../../../agent/guards/rke2.js';
import type { GuardContext } from '../../../agent/guard.js';
import type { HarvesterConfig } from '../../../config/types.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { Redactor } from '../../../lib/redact.js';

const dirs: string[] = [];
afterEach(async () => {
  while (dirs.length) await rm(dirs.pop()!, { recursive: true, force: true });
});

const config = { token: 't0ken-secret', install: { mode: 'create', vip: '10.0.0.10', vipMode: 'static' }, os: { hostname: 'n1' } } as unknown as HarvesterConfig;

async function setup(): Promise<{ root: string; marker: string; ctx: (by: 'rancherd' | 'hvagent') => GuardContext }> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'hv-rke2-rancherd-'));
  dirs.push(root);
  const marker = path.join(root, 'rke2-was-started');
  const binary = path.join(root, 'rke2');
  // Records that it was run; a stand-in for nothing but "was I started?".
  await writeFile(binary, `#!/bin/sh\ntouch '${marker}'\nsleep 30\n`);
  await chmod(binary, 0o755);
  await mkdir(path.join(root, 'etc/rancher/rke2/config.yaml.d'), { recursive: true });
  const ctx = (by: 'rancherd' | 'hvagent'): GuardContext => ({
    root: (p) => path.join(root, p),
    config,
    log: new Logger(new MemorySink(), new Redactor(), 'debug'),
    signal: new AbortController().signal,
    settings: { supervisor: 'process', binary, probeWindowMs: 300, probeIntervalMs: 100, apiServerUrl: 'https://127.0.0.1:1' },
    progress: () => undefined,
    now: Date.now,
    bootstrapper: by,
  });
  return { root, marker, ctx };
}

describe('rke2 guard and the bootstrapper', () => {
  it('under rancherd: waits, explains and starts nothing', async () => {
    const t = await setup();
    const r = await rke2Guard.reconcile(t.ctx('rancherd'));
    expect(r).toMatchObject({ status: 'retry', reason: expect.stringContaining('rke2-server is not running, and without systemd hvagent cannot see rancherd') });
    await new Promise((res) => setTimeout(res, 300));
    await expect(access(t.marker)).rejects.toThrow();
    await expect(access(path.join(t.root, 'run/hvagent/rke2-server.pid'))).rejects.toThrow();
  });

  it('as bootstrapper: the same inputs start rke2', async () => {
    const t = await setup();
    const r = await rke2Guard.reconcile(t.ctx('hvagent'));
    expect(r.status).not.toBe('ok');
    const pid = JSON.parse(await readFile(path.join(t.root, 'run/hvagent/rke2-server.pid'), 'utf8')) as { pid: number };
    try {
      for (let i = 0; i < 50; i++) {
        if (await access(t.marker).then(() => true, () => false)) break;
        await new Promise((res) => setTimeout(res, 100));
      }
      await expect(access(t.marker)).resolves.toBeUndefined();
    } finally {
      try {
        process.kill(-pid.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
});
