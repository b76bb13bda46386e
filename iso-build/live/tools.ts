/**
 * What the live installer system carries besides hvinstall itself: the kernel modules it loads and
 * the host tools the install engine runs (each copied with its shared libraries).
 */

/**
 * The small initramfs (stage 1) loads these to find the boot medium and mount the live root: CD-ROM
 * (AHCI/IDE + sr), USB sticks (xHCI/EHCI/UHCI + usb-storage/uas), NVMe, virtio, SD/MMC, then
 * iso9660, squashfs, loop and overlay. Everything else comes from the live root.
 */
export const INITRAMFS_MODULES = [
  'ahci', 'ata_piix', 'ata_generic', 'sr_mod', 'sd_mod',
  'xhci_pci', 'ehci_pci', 'uhci_hcd', 'ohci_pci', 'usb_storage', 'uas',
  'nvme', 'virtio_pci', 'virtio_blk', 'virtio_scsi', 'mmc_block', 'sdhci_pci',
  'isofs', 'squashfs', 'loop', 'overlay',
] as const;

/** Loaded (with their dependencies) by the live init, in this order. */
export const LIVE_MODULES = [
  'nvme',
  'virtio_pci',
  'virtio_blk',
  'virtio_net',
  'virtio_scsi',
  'sd_mod',
  'ahci',
  // ext4's crc32c is a soft dependency, which busybox modprobe does not follow: load it first.
  'crc32c_intel',
  'crc32c_generic',
  'loop',
  'squashfs',
  // iso9660, so an automatic install loop-mounts the downloaded ISO instead of extracting it into RAM.
  'isofs',
  'overlay',
  'ext4',
  'vfat',
  'nls_cp437',
  'nls_iso8859_1',
  'efivarfs',
] as const;

/**
 * Tools the install engine runs (installer/disk, steps, deploy, bootloader), looked up on the
 * build host's PATH. Busybox provides everything else (sh, ip, udhcpc, poweroff, …) under /bb,
 * which comes last on the live PATH so these real tools always win.
 */
export const LIVE_TOOLS = [
  // partitioning and block devices
  'sgdisk', 'sfdisk', 'wipefs', 'partprobe', 'blockdev', 'lsblk', 'blkid', 'findfs', 'losetup', 'dmsetup', 'mdadm',
  // filesystems
  'mke2fs', 'mkfs.ext4', 'mkfs.ext2', 'tune2fs', 'e2fsck', 'e2label', 'debugfs', 'filefrag', 'mkfs.vfat', 'mkdosfs', 'fsck.vfat',
  'mount', 'umount', 'unsquashfs', 'mksquashfs',
  // ESP and grub
  'mtools', 'mcopy', 'mmd', 'mdir', 'mtype', 'grub-mkimage', 'grub-editenv', 'grub-install', 'grub-probe', 'grub-bios-setup',
  'grub-script-check', 'efibootmgr',
  // coreutils and friends the engine calls with GNU options
  'du', 'sync', 'cat', 'dd', 'cp', 'sha256sum', 'stat', 'truncate', 'tar', 'gzip', 'flock', 'fallocate', 'zstd', 'xorriso',
  // TPM 2.0 attestation with hvpxe (installer/remote/tpm-attest.ts; Debian's tpm2-tools, one multi-call binary)
  'tpm2_createek', 'tpm2_createak', 'tpm2_startauthsession', 'tpm2_policysecret', 'tpm2_activatecredential', 'tpm2_flushcontext',
] as const;

/**
 * Libraries loaded with dlopen, which ldd does not list: tpm2-tools' TPM access (its TCTI) for the
 * kernel's /dev/tpmrm0.
 */
export const LIVE_LIBRARIES = ['/usr/lib/x86_64-linux-gnu/libtss2-tcti-device.so.0'] as const;

/** Tools that may be absent on the build host (their callers tolerate absence). */
export const OPTIONAL_TOOLS: ReadonlySet<string> = new Set(['dmsetup', 'mdadm', 'xorriso', 'grub-probe', 'grub-install', 'grub-bios-setup', 'debugfs', 'mksquashfs']);

/**
 * Directories copied whole: grub's modules for UEFI and BIOS (read by grub-mkimage/grub-install and
 * copied to COS_STATE), and
 * glibc's iconv modules, without which mtools cannot set the FAT code page (850) and every
 * mcopy/mmd onto the ESP fails with "Error setting code page".
 */
export const LIVE_DATA_DIRS = ['/usr/lib/grub/x86_64-efi', '/usr/lib/grub/i386-pc', '/usr/share/grub', '/usr/lib/x86_64-linux-gnu/gconv'] as const;
