/**
 * The build host's tools and data files the ISO build runs or reads, each with the Debian package
 * that provides it, so a missing one is named with what to install (all are in .ci/apt-packages.txt).
 */
import { stat } from 'node:fs/promises';
import { HvError, ExitCode } from '../lib/errors.js';
import { findOnPath } from '../lib/find-on-path.js';

/** Where Debian's busybox-static puts its binary. */
export const BUSYBOX = '/bin/busybox';

/** Executables (looked up on PATH) → Debian package. */
export const BUILD_TOOLS: Readonly<Record<string, string>> = {
  xorriso: 'xorriso',
  'mkfs.vfat': 'dosfstools',
  mmd: 'mtools',
  mcopy: 'mtools',
  'grub-mkimage': 'grub-common',
  mksquashfs: 'squashfs-tools',
  cpio: 'cpio',
  zstd: 'zstd',
  gzip: 'gzip',
  modprobe: 'kmod',
  depmod: 'kmod',
  'dpkg-deb': 'dpkg',
  'apt-get': 'apt',
  find: 'findutils',
  touch: 'coreutils',
};

/** Files the build reads → Debian package. */
export const BUILD_FILES: Readonly<Record<string, string>> = {
  '/usr/lib/grub/i386-pc/boot_hybrid.img': 'grub-pc-bin',
  '/usr/lib/grub/i386-pc/iso9660.mod': 'grub-pc-bin',
  '/bin/busybox': 'busybox-static',
};

export interface MissingTool {
  what: string;
  kind: 'command' | 'file';
  pkg: string;
}

/** The message for what is missing, one package list to install. Pure. */
export function missingToolsError(missing: MissingTool[]): HvError {
  const pkgs = [...new Set(missing.map((m) => m.pkg))].sort();
  const what = missing.map((m) => `${m.kind === 'command' ? 'the command ' : ''}${m.what} (package ${m.pkg})`).join(', ');
  return new HvError(`the build host lacks ${what}`, {
    where: 'iso-build: host tools',
    hint: `apt-get install ${pkgs.join(' ')}  (make deps installs everything in .ci/apt-packages.txt)`,
    exitCode: ExitCode.usage,
  });
}

/** Throws one error naming every missing tool and file with its package. */
export async function requireBuildTools(opts: { tools?: Record<string, string>; files?: Record<string, string>; pathVar?: string } = {}): Promise<void> {
  const tools = opts.tools ?? BUILD_TOOLS;
  const files = opts.files ?? BUILD_FILES;
  const pathVar = opts.pathVar ?? process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin';
  const missing: MissingTool[] = [];
  for (const [tool, pkg] of Object.entries(tools)) if (!(await findOnPath(tool, pathVar))) missing.push({ what: tool, kind: 'command', pkg });
  for (const [file, pkg] of Object.entries(files)) if (!(await stat(file).catch(() => undefined))) missing.push({ what: file, kind: 'file', pkg });
  if (missing.length) throw missingToolsError(missing);
}
