// The ISO's text parts and names: grub menus, the medium id path, timestamps, artifact names and
// checksum lists, the version choice, SOURCE_DATE_EPOCH. All pure.
import { describe, expect, it } from 'vitest';
import { harvesterArtifactNames } from '../../../lib/harvester-artifacts.js';
import { checksumList, chooseVersion } from '../../../iso-build/live/artifacts.js';
import { biosEarlyGrubScript, findMediumGrubScript, harvesterCfg, isoGrubCfg, isoTimestamp, mediumIdPath } from '../../../iso-build/live/iso-image.js';
import { parseSourceDateEpoch } from '../../../iso-build/reproducible.js';

describe('grub configuration of the ISO', () => {
  it('menu: one entry per console, each with the linux line right after the brace and extra_iso_cmdline appended', () => {
    const cfg = isoGrubCfg(10);
    expect(cfg).toContain('set timeout=10\n');
    expect(cfg).toContain('source ($root)/boot/grub2/harvester.cfg');
    const entries = cfg.split('\n').filter((l) => l.startsWith('menuentry '));
    expect(entries).toEqual([
      'menuentry "Harvester installer (hvinstall) ${harvester_version}" --class os --unrestricted --id hvinstall { linux ($root)/boot/kernel console=tty1 ${extra_iso_cmdline}',
      'menuentry "Harvester installer (hvinstall) ${harvester_version}, serial console ttyS0" --class os --unrestricted --id hvinstall-serial { linux ($root)/boot/kernel console=tty1 console=ttyS0,115200 ${extra_iso_cmdline}',
    ]);
    // No kernel parameter names the live root: the initramfs finds COS_LIVE itself.
    expect(cfg).not.toMatch(/root=|rd\.live/);
    expect(cfg.match(/\tinitrd \(\$root\)\/boot\/initrd\n\}/g)).toHaveLength(2);
  });

  it('menu timeout is checked', () => {
    expect(() => isoGrubCfg(-1)).toThrow(/0\.\.3600/);
    expect(() => isoGrubCfg(1.5)).toThrow(/0\.\.3600/);
  });

  it('harvester.cfg sets the two variables, and refuses text that would break out of the quotes', () => {
    expect(harvesterCfg('v1.8.0')).toBe('set harvester_version="v1.8.0"\nset extra_iso_cmdline=""\n');
    expect(harvesterCfg('v1.8.0', 'harvester.install.with_net_images=true')).toContain('set extra_iso_cmdline="harvester.install.with_net_images=true"');
    expect(() => harvesterCfg('v1"; reboot; "')).toThrow(/quotes/);
    expect(() => harvesterCfg('v1', 'a=$(x)')).toThrow(/\$/);
    expect(() => harvesterCfg('v1', 'a\nb')).toThrow(/newlines/);
  });

  it('both grubs look for this build\'s id file; the ESP stub then reads the menu, the BIOS core lets normal mode do it', () => {
    expect(mediumIdPath('0123456789abcdef')).toBe('/.disk/id/0123456789abcdef');
    expect(() => mediumIdPath('../../etc')).toThrow(/hex/);
    const esp = findMediumGrubScript('0123456789abcdef');
    expect(esp).toContain('search --no-floppy --file --set=root /.disk/id/0123456789abcdef');
    expect(esp).toContain('set prefix=($root)/boot/grub2');
    expect(esp.trim().split('\n').at(-1)).toBe('configfile ($root)/boot/grub2/grub.cfg');
    // The BIOS core runs its early config with grub's rescue parser: only simple commands, one per line.
    const bios = biosEarlyGrubScript('0123456789abcdef').trim().split('\n');
    expect(bios).toEqual(['search --no-floppy --file --set=root /.disk/id/0123456789abcdef', 'set prefix=($root)/boot/grub2']);
    for (const line of bios) expect(line.split(/\s+/)[0]).toMatch(/^(search|set)$/);
  });

  it('timestamps are UTC YYYYMMDDhhmmsscc', () => {
    expect(isoTimestamp(1_700_000_000)).toBe('2023111422132000');
    expect(isoTimestamp(0)).toBe('1970010100000000');
  });
});

describe('artifact names and checksum lists', () => {
  it('are Harvester\'s', () => {
    expect(harvesterArtifactNames('v1.8.0')).toEqual({
      kernel: 'harvester-v1.8.0-vmlinuz-amd64',
      initrd: 'harvester-v1.8.0-initrd-amd64',
      rootfs: 'harvester-v1.8.0-rootfs-amd64.squashfs',
      iso: 'harvester-v1.8.0-amd64.iso',
      sha512: 'harvester-v1.8.0-amd64.sha512',
      sha256: 'harvester-v1.8.0-amd64.sha256',
    });
  });

  it('checksum lists are sha256sum/sha512sum lines in name order', () => {
    const a = [
      { name: 'harvester-v1-vmlinuz-amd64', bytes: 1, sha256: 'b'.repeat(64), sha512: 'd'.repeat(128) },
      { name: 'harvester-v1-amd64.iso', bytes: 1, sha256: 'a'.repeat(64), sha512: 'c'.repeat(128) },
    ];
    expect(checksumList(a, 'sha256')).toBe(`${'a'.repeat(64)}  harvester-v1-amd64.iso\n${'b'.repeat(64)}  harvester-v1-vmlinuz-amd64\n`);
    expect(checksumList(a, 'sha512').split('\n')[0]).toBe(`${'c'.repeat(128)}  harvester-v1-amd64.iso`);
  });

  it('the version: --version, else harvester-release.yaml, else the package; never something that is not a file name', () => {
    expect(chooseVersion('v1.8.1', { harvester: 'v1.8.0' }, '0.1.0')).toEqual({ version: 'v1.8.1', from: '--version' });
    expect(chooseVersion(undefined, { harvester: 'v1.8.0', os: 'Harvester v1.8.0' }, '0.1.0')).toEqual({ version: 'v1.8.0', from: 'harvester-release.yaml' });
    expect(chooseVersion(undefined, undefined, '0.1.0')).toEqual({ version: 'v0.1.0', from: 'package.json' });
    expect(() => chooseVersion('../v1', undefined, '0.1.0')).toThrow(/cannot be part of a file name/);
    expect(() => chooseVersion(undefined, { harvester: 'v1 8' }, '0.1.0')).toThrow(/from harvester-release\.yaml/);
  });
});

describe('SOURCE_DATE_EPOCH', () => {
  it('is a decimal count of seconds or absent', () => {
    expect(parseSourceDateEpoch(undefined)).toBeUndefined();
    expect(parseSourceDateEpoch('')).toBeUndefined();
    expect(parseSourceDateEpoch('1700000000')).toBe(1_700_000_000);
    expect(() => parseSourceDateEpoch('2023-11-14')).toThrow(/not a decimal number of seconds/);
    expect(() => parseSourceDateEpoch('-5')).toThrow(/SOURCE_DATE_EPOCH=-5/);
  });
});
