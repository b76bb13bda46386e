/**
 * The image's own boot chain, installed as Elemental installs it (rancher/elemental-toolkit
 * pkg/utils/grub.go InstallEFI and pkg/bootloader/grub.go): the image's signed shim, grub and
 * MokManager copied onto the ESP (EFI/BOOT with the shim as bootx64.efi, and a vendor directory), a
 * small grub.cfg next to them that finds COS_STATE by label and hands over to
 * COS_STATE/grub2/grub.cfg, which is the image's /etc/cos/grub.cfg with Harvester's `--no-floppy`
 * change (harvester/harvester-installer harv-install update_grub_settings); grub modules copied to
 * COS_STATE/grub2/x86_64-efi; grub_oem_env with default_menu_entry; a debug entry in
 * COS_STATE/grubcustom (harv-install add_debug_grub_entry).
 *
 * The decision (image chain, own chain, or refuse an incomplete one) is pure over the tree's paths,
 * so the plan can show it before any disk is touched.
 */
import path from 'node:path';
import { ExitCode, HvError } from '../../lib/errors.js';
import { LABELS } from './grub-config.js';

export const IMAGE_GRUB_CFG = '/etc/cos/grub.cfg';
export const IMAGE_BOOTARGS_CFG = '/etc/cos/bootargs.cfg';
export const IMAGE_OS_RELEASE = '/etc/os-release';

/** Elemental's file names per distribution: SUSE, Fedora, Debian/Ubuntu (the `.signed` ones). */
export const EFI_BINARY_NAMES = {
  shim: ['shim.efi', 'shimx64.efi', 'shimx64.efi.signed'],
  grub: ['grub.efi', 'grubx64.efi', 'grubx64.efi.signed'],
  mokManager: ['MokManager.efi', 'mmx64.efi', 'mmx64.efi.signed'],
} as const;

/** Where those distributions keep them (SUSE, Debian's shim, Debian's signed grub, Fedora). */
export const EFI_BINARY_DIRS = ['/usr/share/efi/x86_64', '/usr/lib/shim', '/usr/lib/grub/x86_64-efi-signed', '/boot/efi/EFI'] as const;

/** Where an image keeps grub's x86_64-efi modules (Elemental's patterns: SUSE, Fedora, Debian). */
export const GRUB_MODULE_DIRS = ['/usr/share/grub2/x86_64-efi', '/usr/lib/grub2/x86_64-efi', '/usr/lib/grub/x86_64-efi'] as const;

/** The modules Elemental copies to COS_STATE: the image's grub.cfg loop-mounts squashfs or ext2 images. */
export const IMAGE_GRUB_MODULES = ['loopback.mod', 'squash4.mod', 'xzio.mod'] as const;

/** ESP vendor directory and the NVRAM entry's label of an image chain: Elemental's. */
export const IMAGE_EFI_VENDOR_DIR = 'elemental';
export const IMAGE_BOOT_ENTRY_LABEL = 'elemental-shim';

export interface ImageBootChain {
  kind: 'image';
  shim: string;
  grub: string;
  mokManager: string;
  grubCfg: string;
  bootargsCfg: string;
  /** Image paths of IMAGE_GRUB_MODULES, in that order. */
  modules: string[];
}

export interface OwnBootChain {
  kind: 'own';
  why: string;
}

export type BootChainChoice = ImageBootChain | OwnBootChain;

/**
 * The image path of an EFI binary: one of `names` at most three levels under one of `dirs`,
 * preferring the directories' order, then a `.signed` name, then the name. Debian's shim-signed
 * pulls in shim-unsigned, so /usr/lib/shim holds shimx64.efi (unsigned) beside
 * shimx64.efi.signed (Microsoft's signature): only the signed one boots with Secure Boot on. Pure.
 */
