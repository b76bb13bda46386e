/**
 * The install on a failing disk: bytes corrupted on their way to the disk, on the disk after a
 * killed run, on their way to the ESP, and a source that changes under the install
 * (the promise every case keeps, and the harness: cases.ts).
 */
import { describe, expect, it } from 'vitest';
import { open, readFile, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { events, sh, withMount } from '../install/helpers.js';
import { cleanup, failedLoudly, FAULT_CASE_MS, faultFileHooks, install, journalOf, MARKER, MARKER_FILE, MARKER_HEX, MiB, physicalByte, recoversToClean, setup, source } from './cases.js';

faultFileHooks();

describe('the install on a failing disk', { timeout: FAULT_CASE_MS }, () => {
  it('1. bytes corrupted on their way to COS_STATE and COS_RECOVERY: fails naming the image, the first bad chunk and the device; a re-run installs cleanly', async () => {
    const t = await setup();
    await t.disk.setRules([{ op: 'write', match: MARKER_HEX, action: 'flip' }]);
    const r = await install(t);
    await failedLoudly(t, r);
    expect((await t.disk.hits()).length).toBeGreaterThan(0);
    const state = t.part('COS_STATE');
    const recovery = t.part('COS_RECOVERY');
    expect(r.stderr).toMatch(new RegExp(`cOS/(active|passive|recovery)\\.img (read back from|on) (${state.dev}|${recovery.dev}) (differs from what was written from byte \\d+ \\(4 MiB chunk \\d+\\), byte \\d+ of|does not hold the source's /${MARKER_FILE})`));
    expect((await journalOf(t)).status).toBe('invalidated');
    await recoversToClean(t);
  });

  it('1b. an image corrupted on the disk after a run was killed: the re-run reads it back, finds it and deploys again', async () => {
    const t = await setup();
    const killed = await install(t, { HVINSTALL_TEST_SIGKILL_AT: 'after:deploy' });
    expect(killed.signal, killed.stderr).toBe('SIGKILL');
    // One byte of passive.img's marker data, changed in the disk's backing file behind the kernel's back.
    const state = t.part('COS_STATE');
    const at = await withMount(state.dev, t.dir, async (m) => {
      const frag = (await sh('filefrag', ['-v', path.join(m, 'cOS/passive.img')])).stdout;
      const img = await open(path.join(m, 'cOS/passive.img'), 'r');
      try {
        const buf = Buffer.alloc(4 * MiB);
        for (let off = 0; ; off += buf.length) {
          const { bytesRead } = await img.read(buf, 0, buf.length, off);
          if (bytesRead === 0) throw new Error('no marker in passive.img');
          const i = buf.subarray(0, bytesRead).indexOf(MARKER);
          if (i >= 0) return physicalByte(frag, off + i);
        }
      } finally {
        await img.close();
      }
    }, 'ro,noload');
    const fh = await open(t.disk.backing, 'r+');
    await fh.write(Buffer.from('X'), 0, 1, state.startBytes + at);
    await fh.close();
    await sh('blockdev', ['--flushbufs', state.dev]);
    const again = await install(t);
    expect(again.code, again.stderr).toBe(0);
    const redo = events(again.stdout).find((e) => e.type === 'message' && e.step === 'deploy' && e.level === 'warn');
    expect(String(redo?.message)).toMatch(new RegExp(`cOS/passive\\.img read back from ${state.dev} is sha256-4m:\\w+, not the sha256-4m:\\w+ deployed: redoing from here`));
    await recoversToClean(t);
  });
});

describe('the ESP', { timeout: FAULT_CASE_MS }, () => {
  it("1c. bytes corrupted on their way to the ESP (grub's EFI binary): fails naming the file and the partition; a re-run installs cleanly", async () => {
    const t = await setup();
    const esp = t.part('COS_GRUB');
    // "PE\0\0": the PE header's signature, in the first cluster of every EFI binary.
    await t.disk.setRules([{ op: 'write', from: esp.from, to: esp.to, match: '50450000', action: 'flip' }]);
    const r = await install(t);
    await failedLoudly(t, r);
    expect((await t.disk.hits()).length).toBeGreaterThan(0);
    expect(r.stderr).toContain('install failed in step bootloader');
    expect(r.stderr).toMatch(new RegExp(`::/EFI/BOOT/BOOTX64\\.EFI read back from ${esp.dev} differs from what was written: sha256 [0-9a-f]{64}, expected [0-9a-f]{64}`));
    await recoversToClean(t);
  });
});

describe('the install from a source that changes', { timeout: FAULT_CASE_MS }, () => {
  it('2. a source file truncated between the plan and the deploy: fails naming the file; restored, a re-run installs cleanly', async () => {
    const t = await setup();
    const state = t.part('COS_STATE');
    // The first write to COS_STATE (its mkfs) hangs until the source has been changed.
    await t.disk.setRules([{ op: 'write', from: state.from, to: state.to, action: 'suspend', count: 1 }]);
    const file = path.join(source, MARKER_FILE);
    const original = await readFile(file);
    cleanup.add(() => writeFile(file, original));
    const r = await install(t, {}, async () => {
      await t.disk.waitForHit('suspend');
      await truncate(file, 2 * MiB);
      await t.disk.setRules([]);
    });
    await failedLoudly(t, r);
    expect(r.stderr).toContain(`the OS source ${source} changed since the install began`);
    expect(r.stderr).toContain(`/${MARKER_FILE} is ${2 * MiB} bytes, the source's was ${4 * MiB}`);
    await writeFile(file, original);
    await recoversToClean(t);
  });
});
