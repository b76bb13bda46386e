/**
 * The config volume for real, as root: ISOs written by `hvinstall config-volume` and ext4 filesystems
 * on loop devices, found by label with blkid, mounted read-only (ext4) or read with xorriso (this
 * kernel has no iso9660), merged under the command line as an automatic install does. Every loop
 * device is detached and every mount undone even when a test fails; the search is limited to the
 * test's own devices so nothing else on the machine can be picked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { prepareAutomaticInstall } from '../../../installer/remote/automatic.js';
import { readVolumeConfigText } from '../../../installer/remote/config-volume.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { Cleanup, HVINSTALL, sh, tempDir } from '../install/helpers.js';

const cleanup = new Cleanup();
let dir: string;
const quiet = () => new Logger(new MemorySink());
const AUTO = 'BOOT_IMAGE=vmlinuz console=ttyS0 harvester.install.automatic=true';

const CONFIG = `scheme_version: 1
token: a-token
os:
  hostname: from-volume
  password: a-password
  ntp_servers: [10.0.0.1]
install:
  mode: create
  iso_url: local
  device: /dev/vda
  vip: 10.0.0.5
  vip_mode: static
  management_interface: {interfaces: [{name: ens3}], method: dhcp}
`;

async function attach(file: string): Promise<string> {
  const dev = (await sh('losetup', ['--find', '--show', '--read-only', file])).stdout.trim();
  cleanup.add(async () => {
    for (const line of (await readFile('/proc/self/mounts', 'utf8')).split('\n')) {
      const [src, target] = line.split(' ');
      if (src === dev && target) await sh('umount', ['-l', target], { allowFailure: true });
    }
    await sh('losetup', ['--detach', dev], { allowFailure: true });
  });
  return dev;
}

/** An ISO made by the command under test, on a loop device. */
async function isoVolume(name: string, label: string, config = CONFIG): Promise<string> {
  const cfg = path.join(dir, `${name}.yaml`);
  await writeFile(cfg, config);
  const iso = path.join(dir, `${name}.iso`);
  await sh(HVINSTALL, ['config-volume', '--config', cfg, '--out', iso, '--label', label]);
  return attach(iso);
}

/** An ext4 filesystem holding `files`, labelled, on a loop device (mke2fs -d: no mount needed to fill it). */
async function ext4Volume(name: string, label: string, files: Record<string, string>): Promise<string> {
  const tree = path.join(dir, `${name}-tree`);
  for (const [p, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(tree, p)), { recursive: true });
    await writeFile(path.join(tree, p), text);
  }
  const img = path.join(dir, `${name}.img`);
  await sh('mkfs.ext4', ['-q', '-F', '-L', label, '-d', tree, img, '8M']);
  return attach(img);
}

async function mountsOf(dev: string): Promise<string[]> {
  return (await readFile('/proc/self/mounts', 'utf8')).split('\n').filter((l) => l.startsWith(`${dev} `));
}

async function scratchLeft(): Promise<string[]> {
  return (await readdir(os.tmpdir())).filter((n) => n.startsWith('hvinstall-config-volume-'));
}

beforeAll(async () => {
  dir = await tempDir(cleanup, 'hv-config-volume-it-');
});
afterAll(() => cleanup.run());

