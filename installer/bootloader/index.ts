import { cp, mkdir, mkdtemp, readFile, rename, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { ReadBackMismatch } from '../deploy/read-back.js';
import { HvError, ExitCode } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import type { BootloaderRequest } from '../disk/contracts.js';
import {
  BIOS_CORE_MODULES,
  EFI_IMAGE_MODULES,
  EFI_VENDOR_DIR,
  GRUB_CFG,
  GRUB_DIR,
  LABELS,
  MEMDISK_EARLY_CFG,
  oemGrubenvVars,
  renderEarlyCfg,
  renderEmbeddedCfg,
  renderGrubCfg,
  stateGrubenvVars,
} from './grub-config.js';
import { assertLabelsUnique } from './labels.js';
import { espFiles, grubEntryName, patchNoFloppy, renderDebugGrubcustom, renderEspStubCfg, IMAGE_EFI_VENDOR_DIR, type ImageBootChain } from './image-chain.js';
import { chainFiles, extractImageFiles, IMAGE_OS_RELEASE } from './image-chain-source.js';
import { writeBootAssessment } from './assessment.js';
import { verifyBiosCore } from './bios-core-check.js';

export * from './grub-config.js';
export { assertLabelsUnique, devicesWithLabels, duplicateLabels, labelledDevices } from './labels.js';
export * from './image-chain.js';
export { renderStateGrubcustom, writeBootAssessment } from './assessment.js';

/** Where Debian's grub packages keep the platform modules. */
export const GRUB_LIB = '/usr/lib/grub';

/**
 * Step 5 of the install: grub for x86_64-efi (removable path EFI/BOOT/BOOTX64.EFI and a vendor
 * directory, written onto the unmounted ESP with mtools) or i386-pc (grub-install into the
 * bios_grub gap), the grub.cfg on COS_STATE, and the grub environments on COS_OEM and COS_STATE.
 * Idempotent: every file is rewritten whole; a re-run after a kill produces the same files.
 */
/** What the bootloader step wrote outside a filesystem the install mounts: the ESP's files by sha256, read back. */
export interface BootloaderWritten {
  espFiles: Record<string, string>;
}

export async function installBootloader(req: BootloaderRequest): Promise<BootloaderWritten> {
  req.signal?.throwIfAborted();
  if (req.firmware === 'efi' && !req.espDevice) {
    throw new HvError('an EFI install needs the COS_GRUB (ESP) partition device', {
      where: 'bootloader: espDevice',
      hint: 'the partition plan must include COS_GRUB for firmware efi',
      exitCode: ExitCode.installFailed,
    });
  }
  await assertLabelsUnique([LABELS.state, LABELS.oem, LABELS.recovery], req.labelCheckDevices);
  if (req.bootChain?.kind === 'image') {
    if (req.firmware !== 'efi' || !req.source) {
      throw new HvError("the image's boot chain is for UEFI installs from a known source", { where: 'bootloader', hint: 'a planner bug: report it with the plan (hvinstall plan --json)', exitCode: ExitCode.installFailed });
    }
    return { espFiles: await installImageChain(req, req.bootChain) };
  }

  const grubDir = path.join(req.stateDir, GRUB_DIR);
  await mkdir(grubDir, { recursive: true });
  let espFiles: Record<string, string> = {};
  if (req.firmware === 'efi') {
    await copyGrubModules('x86_64-efi', grubDir);
    req.signal?.throwIfAborted();
    espFiles = await installEfiBinary(req.espDevice!);
  } else {
    await copyGrubModules('i386-pc', grubDir);
    req.signal?.throwIfAborted();
    await installBiosCore(req.device, req.stateDir);
  }
  req.signal?.throwIfAborted();
  await writeFileAtomic(path.join(req.stateDir, GRUB_CFG), renderGrubCfg({ tty: req.tty }));
  await writeGrubenv(path.join(req.stateDir, 'grub_oem_env'), stateGrubenvVars());
  await writeGrubenv(path.join(req.oemDir, 'grubenv'), oemGrubenvVars(req.thirdPartyKernelArgs ?? ''));
  await writeBootAssessment(req.stateDir, writeGrubenv);
  // Harvester ships an empty grubcustom: without it some firmware spends minutes searching for it.
  await writeFileAtomic(path.join(req.oemDir, 'grubcustom'), '');
  return { espFiles };
}

/**
 * Whether what the bootloader step wrote outside the install's filesystems still reads back as
 * written (a resumed install keeps the step only then): each ESP file against its recorded sha256,
 * and on BIOS the boot sector and core.img against grub-install's files on COS_STATE. The reason
 * to redo the step, or undefined.
 */
export async function bootloaderStillWritten(req: { firmware: 'efi' | 'bios'; device: string; espDevice?: string; stateDir: string }, written: BootloaderWritten): Promise<string | undefined> {
  if (req.firmware === 'bios') {
    return verifyBiosCore(req.device, req.stateDir).then(() => undefined, (err: unknown) => String((err as Error).message));
  }
  if (!req.espDevice) return 'no ESP to check';
  for (const [to, want] of Object.entries(written.espFiles)) {
    const got = await espFileSha256(req.espDevice, to).catch((err: unknown) => `unreadable (${String((err as Error).message).split('\n')[0]})`);
    if (got !== want) return `${to} on ${req.espDevice} is ${got.startsWith('unreadable') ? got : `sha256 ${got}`}, not the ${want} written`;
  }
  return undefined;
}

/**
 * The image's own chain (image-chain.ts): every file is read out of the image into a temp
 * directory first, so a source that fails to read leaves the disk as it was; then the ESP, the
 * modules and grub.cfg on COS_STATE, the environments and grubcustom.
 */
async function installImageChain(req: BootloaderRequest, chain: ImageBootChain): Promise<Record<string, string>> {
  const root = await extractImageFiles(req.source!, chainFiles(chain), [IMAGE_OS_RELEASE]);
  try {
    req.signal?.throwIfAborted();
    const stub = path.join(root, 'esp-grub.cfg');
    await writeFileAtomic(stub, renderEspStubCfg());
    await mtoolsMkdirs(req.espDevice!, ['::/EFI', '::/EFI/BOOT', `::/EFI/${IMAGE_EFI_VENDOR_DIR}`]);
    const written: Record<string, string> = {};
    for (const f of espFiles(chain)) {
      written[f.to] = await mcopyVerified(req.espDevice!, f.from === 'stub' ? stub : path.join(root, f.from), f.to);
    }
    const modDir = path.join(req.stateDir, GRUB_DIR, 'x86_64-efi');
    await mkdir(modDir, { recursive: true });
    for (const m of chain.modules) await cp(path.join(root, m), path.join(modDir, path.basename(m)));
    const grubCfg = patchNoFloppy(await readFile(path.join(root, chain.grubCfg), 'utf8'));
    await writeFileAtomic(path.join(req.stateDir, GRUB_CFG), grubCfg);
    const osRelease = await readFile(path.join(root, IMAGE_OS_RELEASE), 'utf8').catch(() => undefined);
    await writeGrubenv(path.join(req.stateDir, 'grub_oem_env'), { ...stateGrubenvVars(), default_menu_entry: grubEntryName(osRelease) ?? 'Harvester' });
    await writeBootAssessment(req.stateDir, writeGrubenv, renderDebugGrubcustom());
    await writeGrubenv(path.join(req.oemDir, 'grubenv'), oemGrubenvVars(req.thirdPartyKernelArgs ?? ''));
    await writeFileAtomic(path.join(req.oemDir, 'grubcustom'), '');
    return written;
  } finally {
    await rm(path.dirname(root), { recursive: true, force: true });
  }
}

/** Copies grub's modules for a platform to COS_STATE/grub2/<platform>, replacing any older copy whole. */
export async function copyGrubModules(platform: 'x86_64-efi' | 'i386-pc', grubDir: string): Promise<void> {
  const from = path.join(GRUB_LIB, platform);
  if (!(await stat(from).catch(() => undefined))?.isDirectory()) {
    throw new HvError(`grub modules for ${platform} are not installed (${from} is missing)`, {
      where: 'bootloader',
      hint: platform === 'x86_64-efi' ? 'install the grub-efi-amd64-bin package' : 'install the grub-pc-bin package',
      exitCode: ExitCode.usage,
    });
  }
  const dest = path.join(grubDir, platform);
  const tmp = `${dest}.partial`;
  await rm(tmp, { recursive: true, force: true });
  // cp(1), not fs.cp: ~280 files, and node's per-file stat/copy/chmod round trips took seconds on a slow CPU.
  await run('cp', ['-R', '--', from, tmp], { timeoutMs: 10 * 60_000 });
  await rm(dest, { recursive: true, force: true });
  await rename(tmp, dest);
}

/**
 * grub-mkimage with the early config in a memdisk (the config grub runs first only points there),
 * copied to both ESP paths with mtools.
 */
export async function installEfiBinary(espDevice: string): Promise<Record<string, string>> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'hv-grub-efi-'));
  try {
    const embedded = path.join(tmp, 'embedded.cfg');
    const memdiskDir = path.join(tmp, 'memdisk');
    const memdisk = path.join(tmp, 'memdisk.tar');
    const efi = path.join(tmp, 'BOOTX64.EFI');
    await writeFileAtomic(embedded, renderEmbeddedCfg());
    await writeFileAtomic(path.join(memdiskDir, MEMDISK_EARLY_CFG), renderEarlyCfg());
    // Fixed metadata in the tar, so the same config gives the same EFI binary on every run.
    await run('tar', ['-C', memdiskDir, '--format=ustar', '--mtime=@0', '--owner=0', '--group=0', '--numeric-owner', '--mode=0644', '-cf', memdisk, MEMDISK_EARLY_CFG]);
    await run('grub-mkimage', [
      '-O', 'x86_64-efi',
      '-d', path.join(GRUB_LIB, 'x86_64-efi'),
      '-o', efi,
      '-p', `/${GRUB_DIR}`,
      '-c', embedded,
      '-m', memdisk,
      ...EFI_IMAGE_MODULES,
    ]);
    await mtoolsMkdirs(espDevice, ['::/EFI', '::/EFI/BOOT', `::/EFI/${EFI_VENDOR_DIR}`]);
    const vendor = `::/EFI/${EFI_VENDOR_DIR}/grubx64.efi`;
    return { '::/EFI/BOOT/BOOTX64.EFI': await mcopyVerified(espDevice, efi, '::/EFI/BOOT/BOOTX64.EFI'), [vendor]: await mcopyVerified(espDevice, efi, vendor) };
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/**
 * Makes the directories (parents first) on a FAT image, keeping those that exist: one recursive
 * listing and one mmd for the missing ones, not two tool runs per directory. mdir fails on an
 * empty root; a FAT it cannot read fails the mmd that follows, with mtools' message.
 */
async function mtoolsMkdirs(device: string, dirs: readonly string[]): Promise<void> {
  const listing = await mtools('mdir', ['-/', '-b', '-i', device, '::/'], true);
  const missing = missingFatDirs(listing.stdout, dirs);
  if (missing.length > 0) await mtools('mmd', ['-i', device, ...missing]);
}

/** Of `dirs` (`::/A/B`), those `mdir -/ -b` output does not list as directories (`::/A/B/`), in order. Pure. */
export function missingFatDirs(mdirListing: string, dirs: readonly string[]): string[] {
  const present = new Set(mdirListing.split('\n').map((l) => l.trim()).filter((l) => l.endsWith('/')).map((l) => l.slice(0, -1).toUpperCase()));
  return dirs.filter((d) => !present.has(d.replace(/\/+$/, '').toUpperCase()));
}

/**
 * Copies a file onto the ESP, then reads it back from the disk (the device's cached blocks dropped
 * first: mtools writes through them) and compares it by sha256 with what was meant: mcopy reports
 * success over writes the disk failed.
 */
async function mcopyVerified(espDevice: string, from: string, to: string): Promise<string> {
  await mtools('mcopy', ['-o', '-i', espDevice, from, to]);
  const [want, got] = await Promise.all([readFile(from).then((b) => createHash('sha256').update(b).digest('hex')), espFileSha256(espDevice, to)]);
  if (got !== want) throw new ReadBackMismatch(`${to} read back from ${espDevice} differs from what was written: sha256 ${got}, expected ${want}`, to, undefined);
  return got;
}

/** The sha256 of a file on the ESP as the disk holds it (the device's cached blocks dropped first: mtools reads through them). */
async function espFileSha256(espDevice: string, file: string): Promise<string> {
  await run('blockdev', ['--flushbufs', espDevice], { timeoutMs: 60_000 });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-esp-read-'));
  try {
    const back = path.join(dir, 'file');
    await mtools('mcopy', ['-n', '-o', '-i', espDevice, file, back]);
    return createHash('sha256').update(await readFile(back)).digest('hex');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function mtools(cmd: string, args: readonly string[], allowFailure = false) {
  // MTOOLS_SKIP_CHECK: a partition device has no floppy geometry for mtools to check.
  return run(cmd, args, { env: { MTOOLS_SKIP_CHECK: '1' }, allowFailure });
}

/**
 * i386-pc: grub-install writes the MBR code and core.img (into the bios_grub partition) with
 * the boot directory on the mounted COS_STATE; Debian names it grub/, so its grub.cfg there is
 * the early config that moves on to grub2/grub.cfg. What grub-install wrote is read back.
 */
export async function installBiosCore(device: string, stateDir: string): Promise<void> {
  await run('grub-install', [
    '--target=i386-pc',
    `--directory=${path.join(GRUB_LIB, 'i386-pc')}`,
    `--boot-directory=${stateDir}`,
    `--modules=${BIOS_CORE_MODULES.join(' ')}`,
    '--no-floppy',
    device,
  ]);
  await verifyBiosCore(device, stateDir);
  await writeFileAtomic(path.join(stateDir, 'grub', 'grub.cfg'), renderEarlyCfg());
}

/** A grub environment block written with grub-editenv into a temp file, then renamed into place. */
export async function writeGrubenv(file: string, vars: Record<string, string>): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.partial`;
  await rm(tmp, { force: true });
  const assignments = Object.entries(vars).map(([k, v]) => `${k}=${v}`);
  // `set` creates a missing file as `create` does (grub's util/grub-editenv.c, open_envblk_file).
  await run('grub-editenv', assignments.length > 0 ? [tmp, 'set', ...assignments] : [tmp, 'create']);
  await rename(tmp, file);
}
