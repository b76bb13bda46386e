import { afterAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { mkdtemp, open, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { installBootloader, renderEarlyCfg, renderGrubCfg } from '../../../installer/bootloader/index.js';
import type { BootloaderRequest } from '../../../installer/disk/contracts.js';
import { HvError } from '../../../lib/errors.js';
import { harvesterParts, makeLoopDisk, sh, type LoopDisk } from '../deploy/loop-disk.js';

const disks: LoopDisk[] = [];
const scratch: string[] = [];

afterAll(async () => {
  for (const d of disks) await d.cleanup();
  for (const s of scratch) await rm(s, { recursive: true, force: true });
});

async function disk(firmware: 'efi' | 'bios'): Promise<LoopDisk> {
  const d = await makeLoopDisk(harvesterParts({ firmware, stateMiB: 128, recoveryMiB: 64 }));
  disks.push(d);
  return d;
}

function request(d: LoopDisk, firmware: 'efi' | 'bios', extra: Partial<BootloaderRequest> = {}): BootloaderRequest {
  return {
    firmware,
    device: d.device,
    espDevice: firmware === 'efi' ? d.byLabel('COS_GRUB').device : undefined,
    stateDir: d.byLabel('COS_STATE').mountpoint!,
    oemDir: d.byLabel('COS_OEM').mountpoint!,
    thirdPartyKernelArgs: 'nomodeset mitigations=off',
    tty: 'ttyS0',
    labelCheckDevices: d.parts.map((p) => p.device),
    ...extra,
  };
}

const mtoolsEnv = { MTOOLS_SKIP_CHECK: '1' };

async function espRead(esp: string, file: string): Promise<Buffer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-esp-'));
  scratch.push(dir);
  const out = path.join(dir, 'f');
  await execa('mcopy', ['-i', esp, file, out], { env: mtoolsEnv });
  return readFile(out);
}

async function grubenv(file: string): Promise<Record<string, string>> {
  const text = await sh('grub-editenv', [file, 'list']);
  return Object.fromEntries(text.split('\n').filter(Boolean).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
}

async function expectConfigFiles(d: LoopDisk, platform: string): Promise<void> {
  const state = d.byLabel('COS_STATE').mountpoint!;
  const oem = d.byLabel('COS_OEM').mountpoint!;
  expect(await readFile(path.join(state, 'grub2/grub.cfg'), 'utf8')).toBe(renderGrubCfg({ tty: 'ttyS0' }));
  const mods = await readdir(path.join(state, 'grub2', platform));
  for (const m of ['normal.mod', 'linux.mod', 'loopback.mod', 'ext2.mod', 'regexp.mod', 'probe.mod', 'loadenv.mod']) expect(mods).toContain(m);
  expect(await grubenv(path.join(oem, 'grubenv'))).toEqual({ third_party_kernel_args: 'nomodeset mitigations=off', next_entry: '', saved_entry: '' });
  expect((await stat(path.join(oem, 'grubenv'))).size).toBe(1024); // a grub environment block
  expect((await stat(path.join(oem, 'grubcustom'))).size).toBe(0);
  expect(await grubenv(path.join(state, 'grub_oem_env'))).toMatchObject({ state_label: 'COS_STATE', oem_label: 'COS_OEM', recovery_label: 'COS_RECOVERY' });
  expect((await readdir(path.join(state, 'grub2'))).filter((f) => f.includes('partial'))).toEqual([]);
}

describe('installBootloader, UEFI', () => {
  it('writes grub to the removable path and the vendor directory of the unmounted ESP, and the configs', async () => {
    const d = await disk('efi');
    await installBootloader(request(d, 'efi'));
    const esp = d.byLabel('COS_GRUB').device;
    const listing = (await execa('mdir', ['-/', '-b', '-i', esp, '::/'], { env: mtoolsEnv })).stdout;
    expect(listing).toContain('::/EFI/BOOT/BOOTX64.EFI');
    expect(listing).toContain('::/EFI/hvinstall/grubx64.efi');
    const efi = await espRead(esp, '::/EFI/BOOT/BOOTX64.EFI');
    expect(efi.subarray(0, 2).toString()).toBe('MZ'); // a PE image
    expect(efi.includes(Buffer.from('hv_find_label COS_STATE hv_dev_state'))).toBe(true); // early.cfg embedded
    expect(Buffer.compare(efi, await espRead(esp, '::/EFI/hvinstall/grubx64.efi'))).toBe(0);
    await expectConfigFiles(d, 'x86_64-efi');
    // fsck of the ESP after mtools wrote it
    await sh('fsck.vfat', ['-n', esp]);
  });

  it('is idempotent: a second run leaves the same files', async () => {
    const d = await disk('efi');
    await installBootloader(request(d, 'efi'));
    const esp = d.byLabel('COS_GRUB').device;
    const first = await espRead(esp, '::/EFI/BOOT/BOOTX64.EFI');
    const mods = path.join(d.byLabel('COS_STATE').mountpoint!, 'grub2/x86_64-efi');
    await writeFile(path.join(mods, 'stale.mod'), 'from an older grub');
    await installBootloader(request(d, 'efi'));
    // The modules directory is replaced whole: grub's own files exactly, the stale one gone.
    expect((await readdir(mods, { recursive: true })).sort()).toEqual((await readdir('/usr/lib/grub/x86_64-efi', { recursive: true })).sort());
    expect(Buffer.compare(first, await espRead(esp, '::/EFI/BOOT/BOOTX64.EFI'))).toBe(0);
    await expectConfigFiles(d, 'x86_64-efi');
  });

  it('refuses an EFI install without the ESP device, writing nothing', async () => {
    const d = await disk('efi');
    const err = await installBootloader(request(d, 'efi', { espDevice: undefined })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HvError);
    expect((err as HvError).message).toMatch(/an EFI install needs the COS_GRUB \(ESP\) partition device/);
    expect(existsSync(path.join(d.byLabel('COS_STATE').mountpoint!, 'grub2'))).toBe(false);
    expect(existsSync(path.join(d.byLabel('COS_OEM').mountpoint!, 'grubenv'))).toBe(false);
  });
});

describe('installBootloader, BIOS', () => {
  it('installs grub i386-pc into the MBR and bios_grub partition, with the early config on COS_STATE', async () => {
    const d = await disk('bios');
    await installBootloader(request(d, 'bios'));
    const fh = await open(d.device, 'r');
    const mbr = Buffer.alloc(512);
    await fh.read(mbr, 0, 512, 0);
    await fh.close();
    expect(mbr.includes(Buffer.from('GRUB'))).toBe(true);
    const state = d.byLabel('COS_STATE').mountpoint!;
    expect(existsSync(path.join(state, 'grub/i386-pc/core.img'))).toBe(true);
    expect(await readFile(path.join(state, 'grub/grub.cfg'), 'utf8')).toBe(renderEarlyCfg());
    await expectConfigFiles(d, 'i386-pc');
  });
});

describe('duplicate labels', () => {
  it('refuses when another device carries a boot label, naming both, and writes nothing', async () => {
    const d = await disk('efi');
    const stale = await makeLoopDisk([{ label: 'COS_STATE', sizeMiB: 16, fs: 'ext4' }]);
    disks.push(stale);
    const err = await installBootloader(
      request(d, 'efi', { labelCheckDevices: [...d.parts.map((p) => p.device), stale.parts[0].device] }),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HvError);
    expect((err as HvError).message).toBe(`duplicate filesystem labels: COS_STATE on ${[d.byLabel('COS_STATE').device, stale.parts[0].device].sort().join(', ')}`);
    expect((err as HvError).hint).toMatch(/detach it, or clear its label/);
    expect(existsSync(path.join(d.byLabel('COS_STATE').mountpoint!, 'grub2'))).toBe(false);
    expect(existsSync(path.join(d.byLabel('COS_OEM').mountpoint!, 'grubenv'))).toBe(false);
    const listing = await execa('mdir', ['-b', '-i', d.byLabel('COS_GRUB').device, '::/'], { env: mtoolsEnv, reject: false });
    expect(listing.stdout).not.toContain('EFI');
  });

  it('refuses when a boot label is missing', async () => {
    const d = await disk('efi');
    const err = await installBootloader(
      request(d, 'efi', { labelCheckDevices: d.parts.filter((p) => p.label !== 'COS_RECOVERY').map((p) => p.device) }),
    ).catch((e: unknown) => e);
    expect((err as HvError).message).toBe('no device carries the label(s) COS_RECOVERY');
  });
});
