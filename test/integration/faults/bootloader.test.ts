/**
 * The boot code read back: grub's EFI binary corrupted on the ESP after a killed run, and grub's BIOS
 * boot code corrupted on its way to the bios_grub partition (the promise every case keeps, and the
 * harness: cases.ts).
 */
import { describe, expect, it } from 'vitest';
import { open, readFile } from 'node:fs/promises';
import path from 'node:path';
import { events, sh } from '../install/helpers.js';
import { failedLoudly, FAULT_CASE_MS, faultFileHooks, install, setup } from './cases.js';

faultFileHooks();

describe('the ESP after a killed run', { timeout: FAULT_CASE_MS }, () => {
  it("1e. grub's EFI binary corrupted on the ESP after a run was killed after the bootloader step: the re-run reads it back and installs the bootloader again", async () => {
    const t = await setup();
    const killed = await install(t, { HVINSTALL_TEST_SIGKILL_AT: 'after:bootloader' });
    expect(killed.signal, killed.stderr).toBe('SIGKILL');
    const esp = t.part('COS_GRUB');
    // The PE signature of the first EFI binary on the ESP, changed in the backing file behind the kernel's back.
    const fh = await open(t.disk.backing, 'r+');
    try {
      const buf = Buffer.alloc(esp.to - esp.from);
      await fh.read(buf, 0, buf.length, esp.from);
      const at = buf.indexOf(Buffer.from('50450000', 'hex'));
      expect(at).toBeGreaterThan(0);
      await fh.write(Buffer.from('X'), 0, 1, esp.from + at);
    } finally {
      await fh.close();
    }
    await sh('blockdev', ['--flushbufs', esp.dev]);
    const again = await install(t);
    expect(again.code, again.stderr).toBe(0);
    const redo = events(again.stdout).find((e) => e.type === 'message' && e.step === 'bootloader' && e.level === 'warn');
    expect(String(redo?.message)).toMatch(new RegExp(`::/EFI/(BOOT/BOOTX64\\.EFI|\\w+/grubx64\\.efi) on ${esp.dev} is sha256 [0-9a-f]{64}, not the [0-9a-f]{64} written: redoing from here`));
    // Both copies of grub on the ESP are whole again: the same bytes, with the PE signature.
    const copies = await Promise.all(['::/EFI/BOOT/BOOTX64.EFI', '::/EFI/hvinstall/grubx64.efi'].map(async (f, i) => {
      const out = path.join(t.dir, `esp-copy-${i}`);
      await sh('mcopy', ['-n', '-o', '-i', esp.dev, f, out], { env: { ...process.env, MTOOLS_SKIP_CHECK: '1' } });
      return readFile(out);
    }));
    expect(copies[0]!.equals(copies[1]!)).toBe(true);
    expect(copies[0]!.includes(Buffer.from('50450000', 'hex'))).toBe(true);
  });
});

describe("grub's BIOS boot code", { timeout: FAULT_CASE_MS }, () => {
  it('1d. bytes corrupted on their way to the bios_grub partition (core.img): fails naming core.img, the disk and the byte; a re-run installs', async () => {
    const t = await setup(undefined, true);
    const bios = t.part('bios');
    await t.disk.setRules([{ op: 'write', from: bios.from, to: bios.to, action: 'flip' }]);
    const r = await install(t);
    await failedLoudly(t, r);
    expect((await t.disk.hits()).length).toBeGreaterThan(0);
    expect(r.stderr).toContain('install failed in step bootloader');
    expect(r.stderr).toMatch(new RegExp(`grub's BIOS boot code read back from ${t.disk.dev}: core\\.img differs from grub's at byte \\d+ \\(disk byte \\d+\\)`));
    const at = /disk byte (\d+)/.exec(r.stderr)!;
    expect(Number(at[1])).toBeGreaterThanOrEqual(bios.from);
    expect(Number(at[1])).toBeLessThan(bios.to);
    // (The clean-install comparison after a fault is the EFI cases'; here the re-run only has to succeed.)
    await t.disk.setRules([]);
    const again = await install(t);
    expect(again.code, again.stderr).toBe(0);
  });
});
