/**
 * The hybrid live ISO (docs/iso.md): one file that boots as a CD-ROM and, written with dd, as a
 * USB disk, under legacy BIOS and UEFI (with Secure Boot on). Layout, as Ubuntu's and Debian's
 * current ISOs (xorriso's GPT variant of an isohybrid image):
 * - El Torito BIOS entry: grub-pc's i386-pc-eltorito core (unsigned; BIOS has no Secure Boot),
 *   with what it needs built in; for USB the MBR carries grub's boot_hybrid.img, which loads the
 *   same core (`--grub2-mbr`, `--grub2-boot-info`). The MBR has a protective partition marked
 *   bootable for BIOSes that want one.
 * - El Torito UEFI entry = GPT partition 2, an ESP image appended after the ISO 9660 tree:
 *   EFI/BOOT/BOOTX64.EFI (Debian's shim, Microsoft-signed), grubx64.efi (Debian's signed grub,
 *   which shim looks for next to itself), mmx64.efi (MokManager), and a small grub.cfg.
 * - The ISO 9660 tree, volume id COS_LIVE: boot/kernel, boot/initrd, boot/grub2/{grub.cfg,
 *   harvester.cfg, eltorito.img}, hvlive/live.squashfs (the live root), rootfs.squashfs (the OS to
 *   install), bundle/, harvester-release.yaml (when given), and /.disk/id/<medium id>.
 *
 * Both grubs find the medium by /.disk/id/<medium id> (unique to this build), not by label, so a
 * second COS_LIVE stick is never taken for this one; then read boot/grub2/grub.cfg from it.
 * Debian's signed grub reads `$prefix/grub.cfg` with $prefix = /EFI/debian on the device it was
 * loaded from: the ESP partition when booted from a USB disk, but the CD itself (the ISO 9660
 * tree) when booted from a CD under OVMF. So the small grub.cfg is in EFI/debian on both, and
 * also in EFI/BOOT (its `$cmdpath` fallback); with $prefix present, grub never runs its own
 * search for /.disk/info, which could pick another disk's menu.
 *
 * Reproducible: xorriso gets -no_rc (no startup files), the build time as --modification-date and
 * --set_all_file_dates (every file's dates, whatever the sources' mtimes) and in SOURCE_DATE_EPOCH
 * (the GPT disk and partition GUIDs derive from it), -r (owners 0, modes rationalised); the ESP is
 * made with mkfs.vfat --invariant and a volume id from the medium id, mtools under
 * SOURCE_DATE_EPOCH (directory and file times); grub-mkimage's output depends only on its inputs.
 */
