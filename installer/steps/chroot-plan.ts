/**
 * The after-install-chroot step's decisions, pure: which commands run, which mounts the chroot
 * gets (and in which order they come off), and whether and how the image is relabelled for SELinux.
 * Elemental's install (rancher/elemental-toolkit pkg/action/install.go) relabels with setfiles, then
 * runs the `after-install-chroot` stage chrooted into the new system with COS_PERSISTENT at
 * /usr/local and COS_OEM at /oem; hvinstall does the same inside cOS/active.img.
 */
import path from 'node:path';
import type { HarvesterConfig } from '../../config/types.js';

/** The user's commands (os.after_install_chroot_commands), blank ones dropped as the renderer drops them. */
export function chrootCommands(config: HarvesterConfig): string[] {
  return (config.os?.afterInstallChrootCommands ?? []).filter((c) => c.trim() !== '');
}

export interface ChrootMount {
  /** Path inside the chroot root (absolute, as the chrooted system sees it). */
  target: string;
  /** What is bound there: a host path, or a partition mount of this install. */
  source: string;
}

/**
 * The binds, in mount order (unmount in reverse): the kernel filesystems from the host, then
 * COS_OEM at /oem and COS_PERSISTENT at /usr/local as Elemental binds them.
 */
export function chrootMounts(dirs: { oem: string; persistent: string }): ChrootMount[] {
  return [
    { target: '/dev', source: '/dev' },
    { target: '/proc', source: '/proc' },
    { target: '/sys', source: '/sys' },
    { target: '/run', source: '/run' },
    { target: '/oem', source: dirs.oem },
    { target: '/usr/local', source: dirs.persistent },
  ];
}

/** SELINUXTYPE from an /etc/selinux/config text, or undefined when SELinux is disabled or unset. */
export function selinuxPolicyType(configText: string): string | undefined {
  const values = new Map<string, string>();
  for (const line of configText.split('\n')) {
    const m = /^\s*([A-Z_]+)\s*=\s*"?([^"#\s]*)"?/.exec(line);
    if (m) values.set(m[1]!, m[2]!);
  }
  if ((values.get('SELINUX') ?? '').toLowerCase() === 'disabled') return undefined;
  const type = values.get('SELINUXTYPE');
  return type && /^[A-Za-z0-9_.-]+$/.test(type) ? type : undefined;
}

/** The policy's file_contexts, as a path inside the chroot. */
export function fileContextsPath(policyType: string): string {
  return path.posix.join('/etc/selinux', policyType, 'contexts/files/file_contexts');
}

/**
 * setfiles' arguments for relabelling the whole image from inside the chroot: the bound kernel
 * filesystems and partitions are excluded (-e), so only the image's own files are labelled.
 */
export function setfilesArgs(fileContexts: string, excluded: string[]): string[] {
  return ['-F', ...excluded.flatMap((e) => ['-e', e]), fileContexts, '/'];
}

/** The last lines of a command's output, for an error message. */
export function outputTail(text: string, lines = 20): string {
  const all = text.trimEnd().split('\n');
  return all.slice(-lines).join('\n');
}