export function findEfiBinary(imagePaths: Iterable<string>, names: readonly string[], dirs: readonly string[] = EFI_BINARY_DIRS): string | undefined {
  const found = [...imagePaths]
    .map((p) => path.posix.join('/', p))
    .filter((p) => names.includes(path.posix.basename(p)) && dirs.some((d) => p.startsWith(`${d}/`) && p.slice(d.length).split('/').length <= 4));
  const dirRank = (p: string) => dirs.findIndex((d) => p.startsWith(`${d}/`));
  const unsigned = (p: string) => (p.endsWith('.signed') ? 0 : 1);
  found.sort((a, b) => dirRank(a) - dirRank(b) || unsigned(a) - unsigned(b) || a.localeCompare(b));
  return found[0];
}

/**
 * Which boot chain an image gets, from the absolute paths of its tree (files only needed under
 * /etc/cos, EFI_BINARY_DIRS and GRUB_MODULE_DIRS). An image with any of /etc/cos/grub.cfg, a shim
 * or a grub EFI binary means to bring its own chain: it gets it only when it is complete, and is
 * refused otherwise (an install that boots half of a chain boots nothing). Pure.
 */
export function chooseBootChain(imagePaths: Iterable<string>, source: string): BootChainChoice {
  const paths = new Set([...imagePaths].map((p) => path.posix.join('/', p)));
  const shim = findEfiBinary(paths, EFI_BINARY_NAMES.shim);
  const grub = findEfiBinary(paths, EFI_BINARY_NAMES.grub);
  const mokManager = findEfiBinary(paths, EFI_BINARY_NAMES.mokManager);
  const grubCfg = paths.has(IMAGE_GRUB_CFG) ? IMAGE_GRUB_CFG : undefined;
  if (!shim && !grub && !grubCfg) {
    return { kind: 'own', why: `${source} carries no ${IMAGE_GRUB_CFG}, shim or grub EFI binary` };
  }
  const moduleDir = GRUB_MODULE_DIRS.find((d) => [...paths].some((p) => p.startsWith(`${d}/`)));
  const modules = IMAGE_GRUB_MODULES.map((m) => (moduleDir && paths.has(`${moduleDir}/${m}`) ? `${moduleDir}/${m}` : undefined));
  const missing: string[] = [];
  if (!grubCfg) missing.push(`the grub config ${IMAGE_GRUB_CFG}`);
  if (!paths.has(IMAGE_BOOTARGS_CFG)) missing.push(`the kernel arguments ${IMAGE_BOOTARGS_CFG}`);
  if (!shim) missing.push(`a shim (${EFI_BINARY_NAMES.shim.join(', ')})`);
  if (!grub) missing.push(`a grub EFI binary (${EFI_BINARY_NAMES.grub.join(', ')})`);
  if (!mokManager) missing.push(`a MokManager (${EFI_BINARY_NAMES.mokManager.join(', ')})`);
  IMAGE_GRUB_MODULES.forEach((m, i) => {
    if (!modules[i]) missing.push(`the grub module ${m} (in ${moduleDir ?? GRUB_MODULE_DIRS.join(' or ')})`);
  });
  if (missing.length > 0) {
    const has = [grubCfg, shim, grub].filter(Boolean).join(', ');
    throw new HvError(`${source} carries an incomplete boot chain: it has ${has} but not ${missing.join('; ')}`, {
      where: 'bootloader: the image boot chain',
      hint: `an image that brings its own boot chain needs all of it (Elemental's layout: ${IMAGE_GRUB_CFG}, ${IMAGE_BOOTARGS_CFG}, shim, grub and MokManager in ${EFI_BINARY_DIRS.join(' or ')}, grub modules ${IMAGE_GRUB_MODULES.join(', ')}): add what is missing to the image, or remove the partial chain so hvinstall writes its own`,
      exitCode: ExitCode.usage,
    });
  }
  return { kind: 'image', shim: shim!, grub: grub!, mokManager: mokManager!, grubCfg: grubCfg!, bootargsCfg: IMAGE_BOOTARGS_CFG, modules: modules as string[] };
}

/** One line for the plan and the install log. Pure. */
export function describeBootChain(choice: BootChainChoice): string {
  if (choice.kind === 'own') return `hvinstall's own grub (${choice.why})`;
  return `the image's own: shim ${choice.shim}, grub ${choice.grub}, ${choice.grubCfg} (Elemental's layout, EFI/${IMAGE_EFI_VENDOR_DIR})`;
}

