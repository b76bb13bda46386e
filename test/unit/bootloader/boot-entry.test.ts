import { afterEach, describe, expect, it } from 'vitest';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { bootEntrySkipReason, createArgs, manualCommand, orderWithFirst, parseEfibootmgr, planBootEntry, refusalWarning, staleEntries, writeBootEntry } from '../../../installer/bootloader/boot-entry.js';
import type { ImageBootChain } from '../../../installer/bootloader/image-chain.js';

const IMAGE: ImageBootChain = {
  kind: 'image', shim: '/usr/lib/shim/shimx64.efi.signed', grub: '/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed',
  mokManager: '/usr/lib/shim/mmx64.efi.signed', grubCfg: '/etc/cos/grub.cfg', bootargsCfg: '/etc/cos/bootargs.cfg', modules: [],
};

// efibootmgr 17's listing, as OVMF's NVRAM gives it after an install.
const LISTING = `BootCurrent: 0001
Timeout: 0 seconds
BootOrder: 0001,0000,0003,0002
Boot0000* UiApp\tFvVol(7cb8bdc9-f8eb-4f34-aaea-3ee4af6516a1)/FvFile(462caa21-7614-4503-836e-8ab6f4662331)
Boot0001* UEFI QEMU NVMe Ctrl HVE2E0001 1\tPciRoot(0x0)/Pci(0x4,0x0)/NVMe(0x1,00-00-00-00-00-00-00-00)
Boot0002  EFI Internal Shell\tFvVol(7cb8bdc9-f8eb-4f34-aaea-3ee4af6516a1)/FvFile(7c04a583-9e3e-4f1c-ad65-e05268d0b4d1)
Boot0003* hvinstall\tHD(1,GPT,0b5c3a8e-0000-4000-8000-000000000001,0x800,0x32000)/File(\\EFI\\hvinstall\\grubx64.efi)
`;

describe('planning the entry', () => {
  it("points an image chain's entry at its shim in EFI/elemental, as Elemental names it", () => {
    expect(planBootEntry(IMAGE, '/dev/nvme0n1', 1)).toEqual({ label: 'elemental-shim', loader: '\\EFI\\elemental\\shimx64.efi', disk: '/dev/nvme0n1', partition: 1 });
  });

  it("points the own chain's entry at hvinstall's grub", () => {
    const p = planBootEntry({ kind: 'own', why: 'x' }, '/dev/sda', 1);
    expect(p).toEqual({ label: 'hvinstall', loader: '\\EFI\\hvinstall\\grubx64.efi', disk: '/dev/sda', partition: 1 });
    expect(createArgs(p)).toEqual(['--create', '--disk', '/dev/sda', '--part', '1', '--label', 'hvinstall', '--loader', '\\EFI\\hvinstall\\grubx64.efi']);
    expect(manualCommand(p)).toBe("efibootmgr --create --disk /dev/sda --part 1 --label hvinstall --loader '\\EFI\\hvinstall\\grubx64.efi'");
  });

  it('writes none for a loop device, and one for a real disk', () => {
    expect(bootEntrySkipReason('/dev/loop7')).toMatch(/^\/dev\/loop7 is a loop device \(a disk image\): no firmware boots it/);
    expect(bootEntrySkipReason('/dev/nvme0n1')).toBeUndefined();
    expect(bootEntrySkipReason('/dev/sda')).toBeUndefined();
  });
});

describe("reading efibootmgr's answer", () => {
  it('reads BootOrder and the entries with their labels and active flags', () => {
    const s = parseEfibootmgr(LISTING);
    expect(s.bootOrder).toEqual(['0001', '0000', '0003', '0002']);
    expect(s.entries).toEqual([
      { num: '0000', label: 'UiApp', active: true },
      { num: '0001', label: 'UEFI QEMU NVMe Ctrl HVE2E0001 1', active: true },
      { num: '0002', label: 'EFI Internal Shell', active: false },
      { num: '0003', label: 'hvinstall', active: true },
    ]);
    expect(staleEntries(s, 'hvinstall')).toEqual(['0003']);
    expect(staleEntries(s, 'elemental-shim')).toEqual([]);
  });

  it('puts an entry first, or says it already is', () => {
    expect(orderWithFirst(['0001', '0000', '0003'], '0003')).toEqual(['0003', '0001', '0000']);
    expect(orderWithFirst(['0004', '0001'], '0004')).toBeUndefined();
    expect(orderWithFirst([], '0004')).toEqual(['0004']);
  });

  it('turns a full NVRAM into a warning with what to do', () => {
    const p = planBootEntry({ kind: 'own', why: 'x' }, '/dev/sda', 1);
    const w = refusalWarning(p, 'Could not prepare Boot variable: No space left on device\n');
    expect(w).toMatch(/^no UEFI boot entry "hvinstall": the firmware NVRAM is full\. The disk still boots through the removable path EFI\/BOOT\/BOOTX64\.EFI; delete stale entries/);
    expect(w).toContain(manualCommand(p));
    expect(refusalWarning(p, 'efibootmgr: Read-only file system')).toContain('the firmware refused the write (efibootmgr: Read-only file system)');
  });
});

