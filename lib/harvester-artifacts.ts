/**
 * How Harvester names its release artifacts (harvester/harvester-installer
 * scripts/package-harvester-os): `harvester-<version>-{vmlinuz,initrd}-<arch>`,
 * `harvester-<version>-rootfs-<arch>.squashfs`, `harvester-<version>-<arch>.iso`, and one checksum
 * file `harvester-<version>-<arch>.sha512` (`sha512sum` lines for all of them). The ISO build
 * writes its artifacts under these names, and `hvpxe init`'s example profiles name them, so an
 * operator's scripts and docs for Harvester fit both. Pure.
 */
export const EXAMPLE_HARVESTER_VERSION = 'v1.8.0';

export interface HarvesterArtifactNames {
  kernel: string;
  initrd: string;
  rootfs: string;
  iso: string;
  sha512: string;
  /** Ours, next to Harvester's .sha512: the same list in sha256 (what hvpxe's profiles.yaml takes). */
  sha256: string;
}

export function harvesterArtifactNames(version: string, arch = 'amd64'): HarvesterArtifactNames {
  const prefix = `harvester-${version}`;
  return {
    kernel: `${prefix}-vmlinuz-${arch}`,
    initrd: `${prefix}-initrd-${arch}`,
    rootfs: `${prefix}-rootfs-${arch}.squashfs`,
    iso: `${prefix}-${arch}.iso`,
    sha512: `${prefix}-${arch}.sha512`,
    sha256: `${prefix}-${arch}.sha256`,
  };
}

/** A version as it may appear in a file name: v1.8.0, v1.8.0-rc1, master-abc123. Pure. */
export function isArtifactVersion(v: string): boolean {
  return /^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$/.test(v);
}
