/**
 * The kernel arguments of a network install, one list for every boot chain hvpxe renders (iPXE
 * scripts in ipxe.ts, grub scripts in grub.ts): Harvester's live-PXE defaults
 * (harvester/docs install/pxe-boot-install.md), the profile's own (the same key replaces a
 * default), root=live: and the automatic install with this machine's config URL. Pure.
 */
import path from 'node:path';
import type { Catalog, Machine } from './profiles.js';
import { artifactUrl, configUrl } from './render-config.js';

/** Harvester's kernel parameters for a live PXE boot (docs pxe-boot-install.md). */
export const DEFAULT_KERNEL_ARGS = ['ip=dhcp', 'net.ifnames=1', 'rd.cos.disable', 'rd.noverifyssl', 'console=tty1'];

/** Keys hvpxe sets itself: a profile's kernel_args cannot replace them. */
const OURS = ['root', 'harvester.install.automatic', 'harvester.install.config_url', 'hvinstall.events_url', 'initrd'];

/**
 * Kernel arguments for a machine. `initrdArg`: name the initrd on the command line (`initrd=NAME`),
 * which a UEFI kernel started by iPXE needs to find the initrd iPXE registered; BIOS iPXE and grub
 * hand the initrd over themselves.
 */
export function kernelArgs(cat: Catalog, m: Machine, serverUrl: string, opts: { initrdArg: boolean }): string[] {
  const profile = cat.file.profiles[m.profile];
  const extra = profile.kernel_args ?? [];
  const key = (a: string): string => a.split('=')[0];
  const overridden = new Set(extra.map(key));
  const initrdName = path.posix.basename(cat.file.artifacts[profile.initrd].path);
  return [
    ...(opts.initrdArg ? [`initrd=${initrdName}`] : []),
    ...DEFAULT_KERNEL_ARGS.filter((a) => !overridden.has(key(a))),
    `root=live:${artifactUrl(serverUrl, cat.file, profile.rootfs)}`,
    'harvester.install.automatic=true',
    `harvester.install.config_url=${configUrl(serverUrl, m)}`,
    // Ours, ignored by Harvester's installer: where hvinstall posts its progress events.
    ...(profile.report_events === false ? [] : [`hvinstall.events_url=${serverUrl}/events/${m.name}`]),
    ...extra.filter((a) => !OURS.includes(key(a))),
  ];
}