describe('automatic install from a config volume', () => {
  it('volume:HARVESTER_CONFIG: the ISO the command wrote is found, read, merged under the command line, and left unmounted', async () => {
    const before = await scratchLeft();
    const dev = await isoVolume('hc', 'HARVESTER_CONFIG');
    const auto = await prepareAutomaticInstall(`${AUTO} harvester.install.config_url=volume:HARVESTER_CONFIG harvester.os.hostname=from-cmdline`, {
      log: quiet(),
      volume: { among: [dev], timeoutMs: 5_000 },
    });
    expect(auto.source).toBe(`HARVESTER_CONFIG(${dev}):config.yaml`);
    expect(auto.config.os?.hostname).toBe('from-cmdline');
    expect(auto.config.install?.vip).toBe('10.0.0.5');
    expect(auto.config.token).toBe('a-token');
    expect(await mountsOf(dev)).toEqual([]);
    expect(await scratchLeft()).toEqual(before);
    // The medium is the file the operator gave, byte for byte.
    const x = await sh('xorriso', ['-osirrox', 'on', '-indev', path.join(dir, 'hc.iso'), '-extract', '/config.yaml', path.join(dir, 'hc-out.yaml')]);
    expect(x.code).toBe(0);
    expect(await readFile(path.join(dir, 'hc-out.yaml'), 'utf8')).toBe(CONFIG);
  });

  it('an invalid config on a NoCloud seed fails with its line numbers, and the mounted volume is unmounted all the same', async () => {
    const dev = await ext4Volume('bad', 'cidata', { 'user-data': `#cloud-config\n${CONFIG.replace('vip_mode: static', 'vip_mode: bogus')}`, 'meta-data': 'instance-id: x\n' });
    const err = await prepareAutomaticInstall(`${AUTO} harvester.install.config_url=volume:cidata`, { log: quiet(), volume: { among: [dev], timeoutMs: 5_000 } }).catch((e: Error) => e);
    expect(err).toMatchObject({ exitCode: 1 });
    expect((err as Error).message).toContain(`cidata(${dev}):user-data:13: install.vip_mode: unknown vip mode: bogus`);
    expect(await mountsOf(dev)).toEqual([]);
  });

  it('without config_url: discovery prefers cidata over config-2, reads a config drive alone, and falls back to the command line', async () => {
    const seed = await ext4Volume('seed', 'CIDATA', { 'user-data': CONFIG.replace('from-volume', 'from-seed'), 'meta-data': 'instance-id: x\n' });
    const drive = await isoVolume('drive', 'config-2', CONFIG.replace('from-volume', 'from-drive'));
    const both = await prepareAutomaticInstall(AUTO, { log: quiet(), volume: { among: [drive, seed], timeoutMs: 5_000 } });
    expect(both.source).toBe(`CIDATA(${seed}):user-data`);
    expect(both.config.os?.hostname).toBe('from-seed');
    const one = await prepareAutomaticInstall(AUTO, { log: quiet(), volume: { among: [drive], timeoutMs: 5_000 } });
    expect(one.source).toBe(`config-2(${drive}):openstack/latest/user_data`);
    expect(one.config.os?.hostname).toBe('from-drive');
    // Nothing labelled: the command line alone is the config (here an incomplete one, refused as before).
    const none = await prepareAutomaticInstall(`${AUTO} harvester.scheme_version=1`, { log: quiet(), volume: { among: [], timeoutMs: 500, intervalMs: 100 } }).catch((e: Error) => e);
    expect((none as Error).message).toContain('automatic install: invalid configuration (<cmdline>)');
  });

  it('refuses two volumes with the same label, naming both', async () => {
    const a = await ext4Volume('dup-a', 'HARVESTER_CONFIG', { 'config.yaml': CONFIG });
    const b = await ext4Volume('dup-b', 'HARVESTER_CONFIG', { 'config.yaml': CONFIG });
    const err = await prepareAutomaticInstall(AUTO, { log: quiet(), volume: { among: [a, b], timeoutMs: 5_000 } }).catch((e: Error) => e);
    expect((err as Error).message).toMatch(/more than one filesystem is labelled HARVESTER_CONFIG/);
    expect((err as Error).message).toContain(`${a} (ext4 "HARVESTER_CONFIG")`);
    expect((err as Error).message).toContain(`${b} (ext4 "HARVESTER_CONFIG")`);
  });

  it('a named volume that never appears fails after the deadline, naming the label and the block devices there are', async () => {
    const other = await ext4Volume('other', 'SOMETHING_ELSE', { 'config.yaml': CONFIG });
    const err = await prepareAutomaticInstall(`${AUTO} harvester.install.config_url=volume:MY_CONFIG`, { log: quiet(), volume: { among: [other], timeoutMs: 1_000, intervalMs: 200 } }).catch((e: Error) => e);
    expect((err as Error).message).toMatch(/no filesystem labelled MY_CONFIG appeared within 1 s; block devices: loop\d+ 8 MiB ext4 "SOMETHING_ELSE"/);
    expect(err).toMatchObject({ exitCode: 3 });
  });

  it("the console's volume:LABEL: the config text off the volume, named by label, device and file, and the volume unmounted", async () => {
    const dev = await ext4Volume('console', 'MY_CFG', { 'user-data': CONFIG });
    const read = await readVolumeConfigText('MY_CFG', { among: [dev], timeoutMs: 5_000 });
    expect(read).toEqual({ name: `MY_CFG(${dev}):user-data`, text: CONFIG, error: undefined });
    expect(await mountsOf(dev)).toEqual([]);
  });

  it('a volume without the config file says what it holds', async () => {
    const dev = await ext4Volume('empty', 'HARVESTER_CONFIG', { 'readme.txt': 'no config here\n' });
    const err = await prepareAutomaticInstall(AUTO, { log: quiet(), volume: { among: [dev], timeoutMs: 5_000 } }).catch((e: Error) => e);
    expect((err as Error).message).toContain(`the config volume HARVESTER_CONFIG on ${dev} has no config.yaml (it holds: lost+found, readme.txt)`);
    expect(await mountsOf(dev)).toEqual([]);
  });
});
