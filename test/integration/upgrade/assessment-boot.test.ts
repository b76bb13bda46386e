/**
 * The boot assessment in a real boot (QEMU, OVMF, hvinstall's own grub EFI binary and grub.cfg,
 * Debian's kernel, the busybox test OS that prints its kernel line and powers off): an armed disk
 * boots the new image once with the attempt's arguments and grub records "trying" on COS_STATE;
 * the next boot takes the previous image with the fallback markers. The Elemental-chain variant of
 * the same machine runs in grub-emu (test/unit/upgrade/assessment-grub.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { deployImages } from '../../../installer/deploy/index.js';
import { installBootloader } from '../../../installer/bootloader/index.js';
import { buildTestOsTree } from '../../../iso-build/index.js';
import { harvesterParts, makeLoopDisk, type LoopDisk } from '../deploy/loop-disk.js';
import { NO_COUNTDOWN } from '../bootloader/no-countdown.js';

const OVMF_CODE = '/usr/share/OVMF/OVMF_CODE_4M.fd';
const OVMF_VARS = '/usr/share/OVMF/OVMF_VARS_4M.fd';
const BOOT_DEADLINE_MS = 420_000;
let work: string;
let disk: LoopDisk;

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'hv-assess-boot-'));
  const tree = await buildTestOsTree(path.join(work, 'tree'), { kernel: { cacheDir: process.env.HV_KERNEL_CACHE ?? '/var/cache/hvinstall/debian-kernel' } });
  disk = await makeLoopDisk(harvesterParts({ firmware: 'efi', stateMiB: 400, recoveryMiB: 200 }));
  const stateDir = disk.byLabel('COS_STATE').mountpoint!;
  await deployImages({ stateDir, recoveryDir: disk.byLabel('COS_RECOVERY').mountpoint!, source: { kind: 'dir', path: tree.dir }, systemSizeMiB: 96, workDir: path.join(work, 'deploy') });
  await installBootloader({ firmware: 'efi', device: disk.device, espDevice: disk.byLabel('COS_GRUB').device, stateDir, oemDir: disk.byLabel('COS_OEM').mountpoint!, tty: 'ttyS0', thirdPartyKernelArgs: 'no_timer_check', labelCheckDevices: disk.parts.map((p) => p.device) });
  // What hvinstall upgrade leaves: armed.
  await execa('grub-editenv', [path.join(stateDir, 'hv_assessment'), 'set', 'hv_assessment_state=armed']);
  await writeFile(path.join(disk.byLabel('COS_OEM').mountpoint!, 'grubcustom'), NO_COUNTDOWN);
  await disk.release();
}, 900_000);

afterAll(async () => {
  await disk?.cleanup();
  await rm(work, { recursive: true, force: true });
});

async function boot(name: string): Promise<string> {
  const vars = path.join(work, `vars-${name}.fd`);
  await copyFile(OVMF_VARS, vars);
  const r = await execa('qemu-system-x86_64', ['-machine', 'q35', '-accel', 'tcg', '-cpu', 'qemu64', '-m', '1024', '-smp', '1', '-nographic', '-no-reboot', '-nic', 'none',
    '-drive', `if=pflash,format=raw,readonly=on,file=${OVMF_CODE}`, '-drive', `if=pflash,format=raw,file=${vars}`,
    '-drive', `file=${disk.file},if=none,format=raw,id=d0`, '-device', 'nvme,serial=hvassess0,drive=d0'], { reject: false, stdin: 'ignore', timeout: BOOT_DEADLINE_MS });
  return `${r.stdout}`.replace(/\r/g, '');
}

/** COS_STATE's assessment state, read from the disk file (partition 4, by its offset) with debugfs. */
async function stateOnDisk(): Promise<string> {
  const [start, sectors] = (await execa('partx', ['-g', '-n', '4', '-o', 'START,SECTORS', disk.file])).stdout.trim().split(/\s+/).map(Number);
  const loop = (await execa('losetup', ['-f', '--show', '-r', '-o', String(start! * 512), '--sizelimit', String(sectors! * 512), disk.file])).stdout.trim();
  try {
    const env = (await execa('debugfs', ['-R', 'cat /hv_assessment', loop], { stderr: 'ignore' })).stdout;
    return /^hv_assessment_state=(.*)$/m.exec(env)?.[1] ?? '<none>';
  } finally {
    await execa('losetup', ['-d', loop]);
  }
}

describe('boot assessment, booted (QEMU, OVMF, hvinstall\'s own chain)', () => {
  it('armed: the new image once with the attempt arguments; then, back at grub, the previous image with the fallback markers', async () => {
    const attempt = await boot('attempt');
    expect(attempt).toMatch(/boot assessment: trying the upgraded image once/);
    expect(attempt).toMatch(/HVTEST-CMDLINE .*cos-img\/filename=\/cOS\/active\.img .*no_timer_check .*panic=5 .*hv\.assessment=attempt/);
    expect(await stateOnDisk()).toBe('trying');
    const fallback = await boot('fallback');
    expect(fallback).toMatch(/HVTEST-CMDLINE .*cos-img\/filename=\/cOS\/passive\.img .*upgrade_failure hv\.assessment=fallback/);
    expect(fallback).not.toMatch(/HVTEST-CMDLINE .*panic=5/);
    expect(await stateOnDisk()).toBe('fallback');
  }, 2 * BOOT_DEADLINE_MS + 60_000);
});
