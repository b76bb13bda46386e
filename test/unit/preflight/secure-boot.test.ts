// The Secure Boot finding: reported only unless Secure Boot is enforced and the image to install is
// known; then a warning that names the image, what it carries and what to do.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../../lib/exec.js';
import { findShim, imageShim } from '../../../installer/bootloader/image-shim.js';
import { runPreflightChecks, type MachineFacts } from '../../../installer/preflight/index.js';
import { gatherFirmware } from '../../../installer/preflight/machine.js';
import { Host } from '../../../lib/host.js';
import { check, fixtureFacts } from './helpers.js';

async function facts(firmware: MachineFacts['firmware']): Promise<MachineFacts> {
  return { ...(await fixtureFacts('prod-nvme')), firmware };
}

describe('firmware.secure-boot', () => {
  it('is not reported on BIOS', async () => {
    const r = runPreflightChecks(await facts({ uefi: false }), { profile: 'testing', image: { source: '/img' } });
    expect(r.checks.find((c) => c.id === 'firmware.secure-boot')).toBeUndefined();
  });

  it('passes when Secure Boot is off, whatever the image', async () => {
    const r = runPreflightChecks(await facts({ uefi: true, secureBoot: false }), { profile: 'testing', image: { source: '/img' } });
    expect(check(r, 'firmware.secure-boot')).toMatchObject({ result: 'pass', measured: 'disabled' });
  });

  it('passes, pointing at --source, when Secure Boot is on and the image is not known', async () => {
    const r = runPreflightChecks(await facts({ uefi: true, secureBoot: true }), { profile: 'testing' });
    const c = check(r, 'firmware.secure-boot');
    expect(c).toMatchObject({ result: 'pass', measured: 'enabled' });
    expect(c.message).toContain('--source');
  });

  it('warns when Secure Boot is on and the image carries no signed shim', async () => {
    const r = runPreflightChecks(await facts({ uefi: true, secureBoot: true }), { profile: 'testing', image: { source: '/run/initramfs/live/rootfs.squashfs' } });
    const c = check(r, 'firmware.secure-boot');
    expect(c.result).toBe('warn');
    expect(c.measured).toBe('enabled; the image carries no signed shim');
    expect(c.message).toContain('/run/initramfs/live/rootfs.squashfs carries no signed shim');
    expect(c.message).toContain('refuses it');
    expect(c.whatToDo).toMatch(/Turn Secure Boot off in the firmware setup/);
    expect(r.summary.fail).toBe(0);
  });

  it("passes when the image carries a shim: hvinstall installs the image's own chain", async () => {
    const r = runPreflightChecks(await facts({ uefi: true, secureBoot: true }), { profile: 'testing', image: { source: '/src', shim: '/usr/share/efi/x86_64/shim.efi' } });
    const c = check(r, 'firmware.secure-boot');
    expect(c.result).toBe('pass');
    expect(c.measured).toBe('enabled; the image carries /usr/share/efi/x86_64/shim.efi');
    expect(c.message).toContain("installs the image's own boot chain");
    expect(c.message).not.toContain('refuses');
  });
});

describe('findShim', () => {
  it('finds SUSE, Debian and Fedora shims where those distributions keep them', () => {
    expect(findShim(['/usr/share/efi/x86_64/shim.efi'])).toBe('/usr/share/efi/x86_64/shim.efi');
    expect(findShim(['usr/lib/shim/shimx64.efi.signed'])).toBe('/usr/lib/shim/shimx64.efi.signed');
    expect(findShim(['/boot/efi/EFI/fedora/shimx64.efi'])).toBe('/boot/efi/EFI/fedora/shimx64.efi');
  });

  it("takes Debian's signed shim over the unsigned build shim-unsigned puts beside it", () => {
    expect(findShim(['/usr/lib/shim/shimx64.efi', '/usr/lib/shim/shimx64.efi.signed', '/usr/lib/shim/fbx64.efi'])).toBe('/usr/lib/shim/shimx64.efi.signed');
    expect(findShim(['usr/lib/shim/shimx64.efi.signed', 'usr/lib/shim/shimx64.efi'])).toBe('/usr/lib/shim/shimx64.efi.signed');
  });

  it('ignores other names and other places', () => {
    expect(findShim(['/usr/lib/shim/mmx64.efi.signed', '/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed'])).toBeUndefined();
    expect(findShim(['/home/user/shim.efi', '/usr/share/doc/shim/shimx64.efi'])).toBeUndefined();
  });
});

describe('imageShim', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'hv-shim-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('firmware facts: a SecureBoot variable decides; efivars without one is firmware without Secure Boot; none readable is unknown', async () => {
    const efivars = (name: string) => path.join(dir, name, 'sys/firmware/efi/efivars');
    await mkdir(efivars('sb-on'), { recursive: true });
    await writeFile(path.join(efivars('sb-on'), 'SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c'), Buffer.from([6, 0, 0, 0, 1]));
    await mkdir(efivars('no-var'), { recursive: true });
    await writeFile(path.join(efivars('no-var'), 'BootOrder-8be4df61-93ca-11d2-aa0d-00e098032b8c'), Buffer.from([7, 0, 0, 0, 1, 0]));
    await mkdir(efivars('unmounted'), { recursive: true });
    expect(await gatherFirmware(new Host(path.join(dir, 'sb-on')))).toEqual({ uefi: true, secureBoot: true });
    expect(await gatherFirmware(new Host(path.join(dir, 'no-var')))).toEqual({ uefi: true, secureBoot: false });
    expect(await gatherFirmware(new Host(path.join(dir, 'unmounted')))).toEqual({ uefi: true, secureBoot: undefined });
  });

  it('reads a directory tree and a squashfs (listed, not extracted)', async () => {
    const tree = path.join(dir, 'with');
    await mkdir(path.join(tree, 'usr/lib/shim'), { recursive: true });
    await writeFile(path.join(tree, 'usr/lib/shim/shimx64.efi.signed'), 'x');
    const bare = path.join(dir, 'without');
    await mkdir(path.join(bare, 'usr/lib/grub'), { recursive: true });
    expect(await imageShim(tree)).toBe('/usr/lib/shim/shimx64.efi.signed');
    expect(await imageShim(bare)).toBeUndefined();
    for (const [src, want] of [[tree, '/usr/lib/shim/shimx64.efi.signed'], [bare, undefined]] as const) {
      const sq = `${src}.squashfs`;
      await run('mksquashfs', [src, sq, '-noappend', '-quiet', '-no-progress']);
      expect(await imageShim(sq)).toBe(want);
    }
  });
});
