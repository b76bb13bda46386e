/**
 * longhorn-disk against real loop devices, real blkid/dumpe2fs/mount. Other suites may label their
 * loop devices HARV_LH_DEFAULT at the same time, so the guard's blkid scan is limited to this
 * test's devices through the `devices` setting.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { run } from '../../../../lib/exec.js';
import { Logger, MemorySink } from '../../../../lib/logger.js';
import { Redactor } from '../../../../lib/redact.js';
import { runGuards } from '../../../../agent/runner.js';
import { defaultSettings } from '../../../../agent/settings.js';
import type { HarvesterConfig } from '../../../../config/types.js';

let dir: string;
const loops: string[] = [];
const MNT = () => path.join(dir, 'var/lib/harvester/defaultdisk');

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hvagent-lh-'));
});

afterEach(async () => {
  for (let i = 0; i < 5; i++) {
    const mounted = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').some((l) => l.split(' ')[4]?.startsWith(dir));
    if (!mounted) break;
    await run('umount', [MNT()], { allowFailure: true });
  }
  for (const l of loops.splice(0)) await run('losetup', ['-d', l], { allowFailure: true });
  await rm(dir, { recursive: true, force: true });
});

async function loopWith(mkfs: string[], sizeMb = 64): Promise<string> {
  const img = path.join(dir, `disk${loops.length}.img`);
  await run('truncate', ['-s', `${sizeMb}M`, img]);
  const dev = (await run('losetup', ['-f', '--show', img])).stdout.trim();
  loops.push(dev);
  await run(mkfs[0]!, [...mkfs.slice(1), dev]);
  return dev;
}

async function runGuard(deadline = '60s', config?: HarvesterConfig) {
  const s = defaultSettings();
  s.backoff = { initialMs: 100, maxMs: 500 };
  s.guards['longhorn-disk'] = { deadline, devices: [...loops] };
  const sink = new MemorySink();
  const r = await runGuards({ mode: 'once', rootDir: dir, settings: s, config, log: new Logger(sink, new Redactor()), signal: new AbortController().signal, only: ['longhorn-disk'] });
  return { ...r, g: r.status.guards[0]!, sink };
}

async function mountedAt(target: string): Promise<string | undefined> {
  const line = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').find((l) => l.split(' ')[4] === target);
  return line?.split(' - ')[1]?.split(' ')[1];
}

describe('longhorn-disk on loop devices', () => {
  it('mounts the one HARV_LH_DEFAULT ext4 device and reports capacity; a second pass finds it mounted', async () => {
    const dev = await loopWith(['mkfs.ext4', '-q', '-F', '-L', 'HARV_LH_DEFAULT']);
    await loopWith(['mkfs.ext4', '-q', '-F', '-L', 'COS_PERSISTENT']);
    const first = await runGuard();
    expect(first.g.lastError).toBeUndefined();
    expect(first.ok).toBe(true);
    expect(first.g.detail).toMatch(new RegExp(`^${dev} \\(HARV_LH_DEFAULT, ext4 clean\\) on /var/lib/harvester/defaultdisk, 0\\.\\d GiB, 0\\.\\d GiB free$`));
    expect(await mountedAt(MNT())).toBe(dev);
    expect(first.sink.lines.some((l) => l.includes('mounting the Longhorn default disk'))).toBe(true);

    const second = await runGuard();
    expect(second.ok).toBe(true);
    expect(second.sink.lines.some((l) => l.includes('mounting the Longhorn default disk'))).toBe(false);
    const count = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').filter((l) => l.split(' ')[4] === MNT()).length;
    expect(count).toBe(1);
  });

  it('fails, mounting nothing, when two devices carry the label', async () => {
    const a = await loopWith(['mkfs.ext4', '-q', '-F', '-L', 'HARV_LH_DEFAULT']);
    const b = await loopWith(['mkfs.ext4', '-q', '-F', '-L', 'HARV_LH_DEFAULT']);
    const r = await runGuard();
    expect(r.ok).toBe(false);
    expect(r.g.attempts).toBe(1);
    expect(r.g.lastError).toBe(`2 devices labelled HARV_LH_DEFAULT: ${[a, b].sort().join(', ')}; the Longhorn default disk must be exactly one`);
    expect(r.g.hint).toMatch(/tune2fs -L ''/);
    expect(await mountedAt(MNT())).toBeUndefined();
  });

  it('fails when the labelled filesystem is not ext4', async () => {
    const dev = await loopWith(['mkfs.ext2', '-q', '-F', '-L', 'HARV_LH_DEFAULT']);
    const r = await runGuard();
    expect(r.g.lastError).toBe(`${dev} (HARV_LH_DEFAULT) is ext2, not ext4`);
    expect(await mountedAt(MNT())).toBeUndefined();
  });

  it('fails when ext4 has recorded errors, and does not mount it', async () => {
    const dev = await loopWith(['mkfs.ext4', '-q', '-F', '-L', 'HARV_LH_DEFAULT']);
    await run('debugfs', ['-w', '-R', 'ssv state 3', dev]);
    const r = await runGuard();
    expect(r.g.lastError).toBe(`ext4 on ${dev} (HARV_LH_DEFAULT) is not healthy: state "clean with errors"`);
    expect(r.g.hint).toBe(`unmount it and run e2fsck -f ${dev}, then start hvagent again`);
    expect(await mountedAt(MNT())).toBeUndefined();
  });

  it('fails when something else is mounted at the default disk path', async () => {
    const dev = await loopWith(['mkfs.ext4', '-q', '-F', '-L', 'HARV_LH_DEFAULT']);
    await run('mkdir', ['-p', MNT()]);
    await run('mount', ['-t', 'tmpfs', 'hvagent-test-tmpfs', MNT()]);
    const r = await runGuard();
    expect(r.g.lastError).toBe(`/var/lib/harvester/defaultdisk has hvagent-test-tmpfs (tmpfs) mounted, not ${dev} (HARV_LH_DEFAULT)`);
  });

  it('gives up with a diagnosis when no device carries the label', async () => {
    await loopWith(['mkfs.ext4', '-q', '-F', '-L', 'SOMETHING_ELSE']);
    const r = await runGuard('2s');
    expect(r.g.lastError).toMatch(/^not reached within 2 s \(\d+ attempts?\): no device labelled HARV_LH_DEFAULT \(blkid -t LABEL=HARV_LH_DEFAULT found none\)$/);
  });

  it('in run mode mounts the disk again when it is unmounted behind the agent', async () => {
    const dev = await loopWith(['mkfs.ext4', '-q', '-F', '-L', 'HARV_LH_DEFAULT']);
    const s = defaultSettings();
    s.guards['longhorn-disk'] = { devices: [...loops], watchIntervalMs: 200 };
    const sink = new MemorySink();
    const stop = new AbortController();
    const running = runGuards({ mode: 'run', rootDir: dir, settings: s, log: new Logger(sink, new Redactor()), signal: stop.signal, only: ['longhorn-disk'] });
    try {
      const until = async (what: string, ok: () => Promise<boolean>) => {
        for (let i = 0; i < 600; i++) {
          if (await ok()) return;
          await new Promise((r) => setTimeout(r, 50));
        }
        throw new Error(`timed out: ${what}`);
      };
      await until('mounted', async () => (await mountedAt(MNT())) === dev);
      await run('umount', [MNT()]);
      await until('mounted again', async () => (await mountedAt(MNT())) === dev);
      expect(sink.lines.filter((l) => l.includes('mounting the Longhorn default disk')).length).toBe(2);
    } finally {
      stop.abort();
      await running;
    }
  });

  it('is skipped on a witness node', async () => {
    const r = await runGuard('2s', { install: { role: 'witness' } });
    expect(r.g).toMatchObject({ phase: 'skipped', detail: 'witness nodes have no Longhorn default disk' });
  });
});
