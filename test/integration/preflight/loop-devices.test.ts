// Root: loop devices as disks are seen, sized and checked by preflight on the real machine (sysroot /,
// labels via blkid -p since there is no udev); a mounted one is refused.
import { mkdtemp, mkdir, rm, symlink, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { run } from '../../../lib/exec.js';
import { Host } from '../../../lib/host.js';
import { main } from '../../../installer/cli.js';
import {
  gatherMachineFacts,
  resolveDevice,
  runPreflightChecks,
  type MachineFacts,
  type PreflightReport,
} from '../../../installer/preflight/index.js';

const GiB = 2 ** 30;
let dir = '';
const loops: string[] = [];
let mounted = '';
let big = ''; // 260 GiB, GPT with a COS_OEM ext4 partition
let small4k = ''; // 60 GiB, 4096-byte logical sectors
let busy = ''; // 1 GiB ext4, mounted
let facts: MachineFacts;

async function attach(file: string, sizeBytes: number, extra: string[] = []): Promise<string> {
  await writeFile(file, '');
  await truncate(file, sizeBytes);
  // -P: the kernel rescans the partition table on attach, so partitions a previous user of the same
  // loop device left in /sys (a detach does not always drop them) are not taken for this file's.
  const dev = (await run('losetup', ['-f', '--show', '-P', ...extra, file], { timeoutMs: 30_000 })).stdout.trim();
  loops.push(dev);
  return dev;
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'hv-preflight-int-'));
  big = await attach(path.join(dir, 'big.raw'), 260 * GiB);
  await run('sgdisk', ['-n1:0:+64M', '-c1:COS_OEM', big], { timeoutMs: 60_000 });
  await run('partprobe', [big], { timeoutMs: 60_000, allowFailure: true });
  await run('mkfs.ext4', ['-q', '-F', '-L', 'COS_OEM', `${big}p1`], { timeoutMs: 120_000 });
  small4k = await attach(path.join(dir, 'small4k.raw'), 60 * GiB, ['--sector-size', '4096']);
  busy = await attach(path.join(dir, 'busy.raw'), 1 * GiB);
  await run('mkfs.ext4', ['-q', '-F', '-L', 'hv-busy', busy], { timeoutMs: 120_000 });
  await mkdir(path.join(dir, 'mnt'));
  await run('mount', [busy, path.join(dir, 'mnt')], { timeoutMs: 30_000 });
  mounted = path.join(dir, 'mnt');
  facts = await gatherMachineFacts(new Host('/'));
});

afterAll(async () => {
  if (mounted) await run('umount', [mounted], { allowFailure: true, timeoutMs: 30_000 });
  for (const l of loops) await run('losetup', ['-d', l], { allowFailure: true, timeoutMs: 30_000 });
  if (dir) await rm(dir, { recursive: true, force: true });
});

const disk = (dev: string) => facts.disks.find((d) => d.path === dev);
const check = (r: PreflightReport, id: string) => r.checks.find((c) => c.id === id);

describe('preflight on loop devices (root)', () => {
  it('sees each loop device with its size, sector size, partitions and labels (blkid)', async () => {
    expect(facts.signatureSource).toBe('blkid');
    expect(disk(big)).toMatchObject({ transport: 'loop', sizeBytes: 260 * GiB, logicalSectorSize: 512, removable: false });
    expect(disk(big)!.partitions).toEqual([
      expect.objectContaining({ path: `${big}p1`, number: 1, sizeBytes: 64 * 2 ** 20, label: 'COS_OEM', partLabel: 'COS_OEM', fsType: 'ext4', mountpoints: [] }),
    ]);
    expect(disk(small4k)).toMatchObject({ sizeBytes: 60 * GiB, logicalSectorSize: 4096, partitions: [] });
    expect(disk(busy)).toMatchObject({ sizeBytes: GiB, wholeDiskFs: { fsType: 'ext4', label: 'hv-busy' } });
    expect(disk(busy)!.inUse).toMatchObject({ mountpoints: [mounted], swap: false, bootMedium: false });
    // Loop devices are never suggested as the install disk.
    expect(runPreflightChecks(facts, { profile: 'testing' }).suggestedDevice ?? '').not.toMatch(/^\/dev\/loop/);
  });

  it('resolves a by-id style link (made by hand: no udev here) to the loop device', async () => {
    const byId = path.join(dir, 'by-id');
    await mkdir(byId);
    await symlink(big, path.join(byId, 'hv-test-disk'));
    expect((await resolveDevice(facts, path.join(byId, 'hv-test-disk'), new Host('/')))?.path).toBe(big);
  });

  it('checks the loop devices as install and data disk: sized, 4Kn reported', () => {
    const r = runPreflightChecks(facts, { profile: 'production', config: { install: { device: big, dataDisk: small4k } } });
    for (const id of ['device.exists', 'device.boot-medium', 'device.not-mounted', 'device.holders', 'device.size', 'data-disk.exists', 'data-disk.distinct', 'data-disk.size']) {
      expect(check(r, id)?.result, id).toBe('pass');
    }
    expect(check(r, 'device.size')).toMatchObject({ measured: '260GiB', threshold: '>= 180GiB (separate data disk)' });
    expect(check(r, 'data-disk.sector-size')?.measured).toBe('4096 logical / 4096 physical (4Kn)');
    const single = runPreflightChecks(facts, { profile: 'testing', config: { install: { device: small4k } } });
    expect(check(single, 'device.size')).toMatchObject({ result: 'fail', measured: '60GiB', message: 'installation disk size is too small. Minimum 250Gi is required' });
  });

  it('refuses the mounted loop device', () => {
    const r = runPreflightChecks(facts, { profile: 'testing', config: { install: { device: busy } } });
    expect(check(r, 'device.not-mounted')).toMatchObject({
      result: 'fail',
      measured: `mounted at ${mounted}`,
      message: `${busy} is in use: mounted at ${mounted}.`,
      skippable: false,
    });
  });

  it('hvinstall preflight on this machine reports, never crashes: CPU virtualisation is judged from the real flags', async () => {
    const cfg = path.join(dir, 'config.yaml');
    await writeFile(cfg, `scheme_version: 1\ninstall:\n  mode: install\n  device: ${big}\n  data_disk: ${small4k}\n`);
    let out = '';
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => {
      out += String(c);
      return true;
    });
    const errSpy = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    let code: number;
    try {
      code = await main(['preflight', '--config', cfg, '--json']);
    } finally {
      spy.mockRestore();
      errSpy.mockRestore();
    }
    const j = JSON.parse(out);
    expect(code).toBe(j.summary.fail > 0 ? 1 : 0);
    const flags = j.cpu.vmx || j.cpu.svm;
    expect(j.checks.find((c: { id: string }) => c.id === 'virt.cpu-flags').result).toBe(flags ? 'pass' : 'fail');
    expect(j.checks.find((c: { id: string }) => c.id === 'device.size').result).toBe('pass');
    expect(j.installDevice).toBe(big);
  });
});
