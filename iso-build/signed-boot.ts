/**
 * Debian's Secure Boot chain for the ISO's ESP: shim (signed by Microsoft's UEFI CA, so firmware
 * with Microsoft's keys enrolled runs it), MokManager, and grub signed by Debian (shim trusts
 * Debian's key; grub in turn has shim verify the kernel, which Debian's linux-image package ships
 * signed). Fetched with `apt-get download` into the build cache (debian-package.ts).
 *
 * Debian's signed grub is monolithic (its modules are built in; under Secure Boot it cannot load
 * .mod files) and its built-in config reads `$prefix/grub.cfg` when $prefix (/EFI/debian on the
 * boot device) exists, else searches every disk for /.disk/info and finally reads
 * `$cmdpath/grub.cfg`. iso-image.ts lays out the ESP and the ISO for that.
 */
import path from 'node:path';
import { fetchDebianPackage, packageFile } from './debian-package.js';

export const SIGNED_BOOT_FILES = {
  shim: { pkg: 'shim-signed', file: '/usr/lib/shim/shimx64.efi.signed' },
  mokManager: { pkg: 'shim-helpers-amd64-signed', file: '/usr/lib/shim/mmx64.efi.signed' },
  grub: { pkg: 'grub-efi-amd64-signed', file: '/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed' },
} as const;

/** Where Debian's signed grub looks first (its built-in prefix, on the device it was loaded from). */
export const SIGNED_GRUB_PREFIX = '/EFI/debian';

export interface SignedBootChain {
  shim: string;
  mokManager: string;
  grub: string;
  /** The package files used (their names carry the versions), for the build's record. */
  debs: string[];
}

export async function fetchSignedBootChain(cacheDir: string): Promise<SignedBootChain> {
  const out: Partial<Record<keyof typeof SIGNED_BOOT_FILES, string>> = {};
  const debs: string[] = [];
  for (const [key, { pkg, file }] of Object.entries(SIGNED_BOOT_FILES) as Array<[keyof typeof SIGNED_BOOT_FILES, { pkg: string; file: string }]>) {
    const p = await fetchDebianPackage(path.join(cacheDir, 'signed-boot'), pkg, { purpose: 'the Secure Boot chain of the ISO' });
    out[key] = await packageFile(p, file);
    debs.push(p.deb);
  }
  return { shim: out.shim!, mokManager: out.mokManager!, grub: out.grub!, debs };
}
