/**
 * Write errors: COS_STATE failing from the deploy on, a partition table whose writes fail, the
 * persistent step and the ESP
 * (the promise every case keeps, and the harness: cases.ts).
 */
import { describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { events, installArgs, probe, sh, withMount } from '../install/helpers.js';
import { atStep, expectKernelWord, failedLoudly, FAULT_CASE_MS, faultFileHooks, install, journalOf, MiB, recoversToClean, setup, source } from './cases.js';

faultFileHooks();

describe('write errors', { timeout: FAULT_CASE_MS }, () => {
  it('3. writes to COS_STATE failing from the deploy on: what cannot be invalidated is named, the rest is invalidated and reads back blank', async () => {
    const t = await setup();
    const state = t.part('COS_STATE');
    const r = await install(t, {}, atStep('deploy', t.disk, [{ op: 'write', from: state.from, to: state.to, action: 'eio' }]));
    await failedLoudly(t, r);
    expect(r.stderr).toContain('install failed in step deploy');
    expect(r.stderr).toMatch(new RegExp(`NOT INVALIDATED: could not invalidate ${state.dev} \\(COS_STATE\\): .+; do not boot this disk`));
    const journal = await journalOf(t);
    expect(journal.status).toBe('failed');
    expect(journal.notInvalidated).toEqual([expect.stringMatching(new RegExp(`^could not invalidate ${state.dev} \\(COS_STATE\\)`))]);
    expect(events(r.stdout).some((e) => e.type === 'message' && e.level === 'error' && String(e.message).startsWith(`could not invalidate ${state.dev}`))).toBe(true);
    for (const label of ['COS_GRUB', 'COS_RECOVERY', 'COS_PERSISTENT']) {
      const p = t.part(label);
      expect(journal.invalidation).toContain(`${p.dev} (${label})`);
      expect((await probe(p.dev)).TYPE, label).toBeUndefined();
      const head = (await sh('sh', ['-c', `dd if=${p.dev} bs=1M count=1 iflag=direct status=none | tr -d '\\0' | wc -c`])).stdout.trim();
      expect(head, `${label}'s first MiB`).toBe('0');
    }
    // The failed install's record on COS_OEM names it too.
    await withMount(t.part('COS_OEM').dev, t.dir, async (m) => {
      expect(JSON.parse(await readFile(path.join(m, 'install/journal.json'), 'utf8')).notInvalidated).toEqual(journal.notInvalidated);
    });
    await recoversToClean(t);
  });

  it('4. a partition table whose writes fail or are corrupted (the backup GPT header, then the primary end): fails in the partition or clear step naming the device and the kernel error, without waiting on the kernel', async () => {
    const t = await setup();
    const size = 260 * 1024 * MiB;
    const gptHeader = Buffer.from('EFI PART').toString('hex');
    // sfdisk fsyncs each of its writes: the failed backup header stops it, before the primary is written.
    await t.disk.setRules([{ op: 'write', from: size - MiB, to: size, match: gptHeader, action: 'eio' }]);
    const backup = await install(t);
    await failedLoudly(t, backup);
    expect(backup.stderr).toContain('install failed in step partition');
    expect(backup.stderr).toMatch(new RegExp(`sfdisk .*${t.disk.dev}`));
    await expectKernelWord(backup, t.disk.dev);
    // A backup header the disk takes and stores corrupted: only the read-back finds it.
    await t.disk.setRules([{ op: 'write', from: size - MiB, to: size, match: gptHeader, action: 'flip' }]);
    const corrupted = await install(t);
    await failedLoudly(t, corrupted);
    expect(corrupted.stderr).toContain('install failed in step partition');
    expect(corrupted.stderr).toContain(`the partition table written to ${t.disk.dev} does not read back: sgdisk --verify:`);
    // Every write to the primary end failing: the resumed run (its clear step done) fails in sfdisk's
    // write; a fresh run's clear step already, its zeros over the old tables failing.
    await t.disk.setRules([{ op: 'write', from: 0, to: MiB, action: 'eio' }]);
    const primary = await install(t);
    await failedLoudly(t, primary);
    expect(primary.stderr).toContain('install failed in step partition');
    expect(primary.stderr).toMatch(new RegExp(`sfdisk .*${t.disk.dev}`));
    expect(primary.stderr).not.toContain('waiting for the kernel to show the new partitions');
    await expectKernelWord(primary, t.disk.dev);
    const fresh = await install({ ...t, args: installArgs(t.configFile, source, `${t.stateDir}-fresh`, ['--bundle', 'none']) });
    await failedLoudly(t, fresh);
    expect(fresh.stderr).toContain('install failed in step clear');
    expect(fresh.stderr).toContain(`could not clear the partition tables of ${t.disk.dev}: writing zeros at byte 0:`);
    await expectKernelWord(fresh, t.disk.dev);
    await recoversToClean(t);
  });

  it('6. a write error in the persistent step and on the ESP: each error names the partition, the byte and the kernel message', async () => {
    const t = await setup();
    const persistent = t.part('COS_PERSISTENT');
    const r = await install(t, {}, atStep('persistent', t.disk, [{ op: 'write', from: persistent.from, to: persistent.to, action: 'eio' }]));
    await failedLoudly(t, r);
    // The persistent step's few writes may reach the disk before the rule does; then the agent
    // step's writes to the same partition are the first to fail.
    expect(r.stderr).toMatch(/install failed in step (persistent|agent)/);
    expect(r.stderr).toContain(persistent.dev);
    await expectKernelWord(r, t.disk.dev);
    const esp = t.part('COS_GRUB');
    await t.disk.setRules([]);
    const e = await install(t, {}, atStep('bootloader', t.disk, [{ op: 'write', from: esp.from, to: esp.to, action: 'eio' }]));
    await failedLoudly(t, e);
    expect(e.stderr).toContain('install failed in step bootloader');
    await expectKernelWord(e, t.disk.dev);
    await recoversToClean(t);
  });
});
