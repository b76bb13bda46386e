/**
 * The registries guard in both ownership modes, through the real guard and the real CLI on a
 * temporary root (no root privileges needed): before rancher-system-agent takes Rancher's plans the
 * agent restores the install-time file; once it does, the agent leaves the cluster's file alone and
 * explains it, the hand-written 167 B file recycled to 0 B included.
 */
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import registriesGuard from '../../../agent/guards/registries.js';
import type { GuardContext } from '../../../agent/guard.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { Redactor } from '../../../lib/redact.js';

const execFileP = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, '../../..');
const SETTING = JSON.stringify({ Mirrors: { 'docker.io': { Endpoints: ['https://mirror.local:5000'] } } });
const HAND_WRITTEN = `${'mirrors:\n  docker.io:\n    endpoint:\n      - "https://hand.written.example:5000"\nconfigs: {}\n# written by hand'.padEnd(166, '.')}\n`;

const dirs: string[] = [];
afterEach(async () => {
  while (dirs.length) await rm(dirs.pop()!, { recursive: true, force: true });
});

async function nodeRoot(opts: { connected: boolean }): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'hv-reg-owner-'));
  dirs.push(root);
  await mkdir(path.join(root, 'etc/rancher/rke2'), { recursive: true });
  await writeFile(path.join(root, 'declared.json'), SETTING);
  // Harvester's image: rancherd's binary and unit.
  await mkdir(path.join(root, 'usr/bin'), { recursive: true });
  await mkdir(path.join(root, 'usr/lib/systemd/system'), { recursive: true });
  await writeFile(path.join(root, 'usr/bin/rancherd'), '');
  await chmod(path.join(root, 'usr/bin/rancherd'), 0o755);
  await writeFile(path.join(root, 'usr/lib/systemd/system/rancherd.service'), '[Service]\nType=oneshot\n');
  if (opts.connected) {
    await mkdir(path.join(root, 'etc/rancher/agent'), { recursive: true });
    await mkdir(path.join(root, 'var/lib/rancher/agent'), { recursive: true });
    await writeFile(path.join(root, 'etc/rancher/agent/config.yaml'), 'workDirectory: /var/lib/rancher/agent/work\nremoteEnabled: true\nconnectionInfoFile: /var/lib/rancher/agent/rancher2_connection_info.json\n');
    await writeFile(path.join(root, 'var/lib/rancher/agent/rancher2_connection_info.json'), '{"kubeConfig":"…"}');
  }
  return root;
}

function ctxFor(root: string, sink = new MemorySink()): GuardContext {
  return {
    root: (p) => path.join(root, p),
    log: new Logger(sink, new Redactor(), 'debug'),
    signal: new AbortController().signal,
    settings: { source: '/declared.json' },
    progress: () => undefined,
    now: Date.now,
    bootstrapper: 'rancherd',
  };
}

const FILE = 'etc/rancher/rke2/registries.yaml';