describe('writeBootEntry (efibootmgr stubbed on PATH, a fake sysfs)', () => {
  const dirs: string[] = [];
  const savedPath = process.env.PATH;
  afterEach(async () => {
    process.env.PATH = savedPath;
    for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });

  async function setup(opts: { efivars: boolean; script?: string }) {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-bootentry-'));
    dirs.push(dir);
    const sysfs = path.join(dir, 'efi');
    await mkdir(path.join(sysfs, 'efivars'), { recursive: true });
    if (opts.efivars) await writeFile(path.join(sysfs, 'efivars', 'BootOrder-8be4df61-93ca-11d2-aa0d-00e098032b8c'), '');
    const bin = path.join(dir, 'bin');
    await mkdir(bin);
    const log = path.join(dir, 'calls');
    await writeFile(path.join(bin, 'efibootmgr'), `#!/bin/sh\necho "[$*]" >> ${log}\n${opts.script ?? ''}`);
    await chmod(path.join(bin, 'efibootmgr'), 0o755);
    process.env.PATH = `${bin}:${savedPath}`;
    return { sysfs, calls: async () => (await readFile(log, 'utf8').catch(() => '')).split('\n').filter(Boolean) };
  }

  const p = planBootEntry({ kind: 'own', why: 'x' }, '/dev/nvme0n1', 1);

  it('replaces the stale entry, creates the new one and puts it first', async () => {
    const created = LISTING.replace('BootOrder: 0001,0000,0003,0002', 'BootOrder: 0004,0001,0000,0002').replace(/Boot0003.*\n/, '') + 'Boot0004* hvinstall\tHD(1,GPT,...)/File(\\EFI\\hvinstall\\grubx64.efi)\n';
    const t = await setup({
      efivars: true,
      script: `case "$1" in\n  "") cat <<'EOF'\n${LISTING}EOF\n;;\n  --create) cat <<'EOF'\n${created}EOF\n;;\nesac\n`,
    });
    const out = await writeBootEntry(p, { efiSysfs: t.sysfs });
    expect(out).toEqual({ kind: 'created', num: '0004', bootOrder: ['0004', '0001', '0000', '0002'], message: expect.stringContaining('UEFI boot entry Boot0004 "hvinstall" -> \\EFI\\hvinstall\\grubx64.efi on /dev/nvme0n1 partition 1, BootOrder 0004,0001,0000,0002') });
    expect(await t.calls()).toEqual(['[]', '[--bootnum 0003 --delete-bootnum]', '[--create --disk /dev/nvme0n1 --part 1 --label hvinstall --loader \\EFI\\hvinstall\\grubx64.efi]']);
  });

  it('sets BootOrder when the firmware did not put the new entry first', async () => {
    const created = LISTING.replace(/Boot0003.*\n/, '') + 'Boot0005* hvinstall\tHD(1)\n';
    const t = await setup({
      efivars: true,
      script: `case "$1" in\n  "") echo 'BootOrder: 0001'; echo 'Boot0001* disk' ;;\n  --create) cat <<'EOF'\n${created}EOF\n;;\n  --bootorder) echo "BootOrder: $2" ;;\nesac\n`,
    });
    const out = await writeBootEntry(p, { efiSysfs: t.sysfs });
    expect(out.kind).toBe('created');
    expect((await t.calls()).at(-1)).toBe('[--bootorder 0005,0001,0000,0003,0002]');
    expect(out.kind === 'created' && out.bootOrder).toEqual(['0005', '0001', '0000', '0003', '0002']);
  });

  it('a full NVRAM is a warning, not a failure', async () => {
    const t = await setup({ efivars: true, script: `case "$1" in\n  --create) echo 'Could not prepare Boot variable: No space left on device' >&2; exit 5 ;;\n  *) echo 'BootOrder: 0001' ;;\nesac\n` });
    const out = await writeBootEntry(p, { efiSysfs: t.sysfs });
    expect(out.kind).toBe('warning');
    expect(out.message).toMatch(/the firmware NVRAM is full\. The disk still boots through the removable path/);
  });

  it('efivarfs not mounted: a note saying how, and efibootmgr never runs', async () => {
    const t = await setup({ efivars: false });
    const out = await writeBootEntry(p, { efiSysfs: t.sysfs });
    expect(out.kind).toBe('skipped');
    expect(out.message).toContain(`efivarfs is not mounted at ${t.sysfs}/efivars (a container, or a live system without it): mount -t efivarfs`);
    expect(await t.calls()).toEqual([]);
  });

  it('no UEFI at all (BIOS): a note, and efibootmgr never runs', async () => {
    const t = await setup({ efivars: false });
    const out = await writeBootEntry(p, { efiSysfs: path.join(t.sysfs, 'absent') });
    expect(out.kind).toBe('skipped');
    expect(out.message).toMatch(/is absent \(legacy BIOS boot, or no UEFI runtime services\)/);
    expect(await t.calls()).toEqual([]);
  });
});
