/**
 * hvinstall install on real loop devices (root): full installs verified from the outside (EFI 512,
 * EFI 4Kn, BIOS with a data disk), and the refusals and failures that must leave disks as they were
 * or invalidated.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { readFile, writeFile, chmod, mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { InstallPlan } from '../../../installer/disk/types.js';
import {
  Cleanup,
  buildSmallBundle,
  buildSmallOsTree,
  configYaml,
  diskSnapshot,
  diskWithFilesystem,
  events,
  hvinstall,
  installArgs,
  loopDisk,
  partitionNode,
  powerStubs,
  probe,
  seedDisk,
  sh,
  tempDir,
  testCleanup,
  TEST_SYSTEM_SIZE_MIB,
  withMount,
  type ConfigOptions,
  webhookReceiver,
  webhooksYaml,
} from './helpers.js';
import { verifyInstalledDisk } from './verify.js';

let isRoot = false;
beforeAll(() => {
  isRoot = process.getuid?.() === 0;
  if (!isRoot) throw new Error('integration tests need root');
});

async function setup(cleanup: Cleanup, opts: Omit<ConfigOptions, 'device'> & { sectorSize?: number; withDataDisk?: boolean } = {}) {
  const dir = await tempDir(cleanup);
  const disk = await loopDisk(cleanup, dir, 'target', 260, opts.sectorSize ?? 512);
  const dataDisk = opts.withDataDisk ? await loopDisk(cleanup, dir, 'data', 60, opts.sectorSize ?? 512) : undefined;
  const source = await buildSmallOsTree(dir);
  const configFile = path.join(dir, 'config.yaml');
  await writeFile(configFile, configYaml({ ...opts, device: disk, ...(dataDisk ? { dataDisk } : {}) }));
  const stateDir = path.join(dir, 'state');
  return { dir, disk, dataDisk, source, configFile, stateDir };
}

async function planOf(configFile: string): Promise<InstallPlan> {
  const r = await hvinstall(['plan', '--config', configFile, '--json', '--system-size', String(TEST_SYSTEM_SIZE_MIB)]);
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { plan: InstallPlan }).plan;
}

// Each test on disks, directories and a server of its own, most of its time waiting on tools and
// the disk: the tests run side by side (a Cleanup each, run when the test ends).
describe.concurrent('hvinstall install', () => {
  it('EFI, 512-byte sectors: a full install with an image bundle, verified from the outside; webhooks STARTED and SUCCEEDED', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const hooks = await webhookReceiver(cleanup);
    const t = await setup(cleanup, { forceEfi: true, extraInstall: webhooksYaml(hooks.url) });
    const bundle = await buildSmallBundle(t.dir);
    const plan = await planOf(t.configFile);
    expect(plan.firmware).toBe('efi');
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir, ['--bundle', bundle]));
    expect(r.code, r.stderr).toBe(0);
    const ev = events(r.stdout);
    expect(ev.filter((e) => e.type === 'step' && e.phase === 'done').map((e) => e.step)).toEqual(['guard', 'clear', 'partition', 'format', 'verify', 'deploy', 'bootloader', 'oem', 'persistent', 'agent', 'chroot', 'finish']);
    expect(ev.some((e) => e.type === 'bytes' && typeof e.rateBytesPerSec === 'number')).toBe(true);
    expect(ev.every((e) => typeof e.elapsedMs === 'number' && typeof e.ts === 'string')).toBe(true);
    expect(r.stdout + r.stderr).not.toContain('integration-secret-token');
    await verifyInstalledDisk(plan, t.source, t.dir, { bundle });
    const journal = JSON.parse(await readFile(path.join(t.stateDir, `${path.basename(t.disk)}.journal.json`), 'utf8'));
    expect(journal.status).toBe('succeeded');
    const bundleFiles = ['metadata.yaml', 'harvester/images/test-images.tar.zst', 'harvester/images-lists/test-images.txt', 'rancherd/images/bootstrap.txt'];
    let bundleBytes = 0;
    for (const f of bundleFiles) bundleBytes += (await readFile(path.join(bundle, f))).length;
    expect(journal.steps.find((s: { name: string }) => s.name === 'persistent').detail.bundle).toMatchObject({ source: bundle, origin: '--bundle', files: 4, bytes: bundleBytes, copied: 4, kept: 0 });
    expect(ev.filter((e) => e.type === 'bytes' && e.step === 'persistent').at(-1)).toMatchObject({ done: bundleBytes, total: bundleBytes });
    expect(hooks.received.map((h) => h.path)).toEqual(['/started', '/succeeded']);
  });

  it('EFI on a 4Kn loop device, --bundle none', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, { forceEfi: true, sectorSize: 4096 });
    const plan = await planOf(t.configFile);
    expect(plan.logicalSectorSize).toBe(4096);
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir, ['--bundle', 'none']));
    expect(r.code, r.stderr).toBe(0);
    expect(events(r.stdout)).toContainEqual(expect.objectContaining({ type: 'message', step: 'persistent', message: 'no image bundle copied: --bundle none' }));
    await verifyInstalledDisk(plan, t.source, t.dir, { bundle: 'none' });
  });

  it('BIOS with a separate data disk formatted whole, and an old install on a disk in wipe_disks_list', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, { withDataDisk: true, extraInstall: '  wipe_disks_list: [__OLD__]' });
    const old = await loopDisk(cleanup, t.dir, 'old', 2);
    await writeFile(t.configFile, (await readFile(t.configFile, 'utf8')).replace('__OLD__', old));
    await diskWithFilesystem(old, 'COS_OEM');
    // the data disk carries a stale COS_OEM from an old install: it must not survive
    await diskWithFilesystem(t.dataDisk!, 'COS_OEM');
    const plan = await planOf(t.configFile);
    expect(plan.firmware).toBe('bios');
    expect(plan.dataDisk?.path).toBe(t.dataDisk);
    expect(plan.partitions.map((p) => p.label ?? p.name)).toEqual(['bios', 'COS_OEM', 'COS_RECOVERY', 'COS_STATE', 'COS_PERSISTENT']);
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir));
    expect(r.code, r.stderr).toBe(0);
    await verifyInstalledDisk(plan, t.source, t.dir);
    expect((await sh('sfdisk', ['--dump', t.dataDisk!], { allowFailure: true })).code).not.toBe(0); // no table left
    expect(plan.wipeDisks).toEqual([old]);
    expect((await sh('sfdisk', ['--dump', old], { allowFailure: true })).code).not.toBe(0);
    expect((await probe(partitionNode(old, 1))).LABEL).toBeUndefined();
  });

  it('msdos (force_mbr) on legacy BIOS', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    // (No device-mapper in this machine's kernel: holders are covered by unit tests on a fixture sysroot.)
    const t = await setup(cleanup, { forceMbr: true });
    const plan = await planOf(t.configFile);
    expect(plan.table).toBe('msdos');
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir));
    expect(r.code, r.stderr).toBe(0);
    await verifyInstalledDisk(plan, t.source, t.dir);
    const table = JSON.parse((await sh('sfdisk', ['--json', t.disk])).stdout).partitiontable;
    expect(table.partitions.map((p: { bootable?: boolean }) => p.bootable === true)).toEqual([false, false, true, false]);
  });

  it('refuses a mounted disk and changes nothing', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup);
    await diskWithFilesystem(t.disk, 'SOMEDATA');
    const before = await diskSnapshot(t.disk, t.dir);
    const mnt = path.join(t.dir, 'busy');
    await mkdir(mnt);
    await sh('mount', [partitionNode(t.disk, 1), mnt]);
    cleanup.add(() => sh('umount', [mnt], { allowFailure: true }));
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${t.disk} is mounted (${mnt}): unmount it first`);
    expect(r.stderr).toContain('nothing was changed');
    await sh('umount', [mnt]);
    expect(await diskSnapshot(t.disk, t.dir)).toEqual(before);
  });

  it('refuses a disk another process holds locked (flock), after waiting briefly, and changes nothing', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup);
    const { spawn } = await import('node:child_process');
    // its own process group, so cleanup ends flock and the sleep that inherits the device fd
    const holder = spawn('flock', ['--exclusive', t.disk, 'sleep', '120'], { stdio: 'ignore', detached: true });
    cleanup.add(async () => process.kill(-holder.pid!, 'SIGKILL'));
    await new Promise((r) => setTimeout(r, 500));
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${t.disk} is locked by another process`);
    expect((await sh('blkid', ['-p', t.disk], { allowFailure: true })).code).toBe(2); // still blank
  });

  it('without --yes, shows what would be destroyed and refuses', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup);
    const args = installArgs(t.configFile, t.source, t.stateDir).filter((a) => a !== '--yes');
    const r = await hvinstall(args);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('refusing to install without --yes');
    expect(r.stderr).toContain(`${t.disk} (260 GiB)`);
    expect((await sh('blkid', ['-p', t.disk], { allowFailure: true })).code).toBe(2); // still blank
  });

  it('install.automatic: true in a --config file is no consent: without --yes it refuses (exit 2) and not one byte of the disk changes', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, { extraInstall: '  automatic: true\n  iso_url: local' });
    const fingerprint = await seedDisk(path.join(t.dir, 'target.raw'));
    const before = await fingerprint();
    const stubs = await powerStubs(t.dir);
    const args = installArgs(t.configFile, t.source, t.stateDir).filter((a) => a !== '--yes');
    const r = await hvinstall(args, { PATH: `${stubs.bin}:${process.env.PATH}` });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain('refusing to install without --yes');
    expect(await fingerprint()).toBe(before);
    expect(await stubs.calls()).toBe('');
  });

  it('install.automatic: true in a --config file installs with --yes but never reboots or powers off (no --no-reboot given)', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, { forceEfi: true, extraInstall: '  automatic: true\n  iso_url: local\n  power_off: true' });
    const stubs = await powerStubs(t.dir);
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir, ['--bundle', 'none']), { PATH: `${stubs.bin}:${process.env.PATH}` });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toMatch(/reboot|poweroff|power off/);
    expect(await stubs.calls()).toBe('');
  });

  it('resumed with another bundle choice, the persistent step is redone: killed after it with --bundle DIR, re-run with --bundle none leaves no bundle', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, { forceEfi: true });
    const bundle = await buildSmallBundle(t.dir);
    const killed = await hvinstall(installArgs(t.configFile, t.source, t.stateDir, ['--bundle', bundle]), { HVINSTALL_TEST_SIGKILL_AT: 'after:persistent' });
    expect(killed.signal, killed.stderr).toBe('SIGKILL');
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir, ['--bundle', 'none']));
    expect(r.code, r.stderr).toBe(0);
    const ev = events(r.stdout);
    expect(ev.filter((e) => e.type === 'step' && e.phase === 'skipped').map((e) => e.step)).toEqual(['clear', 'partition', 'format', 'verify', 'deploy', 'bootloader', 'oem']);
    expect(ev).toContainEqual(expect.objectContaining({ type: 'message', step: 'persistent', message: `done in an earlier run but the image bundle was ${bundle}, now none: redoing from here` }));
    await verifyInstalledDisk(await planOf(t.configFile), t.source, t.dir, { bundle: 'none' });
  });

  it('refuses a --bundle that does not exist (usage error) and touches no disk', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup);
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir, ['--bundle', path.join(t.dir, 'does/not/exist')]));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--bundle ${path.join(t.dir, 'does/not/exist')} does not exist`);
    expect((await sh('blkid', ['-p', t.disk], { allowFailure: true })).code).toBe(2); // still blank
  });

  it('refuses a --device the config does not name', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup);
    const other = await loopDisk(cleanup, t.dir, 'other', 260);
    const r = await hvinstall([...installArgs(t.configFile, t.source, t.stateDir), '--device', other]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('is not the disk named in the config');
    expect((await sh('blkid', ['-p', other], { allowFailure: true })).code).toBe(2);
  });

  it('a failing mkfs leaves the target invalidated and the journal readable; webhook FAILED', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const hooks = await webhookReceiver(cleanup);
    const t = await setup(cleanup, { forceEfi: true, extraInstall: webhooksYaml(hooks.url) });
    // A test double of mkfs.ext4, first on PATH: fails for COS_STATE, runs the real one otherwise.
    const fakeBin = path.join(t.dir, 'fake-bin');
    await mkdir(fakeBin);
    const realMkfs = (await sh('sh', ['-c', 'command -v mkfs.ext4'])).stdout.trim();
    await writeFile(
      path.join(fakeBin, 'mkfs.ext4'),
      `#!/bin/sh\ncase " $* " in *" COS_STATE "*) echo "injected mkfs failure for test" >&2; exit 1;; esac\nexec ${realMkfs} "$@"\n`,
    );
    await chmod(path.join(fakeBin, 'mkfs.ext4'), 0o755);
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir), { PATH: `${fakeBin}:${process.env.PATH}` });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('install failed in step format');
    expect(r.stderr).toContain('mkfs.ext4');
    expect(r.stderr).toContain('injected mkfs failure for test');
    expect(r.stderr).toContain('invalidated');
    const journalFile = path.join(t.stateDir, `${path.basename(t.disk)}.journal.json`);
    expect(r.stderr).toContain(journalFile);
    expect(r.stderr).toContain('steps: guard done, clear done, partition done, format FAILED, verify pending');
    const journal = JSON.parse(await readFile(journalFile, 'utf8'));
    expect(journal.status).toBe('invalidated');
    expect(journal.steps.find((s: { name: string }) => s.name === 'format')).toMatchObject({ status: 'failed' });
    expect(journal.error.message).toContain('injected mkfs failure for test');
    const ev = events(r.stdout);
    expect(ev.some((e) => e.type === 'step' && e.step === 'format' && e.phase === 'failed')).toBe(true);
    expect(hooks.received.map((h) => h.path)).toEqual(['/started', '/failed']);
    expect(hooks.received[1]!.body).toBe('{"event": "FAILED"}');
    // nothing bootable: no ESP, no COS_STATE, no COS_RECOVERY filesystem
    for (const n of [1, 3, 4]) expect((await probe(partitionNode(t.disk, n))).TYPE, `partition ${n}`).toBeUndefined();
    // the record is also on COS_OEM, which was made before the failure
    await withMount(partitionNode(t.disk, 2), t.dir, async (m) => {
      const onDisk = JSON.parse(await readFile(path.join(m, 'install/journal.json'), 'utf8'));
      expect(onDisk.status).toBe('invalidated');
      expect(await readFile(path.join(m, 'install/install.log'), 'utf8')).not.toContain('integration-secret-token');
    });
  });

  it('--preserve-on-error leaves a failed install as it is (not invalidated)', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, { forceEfi: true });
    const fakeBin = path.join(t.dir, 'fake-bin');
    await mkdir(fakeBin);
    // A test double of mkfs.ext4 that always fails.
    await writeFile(path.join(fakeBin, 'mkfs.ext4'), '#!/bin/sh\necho "injected mkfs failure for test" >&2\nexit 1\n');
    await chmod(path.join(fakeBin, 'mkfs.ext4'), 0o755);
    const r = await hvinstall([...installArgs(t.configFile, t.source, t.stateDir), '--preserve-on-error'], { PATH: `${fakeBin}:${process.env.PATH}` });
    expect(r.code).toBe(3);
    expect(r.stderr).not.toContain('invalidated so it cannot boot');
    const journal = JSON.parse(await readFile(path.join(t.stateDir, `${path.basename(t.disk)}.journal.json`), 'utf8'));
    expect(journal.status).toBe('failed');
    expect((await probe(partitionNode(t.disk, 1))).TYPE).toBe('vfat'); // the ESP made before the failure is still there
  });
});