import { copyFile, mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import { SIGNED_GRUB_PREFIX, type SignedBootChain } from '../signed-boot.js';
import { LIVE_LABEL, LIVE_SQUASHFS_PATH } from './initramfs-init.js';

export interface IsoImageOptions {
  kernel: string;
  initrd: string;
  liveSquashfs: string;
  osSquashfs: string;
  mediumId: string;
  signed: SignedBootChain;
  /** grub's ${harvester_version} (menu titles), as Harvester's boot/grub2/harvester.cfg. */
  version: string;
  /** grub's ${extra_iso_cmdline}: kernel parameters every entry gets (default none). */
  extraCmdline?: string;
  /** Seconds the grub menu waits (default 10, as Harvester's). */
  grubTimeout?: number;
  /** The image bundle to carry as bundle/ (default: an empty one, metadata.yaml only). */
  bundleDir?: string;
  /** Copied to the ISO's root as harvester-release.yaml. */
  releaseFile?: string;
  epoch: number;
  out: string;
}

/** BIOS grub: what the El Torito core needs built in (grub-pc's modules are not on the ISO). */
export const BIOS_GRUB_MODULES = [
  'biosdisk', 'iso9660', 'part_msdos', 'part_gpt', 'fat', 'normal', 'configfile', 'linux', 'search',
  'search_fs_file', 'search_label', 'echo', 'test', 'serial', 'terminal', 'sleep', 'boot', 'ls', 'cat',
] as const;

export const EMPTY_BUNDLE_METADATA = 'images:\n  common: []\n  rke2: []\n  agent: []\n';

/** The path grub searches for to find this build's medium. Pure. */
export function mediumIdPath(id: string): string {
  if (!/^[0-9a-f]{8,64}$/.test(id)) throw new HvError(`medium id ${id} is not lower-case hex`, { exitCode: ExitCode.usage });
  return `/.disk/id/${id}`;
}

/** The UEFI stub grub.cfg (signed grub, normal mode): finds this medium, sets $root/$prefix to it, reads the menu. Pure. */
export function findMediumGrubScript(id: string): string {
  return [
    `if ! search --no-floppy --file --set=root ${mediumIdPath(id)}; then`,
    `  echo "hvinstall: no device holds ${mediumIdPath(id)} (this build's live medium); trying $root"`,
    'fi',
    'set prefix=($root)/boot/grub2',
    'configfile ($root)/boot/grub2/grub.cfg',
  ].join('\n') + '\n';
}

/**
 * The BIOS El Torito core's built-in early config. grub runs it before normal mode, with the
 * rescue parser: simple commands only (an `if` is "Unknown command"). A failed search leaves
 * $root at the device grub booted from, the CD itself. Normal mode then reads $prefix/grub.cfg. Pure.
 */
export function biosEarlyGrubScript(id: string): string {
  return `search --no-floppy --file --set=root ${mediumIdPath(id)}\nset prefix=($root)/boot/grub2\n`;
}

/** boot/grub2/harvester.cfg: the two variables an operator may change by remastering. Pure. */
export function harvesterCfg(version: string, extraCmdline = ''): string {
  for (const [name, v] of [['version', version], ['extra kernel parameters', extraCmdline]] as const) {
    if (/["\\$\n]/.test(v)) throw new HvError(`the ISO's ${name} must not contain quotes, backslashes, $ or newlines: ${v}`, { exitCode: ExitCode.usage });
  }
  return `set harvester_version="${version}"\nset extra_iso_cmdline="${extraCmdline}"\n`;
}

/**
 * boot/grub2/grub.cfg: Harvester's menu shape (an entry per console, `${extra_iso_cmdline}`
 * appended), the linux line first in each entry so that editing it is: e, arrow down (grub's
 * editor shows a setparams line first), Ctrl-E, type, Ctrl-X. No kernel parameter is needed to find the
 * live root (the initramfs looks for COS_LIVE). Pure.
 */
export function isoGrubCfg(timeout = 10): string {
  if (!Number.isInteger(timeout) || timeout < 0 || timeout > 3600) throw new HvError(`grub timeout ${timeout} is not 0..3600 s`, { exitCode: ExitCode.usage });
  const entry = (title: string, id: string, consoles: string) =>
    // The linux command right after the brace: grub's editor then shows it right below the
    // setparams line it adds (a line break after the brace would be an empty line in between).
    `menuentry "Harvester installer (hvinstall) \${harvester_version}${title}" --class os --unrestricted --id ${id} { linux ($root)/boot/kernel ${consoles} \${extra_iso_cmdline}\n` +
    `\tinitrd ($root)/boot/initrd\n}\n`;
  return [
    '# hvinstall live ISO: legacy BIOS (grub-pc) and UEFI (Debian\'s signed shim and grub) read this menu.',
    '# Kernel parameters (harvester.install.*, docs/iso.md): select an entry, press e, go down to the',
    '# linux line and to its end (Ctrl-E), type them, Ctrl-X boots. Or remaster harvester.cfg.',
    'set default=0',
    `set timeout=${timeout}`,
    'set timeout_style=menu',
    'if serial --unit=0 --speed=115200; then',
    '  terminal_input console serial',
    '  terminal_output console serial',
    'fi',
    'source ($root)/boot/grub2/harvester.cfg',
    '',
  ].join('\n') + entry('', 'hvinstall', 'console=tty1') + entry(', serial console ttyS0', 'hvinstall-serial', 'console=tty1 console=ttyS0,115200');
}

/** --modification-date / --set_all_file_dates form of a time: YYYYMMDDhhmmsscc in UTC. Pure. */
export function isoTimestamp(epoch: number): string {
  const d = new Date(epoch * 1000);
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getUTCFullYear(), 4)}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}00`;
}

export async function buildIsoImage(opts: IsoImageOptions): Promise<{ iso: string; bytes: number }> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'hv-iso-'));
  const env = { ...process.env, SOURCE_DATE_EPOCH: String(opts.epoch) };
  try {
    const tree = path.join(work, 'tree');
    const stub = findMediumGrubScript(opts.mediumId);
    for (const d of ['.disk/id', 'boot/grub2', 'EFI/BOOT', SIGNED_GRUB_PREFIX.slice(1)]) await mkdir(path.join(tree, d), { recursive: true });
    await writeFile(path.join(tree, mediumIdPath(opts.mediumId)), '');
    await writeFile(path.join(tree, 'boot/grub2/grub.cfg'), isoGrubCfg(opts.grubTimeout));
    await writeFile(path.join(tree, 'boot/grub2/harvester.cfg'), harvesterCfg(opts.version, opts.extraCmdline));
    await writeFile(path.join(tree, 'EFI/BOOT/grub.cfg'), stub);
    await writeFile(path.join(tree, SIGNED_GRUB_PREFIX.slice(1), 'grub.cfg'), stub);
    if (opts.releaseFile) await copyFile(opts.releaseFile, path.join(tree, 'harvester-release.yaml'));
    const bundle = path.join(work, 'bundle');
    if (!opts.bundleDir) {
      await mkdir(bundle, { recursive: true });
      await writeFile(path.join(bundle, 'metadata.yaml'), EMPTY_BUNDLE_METADATA);
    }

    // BIOS: the El Torito core, its early config finding the medium (normal mode then reads $prefix/grub.cfg).
    const early = path.join(work, 'bios-early.cfg');
    await writeFile(early, biosEarlyGrubScript(opts.mediumId));
    await run('grub-mkimage', ['-O', 'i386-pc-eltorito', '-d', '/usr/lib/grub/i386-pc', '-p', '/boot/grub2', '-c', early, '-o', path.join(tree, 'boot/grub2/eltorito.img'), ...BIOS_GRUB_MODULES]);

    const esp = path.join(work, 'esp.img');
    await buildEsp(esp, opts, stub, work, env);

    await rm(opts.out, { force: true });
    await mkdir(path.dirname(path.resolve(opts.out)), { recursive: true });
    const when = isoTimestamp(opts.epoch);
    await run('xorriso', [
      '-no_rc', '-as', 'mkisofs', '-quiet',
      '-V', LIVE_LABEL, '-r', '-graft-points',
      `--modification-date=${when}`, '--set_all_file_dates', when,
      '--grub2-mbr', '/usr/lib/grub/i386-pc/boot_hybrid.img',
      '-partition_offset', '16', '--mbr-force-bootable',
      '-append_partition', '2', '0xef', esp, '-appended_part_as_gpt',
      '-iso_mbr_part_type', 'a2a0d0ebe5b9334487c068b6b72699c7',
      '-c', '/boot/boot.cat',
      '-b', '/boot/grub2/eltorito.img', '-no-emul-boot', '-boot-load-size', '4', '-boot-info-table', '--grub2-boot-info',
      '-eltorito-alt-boot', '-e', '--interval:appended_partition_2:all::', '-no-emul-boot',
      // Boot files first on the medium (fewer seeks on a real CD), as grub-mkrescue does.
      '--sort-weight', '0', '/', '--sort-weight', '1', '/boot',
      '-o', opts.out,
      tree,
      `/boot/kernel=${opts.kernel}`,
      `/boot/initrd=${opts.initrd}`,
      `/${LIVE_SQUASHFS_PATH}=${opts.liveSquashfs}`,
      `/rootfs.squashfs=${opts.osSquashfs}`,
      `/bundle=${opts.bundleDir ?? bundle}`,
    ], { env, timeoutMs: 30 * 60_000 });
    return { iso: opts.out, bytes: (await stat(opts.out)).size };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** The ESP image: shim as the removable-media path, signed grub and MokManager next to it, the grub.cfg stub. */
async function buildEsp(esp: string, opts: IsoImageOptions, stub: string, work: string, env: NodeJS.ProcessEnv): Promise<void> {
  const files: Array<[string, string]> = [
    [opts.signed.shim, '::/EFI/BOOT/BOOTX64.EFI'],
    [opts.signed.grub, '::/EFI/BOOT/grubx64.efi'],
    [opts.signed.mokManager, '::/EFI/BOOT/mmx64.efi'],
  ];
  const stubFile = path.join(work, 'esp-grub.cfg');
  await writeFile(stubFile, stub);
  files.push([stubFile, '::/EFI/BOOT/grub.cfg'], [stubFile, `::${SIGNED_GRUB_PREFIX}/grub.cfg`]);
  let bytes = 0;
  for (const [src] of files) bytes += (await stat(src)).size;
  // Room for FAT's tables and clusters: the files plus 2 MiB, in whole MiB.
  const kib = Math.ceil((bytes + 2 * 1024 * 1024) / (1024 * 1024)) * 1024;
  await rm(esp, { force: true });
  await run('mkfs.vfat', ['-C', '--invariant', '-i', opts.mediumId.slice(0, 8), '-n', 'HVLIVE_ESP', esp, String(kib)], { env });
  await run('mmd', ['-i', esp, '::/EFI', '::/EFI/BOOT', `::${SIGNED_GRUB_PREFIX}`], { env });
  for (const [src, dest] of files) await run('mcopy', ['-i', esp, src, dest], { env });
}