/** The name a binary gets on the ESP: without Debian's `.signed` (shim loads grubx64.efi by that name). */
export function espName(imagePath: string): string {
  return path.posix.basename(imagePath).replace(/\.signed$/, '');
}

/** Every file the image chain writes onto the ESP: [image path or 'stub', ESP path]. Pure. */
export function espFiles(chain: ImageBootChain): Array<{ from: string | 'stub'; to: string }> {
  const out: Array<{ from: string | 'stub'; to: string }> = [];
  for (const dir of ['BOOT', IMAGE_EFI_VENDOR_DIR]) {
    out.push({ from: chain.grub, to: `::/EFI/${dir}/${espName(chain.grub)}` });
    out.push({ from: chain.mokManager, to: `::/EFI/${dir}/${espName(chain.mokManager)}` });
    out.push({ from: 'stub', to: `::/EFI/${dir}/grub.cfg` });
  }
  out.push({ from: chain.shim, to: '::/EFI/BOOT/bootx64.efi' });
  out.push({ from: chain.shim, to: `::/EFI/${IMAGE_EFI_VENDOR_DIR}/${espName(chain.shim)}` });
  return out;
}

/**
 * The small grub.cfg next to grub on the ESP (Elemental's): find COS_STATE, make its grub2/ the
 * prefix, read its grub.cfg with COS_STATE as root (the image's grub.cfg reads /grub_oem_env).
 */
export function renderEspStubCfg(): string {
  return `search --no-floppy --label --set=root ${LABELS.state}
set prefix=($root)/grub2
configfile ($root)/grub2/grub.cfg
`;
}

/**
 * Harvester's `--no-floppy` change to the image's grub.cfg: every search gets --no-floppy (some
 * firmware spends minutes probing a floppy that is not there), the search.fs_label/file/fs_uuid
 * short forms become `search --no-floppy --label/--file/--fs-uuid`, and a positional `root` result
 * variable becomes --set=root (a `--set root` stays as it is). Lines that already say --no-floppy and comments are left alone. Pure.
 */
export function patchNoFloppy(cfg: string): string {
  return cfg
    .split('\n')
    .map((line) => {
      if (/^\s*#/.test(line)) return line;
      let l = line
        .replace(/\bsearch\.fs_label /g, 'search --label ')
        .replace(/\bsearch\.file /g, 'search --file ')
        .replace(/\bsearch\.fs_uuid /g, 'search --fs-uuid ');
      if (!/(^|[\s;{])search\s/.test(l)) return l;
      if (!l.includes('--no-floppy')) l = l.replace(/(^|[\s;{])search\s+/, '$1search --no-floppy ');
      // Not after --set: `--set root` already names the variable (Harvester's sed would break it).
      return l.replace(/^(\s*search\b)(.*)(?<!--set)\sroot\s*$/, '$1 --set=root$2');
    })
    .join('\n');
}

/** GRUB_ENTRY_NAME of an os-release text (quotes removed; the last assignment wins, as in a shell). Pure. */
export function grubEntryName(osRelease: string | undefined): string | undefined {
  let name: string | undefined;
  for (const line of (osRelease ?? '').split('\n')) {
    const m = /^GRUB_ENTRY_NAME=(.*)$/.exec(line.trim());
    if (m) name = m[1]!.replace(/^(["'])(.*)\1$/, '$2').trim() || undefined;
  }
  return name;
}

/**
 * COS_STATE/grubcustom: the "(debug)" entry Harvester adds: the active image with the image's
 * own kernel arguments plus the crash kernel ones its bootargs.cfg may set. The image's grub.cfg
 * sources this file after its own entries, with $display_name set.
 */
export function renderDebugGrubcustom(): string {
  return `menuentry "\${display_name} (debug)" --id debug {
  search --no-floppy --set=root --label ${LABELS.state}
  set img=/cOS/active.img
  set label=${LABELS.active}
  loopback loop0 $img
  source (loop0)/etc/cos/bootargs.cfg
  linux (loop0)$kernel $kernelcmd \${extra_cmdline} \${extra_active_cmdline} \${crash_kernel_params}
  initrd (loop0)$initramfs
}
`;
}