describe('registries.yaml: who owns it decides whether hvagent restores it', () => {
  it('before rancher-system-agent is connected: the install-time file is restored over a hand-written one', async () => {
    const root = await nodeRoot({ connected: false });
    await writeFile(path.join(root, FILE), HAND_WRITTEN);
    const r = await registriesGuard.reconcile(ctxFor(root));
    expect(r.status).toBe('ok');
    const text = await readFile(path.join(root, FILE), 'utf8');
    expect(text).toContain('https://mirror.local:5000');
    expect(text).not.toContain('hand.written.example');
  });

  it('the hand-written file is 167 B', () => expect(Buffer.byteLength(HAND_WRITTEN)).toBe(167));

  it('once it is connected: the cluster\'s file is left alone, drift is reported, and 167 B -> 0 B is explained', async () => {
    const root = await nodeRoot({ connected: true });
    await writeFile(path.join(root, FILE), HAND_WRITTEN);
    const sink = new MemorySink();
    const first = await registriesGuard.reconcile(ctxFor(root, sink));
    expect(first.status).toBe('ok');
    expect(await readFile(path.join(root, FILE), 'utf8')).toBe(HAND_WRITTEN);
    expect(first.status === 'ok' && first.detail).toContain('owner: cluster (rancher-system-agent takes plans from Rancher');
    expect(first.status === 'ok' && first.detail).toContain('differs from the install-time setting (edited)');
    expect(sink.lines.filter((l) => l.includes('"level":"warn"') && l.includes('owned by the cluster, left alone'))).toHaveLength(1);

    // rancher-system-agent applies the cluster's empty setting.
    await writeFile(path.join(root, FILE), '');
    const second = await registriesGuard.reconcile(ctxFor(root, sink));
    expect((await stat(path.join(root, FILE))).size).toBe(0);
    expect(second.status === 'ok' && second.detail).toContain(
      "/etc/rancher/rke2/registries.yaml is 0 B (was 167 B): written by rancher-system-agent from the cluster's empty containerd-registry setting",
    );
  });

  /** Runs the guard's watch until a progress line matches (bounded), then stops it. */
  async function watchUntil(root: string, seen: RegExp, edit: () => Promise<void>): Promise<string[]> {
    const progress: string[] = [];
    const ac = new AbortController();
    const ctx = { ...ctxFor(root), signal: ac.signal, settings: { source: '/declared.json', checkIntervalMs: 50 }, progress: (d: string) => progress.push(d) };
    const running = registriesGuard.watch!(ctx);
    try {
      await edit();
      const deadline = Date.now() + 10_000;
      while (!progress.some((p) => seen.test(p)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    } finally {
      ac.abort();
      await running;
    }
    return progress;
  }

  it("the watch follows the owner too: a connected node's file changed by the cluster is left alone, not restored", async () => {
    const root = await nodeRoot({ connected: true });
    await writeFile(path.join(root, FILE), '');
    await registriesGuard.reconcile(ctxFor(root));
    const progress = await watchUntil(root, /owner: cluster/, () => writeFile(path.join(root, FILE), HAND_WRITTEN));
    expect(progress.some((p) => p.startsWith('owner: cluster'))).toBe(true);
    expect(await readFile(path.join(root, FILE), 'utf8')).toBe(HAND_WRITTEN);
  });

  it('the watch of a node the agent owns restores a changed file', async () => {
    const root = await nodeRoot({ connected: false });
    await registriesGuard.reconcile(ctxFor(root));
    const progress = await watchUntil(root, /mirrors for docker\.io/, () => writeFile(path.join(root, FILE), HAND_WRITTEN));
    expect(progress.length).toBeGreaterThan(0);
    expect(await readFile(path.join(root, FILE), 'utf8')).toContain('https://mirror.local:5000');
  });

  it('hvagent status (--json) says who bootstraps and why, detected from the image under --root', async () => {
    const root = await nodeRoot({ connected: true });
    await writeFile(path.join(root, FILE), '');
    const cli = path.join(REPO, 'dist/agent/cli.js');
    await execFileP(process.execPath, [cli, 'once', '--guard', 'registries', '--root', root, '--settings', path.join(root, 'none.yaml')], { env: { PATH: process.env.PATH } }).catch((e: { stderr?: string }) => {
      throw new Error(`hvagent once failed: ${e.stderr}`);
    });
    await writeFile(path.join(root, 'none.yaml'), '');
    const json = JSON.parse((await execFileP(process.execPath, [cli, 'status', '--json', '--root', root])).stdout) as { bootstrap: { by: string; why: string }; guards: Array<{ name: string; detail?: string }> };
    expect(json.bootstrap).toEqual({ by: 'rancherd', why: 'the image carries rancherd (/usr/bin/rancherd, /usr/lib/systemd/system/rancherd.service): rancherd bootstraps RKE2, Rancher and Harvester' });
    expect(json.guards.find((g) => g.name === 'registries')?.detail).toContain('owner: cluster');
    const table = (await execFileP(process.execPath, [cli, 'status', '--root', root])).stdout;
    expect(table.split('\n')[1]).toBe('bootstrap: rancherd (hvagent prepares the node, then watches rke2, vip and promotion): the image carries rancherd (/usr/bin/rancherd, /usr/lib/systemd/system/rancherd.service): rancherd bootstraps RKE2, Rancher and Harvester');
  });
});
