/**
 * Boots disks written by deployImages + installBootloader under QEMU (OVMF, NVMe, TCG) to check
 * the grub logic itself: fallback from a broken active.img to passive, and the loud stop on a
 * duplicate COS_STATE label. (The plain active boot is covered by `make e2e`.) Needs
 * qemu-system-x86 and ovmf, and Debian's kernel package (downloaded once into the OS temp dir).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execa, type ResultPromise } from 'execa';
import { copyFile, mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { deployImages } from '../../../installer/deploy/index.js';
import { installBootloader } from '../../../installer/bootloader/index.js';
import { buildTestOsTree } from '../../../iso-build/index.js';
import { harvesterParts, makeLoopDisk, type LoopDisk } from '../deploy/loop-disk.js';
import { NO_COUNTDOWN } from './no-countdown.js';

const OVMF_CODE = '/usr/share/OVMF/OVMF_CODE_4M.fd';
const OVMF_VARS = '/usr/share/OVMF/OVMF_VARS_4M.fd';
const BOOT_DEADLINE_MS = 420_000;

let work: string;
const disks: LoopDisk[] = [];
const guests: ResultPromise[] = [];
let diskImage: string;

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'hv-boot-'));
  const tree = await buildTestOsTree(path.join(work, 'tree'), { kernel: { cacheDir: process.env.HV_KERNEL_CACHE ?? '/var/cache/hvinstall/debian-kernel' } });
  const d = await makeLoopDisk(harvesterParts({ firmware: 'efi', stateMiB: 400, recoveryMiB: 200 }));
  disks.push(d);
  await deployImages({
    stateDir: d.byLabel('COS_STATE').mountpoint!,
    recoveryDir: d.byLabel('COS_RECOVERY').mountpoint!,
    source: { kind: 'dir', path: tree.dir },
    systemSizeMiB: 96,
    workDir: path.join(work, 'deploy'),
  });
  await installBootloader({
    firmware: 'efi',
    device: d.device,
    espDevice: d.byLabel('COS_GRUB').device,
    stateDir: d.byLabel('COS_STATE').mountpoint!,
    oemDir: d.byLabel('COS_OEM').mountpoint!,
    tty: 'ttyS0',
    thirdPartyKernelArgs: 'no_timer_check',
    labelCheckDevices: d.parts.map((p) => p.device),
  });
  // Break active.img's primary superblock: grub cannot read it and must fall back to passive.
  const fh = await open(path.join(d.byLabel('COS_STATE').mountpoint!, 'cOS/active.img'), 'r+');
  await fh.write(Buffer.alloc(1024), 0, 1024, 1024);
  await fh.close();
  await writeFile(path.join(d.byLabel('COS_OEM').mountpoint!, 'grubcustom'), NO_COUNTDOWN);
  await d.release();
  diskImage = d.file;
}, 900_000);

afterAll(async () => {
  for (const g of guests) g.kill('SIGKILL');
  await Promise.allSettled(guests);
  for (const d of disks) await d.cleanup();
  await rm(work, { recursive: true, force: true });
});

/** Boots until the console matches `until` (then stops the guest) or the guest powers off. */
async function boot(name: string, drives: string[], until: RegExp): Promise<string> {
  const vars = path.join(work, `vars-${name}.fd`);
  await copyFile(OVMF_VARS, vars);
  const args = ['-machine', 'q35', '-accel', 'tcg', '-cpu', 'qemu64', '-m', '1024', '-smp', '1', '-nographic', '-no-reboot', '-nic', 'none',
    '-drive', `if=pflash,format=raw,readonly=on,file=${OVMF_CODE}`, '-drive', `if=pflash,format=raw,file=${vars}`];
  drives.forEach((f, i) => args.push('-drive', `file=${f},if=none,format=raw,id=d${i}`, '-device', `nvme,serial=hvboot${i},drive=d${i}`));
  const guest = execa('qemu-system-x86_64', args, { reject: false, stdin: 'ignore', timeout: BOOT_DEADLINE_MS });
  guests.push(guest);
  let out = '';
  guest.stdout?.on('data', (b: Buffer) => {
    out += b.toString().replace(/\r/g, '');
    if (until.test(out)) guest.kill('SIGKILL');
  });
  await guest;
  return out;
}

describe('booting an installed disk (QEMU, OVMF)', () => {
  it('falls back to passive.img when grub cannot read active.img', async () => {
    const out = await boot('fallback', [diskImage], /Kernel panic/);
    expect(out).toMatch(/HVTEST-INITRD root=LABEL=COS_STATE image=\/cOS\/passive\.img/);
    expect(out).toMatch(/HVTEST-BOOTED image=\/cOS\/passive\.img os=hvinstall test OS/);
    expect(out).toMatch(/HVTEST-CMDLINE .*cos-img\/filename=\/cOS\/passive\.img .*console=ttyS0 no_timer_check/);
  }, BOOT_DEADLINE_MS + 60_000);

  it('stops loudly, naming both devices, when a second disk carries COS_STATE', async () => {
    const other = await makeLoopDisk([{ label: 'COS_STATE', sizeMiB: 32, fs: 'ext4' }]);
    disks.push(other);
    await other.release();
    const out = await boot('duplicate', [diskImage, other.file], /boot stopped: duplicate label [^\n]*\n|HVTEST-BOOTED/);
    expect(out).toMatch(/hvinstall: ERROR: the filesystem label COS_STATE is on more than one device: \(hd0,gpt4\) \(hd1,gpt1\)/);
    expect(out).toMatch(/hvinstall: boot stopped: duplicate label COS_STATE on \(hd0,gpt4\) \(hd1,gpt1\)/);
    expect(out).not.toMatch(/HVTEST-BOOTED/);
  }, BOOT_DEADLINE_MS + 60_000);
});
