/** The config volume's pure parts: volume:LABEL, what is looked for, which volume is taken, where the file is, the medium's files. */
import { afterAll, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { configFilesFor, isVolumeUrl, parseVolumeUrl, pickConfigFile, volumeKindOf } from '../../../config/config-volume.js';
import {
  configVolumesAmong,
  describeBlockDevices,
  DISCOVERY_VOLUME_WAIT_MS,
  EXPLICIT_VOLUME_WAIT_MS,
  mediumFiles,
  mediumIsoArgs,
  pickConfigVolume,
  volumeSearchOf,
  volumesFromBlkid,
} from '../../../installer/remote/config-volume-plan.js';
import { loadConfig } from '../../../config/index.js';
import configVolume from '../../../installer/commands/config-volume.js';

const tmp = mkdtempSync('/tmp/hv-config-volume-unit-');
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const VALID = 'scheme_version: 1\ntoken: abc\nos: {password: x, ntp_servers: [10.0.0.1]}\ninstall:\n  mode: create\n  device: /dev/sda\n  vip: 10.0.0.5\n  vip_mode: static\n  management_interface: {interfaces: [{name: ens3}], method: dhcp}\n';

describe('volume:LABEL on the command line', () => {
  it('parses a label and refuses what cannot be one, saying what a label is', () => {
    expect(parseVolumeUrl('volume:HARVESTER_CONFIG')).toEqual({ ok: true, label: 'HARVESTER_CONFIG' });
    expect(parseVolumeUrl('VOLUME:cidata')).toEqual({ ok: true, label: 'cidata' });
    expect(parseVolumeUrl('volume:config-2')).toEqual({ ok: true, label: 'config-2' });
    for (const bad of ['volume:', 'volume:a b', 'volume:a/b', `volume:${'X'.repeat(33)}`]) {
      const r = parseVolumeUrl(bad);
      expect(r.ok, bad).toBe(false);
      expect(r.ok ? '' : r.message).toContain('does not name a filesystem label');
    }
    expect(parseVolumeUrl('http://h/c.yaml').ok).toBe(false);
    expect(isVolumeUrl(' volume:X')).toBe(true);
    expect(isVolumeUrl('http://volume:80/')).toBe(false);
  });

  it('explicit volume:LABEL waits long for that label; no config_url discovers the three in precedence order; http is fetched', () => {
    const cmd = 'harvester.install.automatic=true';
    expect(volumeSearchOf('volume:MYCFG', cmd)).toEqual({ mode: 'explicit', labels: ['MYCFG'], timeoutMs: EXPLICIT_VOLUME_WAIT_MS });
    expect(volumeSearchOf(undefined, cmd)).toEqual({ mode: 'discover', labels: ['HARVESTER_CONFIG', 'cidata', 'config-2'], timeoutMs: DISCOVERY_VOLUME_WAIT_MS });
    expect(volumeSearchOf('  ', cmd).mode).toBe('discover');
    expect(volumeSearchOf('https://h/c.yaml', cmd)).toEqual({ mode: 'none' });
    expect(volumeSearchOf('volume:', cmd)).toMatchObject({ mode: 'invalid', message: expect.stringContaining('does not name a filesystem label') });
    expect(volumeSearchOf('volume:X', `${cmd} hvinstall.config_volume_timeout=300`)).toMatchObject({ timeoutMs: 300_000 });
    expect(volumeSearchOf(undefined, `${cmd} hvinstall.config_volume_timeout=soon`)).toMatchObject({ timeoutMs: DISCOVERY_VOLUME_WAIT_MS });
  });

  it('the validator accepts volume:LABEL as config_url and says why a malformed one is not', async () => {
    const ok = await loadConfig(undefined, { cmdline: `harvester.scheme_version=1 harvester.install.config_url=volume:HARVESTER_CONFIG` }).catch((e: Error) => e);
    // With only a command line naming a volume, validate cannot read it: a usage error that says what to do.
    expect(ok).toMatchObject({ exitCode: 2, message: expect.stringContaining('is a volume the installer reads at boot') });
    const file = path.join(tmp, 'c.yaml');
    writeFileSync(file, VALID);
    const merged = await loadConfig(file, { cmdline: 'harvester.install.config_url=volume:HARVESTER_CONFIG' });
    expect(merged.errors.filter((e) => e.path === 'install.config_url')).toEqual([]);
    const bad = await loadConfig(file, { cmdline: 'harvester.install.config_url=volume:a/b' });
    expect(bad.errors.find((e) => e.path === 'install.config_url')?.message).toContain('volume:a/b does not name a filesystem label');
    const ftp = await loadConfig(file, { cmdline: 'harvester.install.config_url=ftp://h/c.yaml' });
    expect(ftp.errors.find((e) => e.path === 'install.config_url')?.message).toContain('must be an http(s) URL or volume:LABEL');
  });
});

const vol = (device: string, label?: string, fsType = 'iso9660') => ({ device, label, fsType });

describe('which volume is the config volume', () => {
  const labels = ['HARVESTER_CONFIG', 'cidata', 'config-2'];

  it('takes the first label in precedence order, case-insensitively, among other filesystems', () => {
    const seen = [vol('/dev/sr0', 'COS_LIVE'), vol('/dev/sdb1', 'CIDATA', 'vfat'), vol('/dev/sr1', 'config-2'), vol('/dev/sda1', undefined, 'ext4')];
    expect(pickConfigVolume(seen, labels)).toEqual({ kind: 'found', volume: { device: '/dev/sdb1', label: 'CIDATA', fsType: 'vfat' } });
    expect(pickConfigVolume([...seen, vol('/dev/sr2', 'harvester_config')], labels)).toMatchObject({ kind: 'found', volume: { device: '/dev/sr2' } });
    expect(pickConfigVolume([vol('/dev/sr0', 'COS_LIVE')], labels)).toEqual({ kind: 'none' });
    expect(pickConfigVolume([], ['MYCFG'])).toEqual({ kind: 'none' });
  });

  it('refuses two volumes with the winning label, naming each', () => {
    const r = pickConfigVolume([vol('/dev/sr2', 'HARVESTER_CONFIG'), vol('/dev/sdc', 'HARVESTER_CONFIG', 'ext4'), vol('/dev/sr1', 'cidata')], labels);
    expect(r).toEqual({ kind: 'ambiguous', label: 'HARVESTER_CONFIG', devices: ['/dev/sdc (ext4 "HARVESTER_CONFIG")', '/dev/sr2 (iso9660 "HARVESTER_CONFIG")'] });
  });

  it('counts a partition carrying its disk\'s label once (a hybrid image), and a device seen twice once', () => {
    expect(pickConfigVolume([vol('/dev/sdb', 'cidata'), vol('/dev/sdb1', 'cidata')], labels)).toMatchObject({ kind: 'found', volume: { device: '/dev/sdb' } });
    expect(pickConfigVolume([vol('/dev/nvme1n1', 'cidata'), vol('/dev/nvme1n1p1', 'cidata')], labels)).toMatchObject({ kind: 'found', volume: { device: '/dev/nvme1n1' } });
    expect(pickConfigVolume([vol('/dev/loop3', 'cidata'), vol('/dev/loop3', 'cidata')], labels)).toMatchObject({ kind: 'found', volume: { device: '/dev/loop3' } });
    // Two disks whose names only share a prefix are two volumes.
    expect(pickConfigVolume([vol('/dev/sdb', 'cidata'), vol('/dev/sdb10', 'cidata'), vol('/dev/sdc1', 'cidata')], labels).kind).toBe('ambiguous');
  });

  it('lists every config volume for the console to offer: each label in precedence order, two with one label both, a hybrid image once', () => {
    const seen = [vol('/dev/sr0', 'COS_LIVE'), vol('/dev/sr1', 'config-2'), vol('/dev/sdb', 'CIDATA', 'vfat'), vol('/dev/sdb1', 'cidata'), vol('/dev/sdc', 'harvester_config', 'ext4'), vol('/dev/sr2', 'HARVESTER_CONFIG'), vol('/dev/sda1', undefined, 'ext4')];
    expect(configVolumesAmong(seen, labels)).toEqual([
      { device: '/dev/sdc', label: 'harvester_config', fsType: 'ext4' },
      { device: '/dev/sr2', label: 'HARVESTER_CONFIG', fsType: 'iso9660' },
      { device: '/dev/sdb', label: 'CIDATA', fsType: 'vfat' },
      { device: '/dev/sr1', label: 'config-2', fsType: 'iso9660' },
    ]);
    expect(configVolumesAmong([vol('/dev/sr0', 'COS_LIVE')], labels)).toEqual([]);
  });

  it('reads blkid -o export, and describes the block devices there are for the missing-volume message', () => {
    const out = 'DEVNAME=/dev/sr0\nBLOCK_SIZE=2048\nLABEL=COS_LIVE\nTYPE=iso9660\n\nDEVNAME=/dev/sda1\nTYPE=ext4\n\nDEVNAME=/dev/sr1\nLABEL=HARVESTER_CONFIG\nTYPE=iso9660\n';
    expect(volumesFromBlkid(out)).toEqual([vol('/dev/sr0', 'COS_LIVE'), vol('/dev/sda1', undefined, 'ext4'), vol('/dev/sr1', 'HARVESTER_CONFIG')]);
    const text = describeBlockDevices([
      { name: 'nvme0n1', sizeBytes: 260 * 2 ** 30 },
      { name: 'sr0', sizeBytes: 1536 * 2 ** 20, volume: vol('/dev/sr0', 'COS_LIVE') },
    ]);
    expect(text).toBe('nvme0n1 260.0 GiB, sr0 1.5 GiB iso9660 "COS_LIVE"');
    expect(describeBlockDevices([])).toBe('none');
  });
});

describe('where the config is on a volume, per format', () => {
  it('each known label has its one file; another label tries each format in order', () => {
    expect(configFilesFor('HARVESTER_CONFIG')).toEqual(['config.yaml']);
    expect(configFilesFor('CIDATA')).toEqual(['user-data']);
    expect(configFilesFor('config-2')).toEqual(['openstack/latest/user_data']);
    expect(configFilesFor('MYCFG')).toEqual(['config.yaml', 'user-data', 'openstack/latest/user_data']);
    expect(volumeKindOf('Config-2')?.format).toBe('configdrive');
    expect(pickConfigFile(configFilesFor('MYCFG'), new Set(['meta-data', 'user-data']))).toBe('user-data');
    expect(pickConfigFile(configFilesFor('MYCFG'), new Set(['user-data', 'config.yaml']))).toBe('config.yaml');
    // A NoCloud seed's config is user-data, never a stray config.yaml beside it.
    expect(pickConfigFile(configFilesFor('cidata'), new Set(['config.yaml']))).toBeUndefined();
  });

  it('the medium carries the config unchanged where its format reads it, and the metadata cloud-init needs', () => {
    const cfg = new TextEncoder().encode(VALID);
    expect(mediumFiles('HARVESTER_CONFIG', cfg, 'i-1')).toEqual([{ path: 'config.yaml', data: cfg }]);
    expect(mediumFiles('MYCFG', cfg, 'i-1')).toEqual([{ path: 'config.yaml', data: cfg }]);
    expect(mediumFiles('cidata', cfg, 'i-1')).toEqual([{ path: 'user-data', data: cfg }, { path: 'meta-data', data: 'instance-id: i-1\n' }]);
    expect(mediumFiles('config-2', cfg, 'i-1')).toEqual([
      { path: 'openstack/latest/user_data', data: cfg },
      { path: 'openstack/latest/meta_data.json', data: '{"uuid":"i-1"}\n' },
    ]);
    expect(mediumIsoArgs('cidata', '/s', '/o.iso')).toEqual(expect.arrayContaining(['-V', 'cidata', '-o', '/o.iso', '/s']));
  });
});

describe('hvinstall config-volume: refusals', () => {
  async function quietly<T>(f: () => Promise<T>): Promise<{ result: T; stderr: string }> {
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      const result = await f();
      return { result, stderr: err.mock.calls.map((c) => String(c[0])).join('') };
    } finally {
      err.mockRestore();
    }
  }

  it('refuses an invalid config with its findings at file:line:col and writes nothing', async () => {
    const file = path.join(tmp, 'bad.yaml');
    writeFileSync(file, VALID.replace('vip_mode: static', 'vip_mode: bogus'));
    const out = path.join(tmp, 'bad-out', 'config.iso');
    const { result, stderr } = await quietly(() => configVolume(['--config', file, '--out', out]));
    expect(result).toBe(1);
    expect(stderr).toContain(`${file}:8:13: error: install.vip_mode: unknown vip mode: bogus`);
    expect(stderr).toContain('no medium was written');
    expect(readdirSync(tmp)).not.toContain('bad-out');
  });

  it('refuses without xorriso, an existing --out without --force, a bad label, missing arguments (exit 2)', async () => {
    const file = path.join(tmp, 'ok.yaml');
    writeFileSync(file, VALID);
    const saved = process.env.PATH;
    process.env.PATH = path.join(tmp, 'empty-path');
    try {
      await expect(configVolume(['--config', file, '--out', path.join(tmp, 'x.iso')])).rejects.toMatchObject({ exitCode: 2, message: expect.stringContaining('xorriso is not installed') });
    } finally {
      process.env.PATH = saved;
    }
    expect(readdirSync(tmp)).not.toContain('x.iso');
    await expect(configVolume(['--config', file, '--out', file])).rejects.toMatchObject({ exitCode: 2, message: `${file} exists` });
    await expect(configVolume(['--config', file, '--out', path.join(tmp, 'y.iso'), '--label', 'a b'])).rejects.toMatchObject({ exitCode: 2, message: expect.stringContaining('--label: volume:a b does not name') });
    await expect(configVolume(['--out', path.join(tmp, 'y.iso')])).rejects.toMatchObject({ exitCode: 2, message: '--config is required' });
    await expect(configVolume(['--config', file])).rejects.toMatchObject({ exitCode: 2, message: '--out is required' });
  });
});
