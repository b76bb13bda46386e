/**
 * The boot-assessment state machine run by the real grub (grub-emu) on disk images: the test OS's
 * Elemental-shaped grub.cfg (iso-build/systemd-os/files/grub.cfg, as the image's chain installs
 * it) or hvinstall's own, with what the install writes on COS_STATE. What is checked is what a
 * node would do: which image boots, with which kernel arguments, and what grub left on disk.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { renderDebugGrubcustom, renderGrubCfg, renderStateGrubcustom } from '../../../installer/bootloader/index.js';
import { renderAssessmentScript } from '../../../node/boot-assessment.js';
import { bootInEmu, type EmuBoot, type EmuDisk } from './grub-emu.js';

const ELEMENTAL_GRUB_CFG = path.resolve(__dirname, '../../../iso-build/systemd-os/files/grub.cfg');
const BOOTARGS_CFG = path.resolve(__dirname, '../../../iso-build/systemd-os/files/bootargs.cfg');
const ATTEMPT = ['rd.emergency=reboot', 'rd.shell=0', 'panic=5', 'systemd.crash_reboot', 'systemd.crash_shell=0', 'hv.assessment=attempt'];

/** A grub environment block written by grub-editenv itself. */
async function editenv(vars: Record<string, string>): Promise<Buffer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-env-'));
  try {
    const f = path.join(dir, 'env');
    await execa('grub-editenv', [f, 'set', ...Object.entries(vars).map(([k, v]) => `${k}=${v}`)]);
    return await readFile(f);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A block read back from a disk, listed by grub-editenv. */
async function listEnv(block: Buffer): Promise<Record<string, string>> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-env-'));
  try {
    await writeFile(path.join(dir, 'env'), block);
    const out = (await execa('grub-editenv', [path.join(dir, 'env'), 'list'])).stdout;
    return Object.fromEntries(out.split('\n').filter(Boolean).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

interface Node {
  chain: 'image' | 'own';
  /** COS_STATE/hv_assessment; undefined: the hook is not installed at all (a node before this change). */
  assessment?: Record<string, string>;
  elemental?: Record<string, string>;
  oemEnv?: Record<string, string>;
}

async function nodeDisks(n: Node): Promise<EmuDisk[]> {
  const bootargs = await readFile(BOOTARGS_CFG, 'utf8');
  const image = (marker: string, label: string) => ({ label, files: { 'etc/cos/bootargs.cfg': bootargs, 'boot/vmlinuz': 'kernel', 'boot/initrd': marker } });
  const state: EmuDisk = {
    label: 'COS_STATE',
    files: {
      'grub2/grub.cfg': n.chain === 'image' ? await readFile(ELEMENTAL_GRUB_CFG, 'utf8') : renderGrubCfg({ tty: 'ttyS0', timeoutSec: 0 }),
      grub_oem_env: await editenv({ oem_label: 'COS_OEM', active_label: 'COS_ACTIVE', passive_label: 'COS_PASSIVE' }),
    },
    images: { 'cOS/active.img': image('NEW-IMAGE', 'COS_ACTIVE'), 'cOS/passive.img': image('PREVIOUS-IMAGE', 'COS_PASSIVE') },
  };
  if (n.chain === 'image') state.files.grubcustom = n.assessment ? renderStateGrubcustom(renderDebugGrubcustom()) : renderDebugGrubcustom();
  if (n.assessment) {
    state.files['hv_assessment.cfg'] = renderAssessmentScript();
    state.files.hv_assessment = await editenv(n.assessment);
  }
  if (n.elemental) state.files.boot_assessment = await editenv(n.elemental);
  const oem: EmuDisk = { label: 'COS_OEM', files: { grubenv: await editenv(n.oemEnv ?? { third_party_kernel_args: 'tpa=1' }), grubcustom: '' } };
  return [state, oem];
}

let boots: EmuBoot[] = [];
afterEach(async () => {
  await Promise.all(boots.map((b) => b.cleanup()));
  boots = [];
});

async function boot(n: Node): Promise<EmuBoot> {
  const b = await bootInEmu(await nodeDisks(n));
  boots.push(b);
  if (!b.booted) throw new Error(`grub booted nothing:\n${b.output}`);
  return b;
}
const stateOf = async (b: EmuBoot) => listEnv(await b.readBack(0, '/hv_assessment'));

for (const chain of ['image', 'own'] as const) {
  describe(`boot assessment in grub (${chain === 'image' ? "the image's Elemental grub.cfg" : "hvinstall's own grub.cfg"})`, () => {
    it('changes nothing on an unarmed boot: the same image and kernel line as a node without the hook, the operator\'s arguments kept', async () => {
      const oemEnv = { third_party_kernel_args: 'tpa=1', extra_active_cmdline: 'operator.flag=1' };
      const without = await boot({ chain, oemEnv });
      const armedNot = await boot({ chain, oemEnv, assessment: { hv_assessment_enabled: 'yes', hv_assessment_state: '' } });
      expect(without.booted).toBe('NEW-IMAGE');
      expect(armedNot.booted).toBe('NEW-IMAGE');
      expect(armedNot.args).toEqual(without.args);
      expect(armedNot.args).toContain('tpa=1');
      if (chain === 'image') expect(armedNot.args).toContain('operator.flag=1');
      expect(armedNot.args.join(' ')).not.toMatch(/panic=5|hv\.assessment/);
      expect(await stateOf(armedNot)).toEqual({ hv_assessment_enabled: 'yes', hv_assessment_state: '' });
    });

    it('armed: boots the new image once with the attempt arguments after the operator\'s, and records "trying" on COS_STATE', async () => {
      const b = await boot({ chain, oemEnv: { third_party_kernel_args: 'tpa=1', extra_active_cmdline: 'operator.flag=1', saved_entry: chain === 'image' ? 'fallback' : 'passive' }, assessment: { hv_assessment_enabled: 'yes', hv_assessment_state: 'armed' } });
      expect(b.booted).toBe('NEW-IMAGE');
      expect(b.args.slice(-ATTEMPT.length)).toEqual(ATTEMPT);
      expect(b.args).toContain('cos-img/filename=/cOS/active.img');
      if (chain === 'image') expect(b.args.indexOf('operator.flag=1')).toBeLessThan(b.args.indexOf('panic=5'));
      expect((await stateOf(b)).hv_assessment_state).toBe('trying');
    });

    it('back at grub while trying (the attempt failed): boots the previous image with the fallback markers, no reboot argument', async () => {
      const b = await boot({ chain, assessment: { hv_assessment_enabled: 'yes', hv_assessment_state: 'trying' } });
      expect(b.booted).toBe('PREVIOUS-IMAGE');
      expect(b.args).toContain('cos-img/filename=/cOS/passive.img');
      expect(b.args.slice(-2)).toEqual(['upgrade_failure', 'hv.assessment=fallback']);
      expect(b.args).toContain('panic=0');
      expect(b.args).not.toContain('panic=5');
      expect(b.fallback).toBe('recovery');
      expect((await stateOf(b)).hv_assessment_state).toBe('fallback');
    });

    it('fallback not yet committed: the previous image again, never the failed one (no second attempt)', async () => {
      const b = await boot({ chain, assessment: { hv_assessment_enabled: 'yes', hv_assessment_state: 'fallback' } });
      expect(b.booted).toBe('PREVIOUS-IMAGE');
      expect(b.args).toContain('hv.assessment=fallback');
      expect((await stateOf(b)).hv_assessment_state).toBe('fallback');
    });

    it('disarmed by the operator: an armed upgrade boots the new image plainly and nothing is written', async () => {
      const b = await boot({ chain, assessment: { hv_assessment_enabled: 'no', hv_assessment_state: 'armed' } });
      expect(b.booted).toBe('NEW-IMAGE');
      expect(b.args.join(' ')).not.toMatch(/panic=5|hv\.assessment/);
      expect(await stateOf(b)).toEqual({ hv_assessment_enabled: 'no', hv_assessment_state: 'armed' });
    });
  });
}

describe('boot assessment in grub: Elemental and the operator', () => {
  it("adopts elemental upgrade's arming (COS_STATE/boot_assessment) once: an attempt, and Elemental's flag cleared", async () => {
    const b = await boot({ chain: 'image', assessment: { hv_assessment_enabled: 'yes', hv_assessment_state: '' }, elemental: { enable_boot_assessment: 'yes' } });
    expect(b.booted).toBe('NEW-IMAGE');
    expect(b.args).toContain('hv.assessment=attempt');
    expect((await stateOf(b)).hv_assessment_state).toBe('trying');
    expect((await listEnv(await b.readBack(0, '/boot_assessment'))).enable_boot_assessment).toBe('');
  });

  it('a one-shot next_entry chosen by the operator is booted as chosen, without assessment', async () => {
    const b = await boot({ chain: 'image', oemEnv: { next_entry: 'fallback' }, assessment: { hv_assessment_enabled: 'yes', hv_assessment_state: 'armed' } });
    expect(b.booted).toBe('PREVIOUS-IMAGE');
    expect(b.args.join(' ')).not.toMatch(/hv\.assessment/);
    expect((await stateOf(b)).hv_assessment_state).toBe('armed');
  });

  it('a grub that cannot write the state does not attempt (no reboot arguments, so no loop)', async () => {
    // grub's save_env writes the file's sectors in place and refuses a file with a hole
    // ("sparse file not allowed"), as it refuses LVM or RAID ("diskfilter writes are not supported").
    const disks = await nodeDisks({ chain: 'image', assessment: { hv_assessment_enabled: 'yes', hv_assessment_state: 'armed' } });
    disks[0]!.blockSize = 1024;
    disks[0]!.holes = { hv_assessment: 2048 };
    const b = await bootInEmu(disks);
    boots.push(b);
    expect(b.booted).toBe('NEW-IMAGE');
    expect(b.args.join(' ')).not.toMatch(/panic=5|hv\.assessment/);
    expect(b.output).toContain('cannot write');
  });
});
