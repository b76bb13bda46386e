/**
 * The kernel arguments of a network install, one list for every boot chain hvpxe renders (iPXE
 * scripts in ipxe.ts, grub scripts in grub.ts): Harvester's live-PXE defaults
 * (harvester/docs install/pxe-boot-install.md), the profile's own (the same key replaces a
 * default), root=live: and the automatic install with this machine's config URL. Pure.
 */
import path from 'node:path';
import type { Catalog, Machine } from './profiles.js';
import { attestUrl, artifactUrl, configUrl, eventsUrl } from './render-config.js';
import { ATTEST_URL_ARG, EVENTS_URL_ARG } from '../config/hvpxe-protocol.js';

/**
 * Harvester's kernel parameters for a live PXE boot (docs pxe-boot-install.md), less
 * `rd.noverifyssl`: only dracut reads it (dracut.cmdline(7): "accept self-signed certificates for
 * ssl downloads", the root=live:https fetch of Harvester's own initrd). hvinstall's live initramfs
 * and live root never read it, and hvinstall verifies every https download; a profile serving
 * Harvester's initrd over https with a certificate it cannot check names it in kernel_args, an
 * explicit choice (docs/pxe.md).
 */
export const DEFAULT_KERNEL_ARGS = ['ip=dhcp', 'net.ifnames=1', 'rd.cos.disable', 'console=tty1'];

/** Keys hvpxe sets itself: a profile's kernel_args cannot replace them. */
const OURS = ['root', 'harvester.install.automatic', 'harvester.install.config_url', EVENTS_URL_ARG, ATTEST_URL_ARG, 'initrd'];

/**
 * Kernel arguments for a machine. `initrdArg`: name the initrd on the command line (`initrd=NAME`),
 * which a UEFI kernel started by iPXE needs to find the initrd iPXE registered; BIOS iPXE and grub
 * hand the initrd over themselves. `credential`: the boot credential of this script (hvpxe serve),
 * which the config, event and attestation URLs carry; a machine enrolled by its TPM gets the
 * attestation URL too.
 */
export function kernelArgs(cat: Catalog, m: Machine, serverUrl: string, opts: { initrdArg: boolean; credential?: string }): string[] {
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
    `harvester.install.config_url=${configUrl(serverUrl, m, opts.credential)}`,
    // Ours, ignored by Harvester's installer: where hvinstall posts its progress events, and proves its TPM.
    ...(profile.report_events === false ? [] : [`${EVENTS_URL_ARG}=${eventsUrl(serverUrl, m, opts.credential)}`]),
    ...(m.tpmEkSha256 && opts.credential ? [`${ATTEST_URL_ARG}=${attestUrl(serverUrl, m, opts.credential)}`] : []),
    ...extra.filter((a) => !OURS.includes(key(a))),
  ];
}
