/**
 * The seam between the install pipeline (installer/disk + installer/steps) and the OS deploy and
 * bootloader code (installer/deploy, installer/bootloader). Both sides code against these types.
 */

/** Progress callback for long operations: bytes done of total, for events and rate display. */
export type ByteProgress = (done: number, total: number) => void;

/** Where the OS comes from: a directory tree, a squashfs file, or the live root (`/` by default). */
export type OsSource = { kind: 'dir'; path: string } | { kind: 'squashfs'; path: string };

/** One entry of the source's content manifest (installer/deploy/source-digest.ts). */
export interface SourceEntry {
  type: 'f' | 'd' | 'l' | 'c' | 'b' | 'p' | 's';
  mode: number;
  uid: number;
  gid: number;
  size: number;
  /** Regular files: sha256 (hex) of the contents. */
  sha256?: string;
  /** Symlinks: the target. */
  link?: string;
}

/** The OS source's content, digested once before any disk is touched (installer/deploy/source-digest.ts). */
export interface SourceDigests {
  source: OsSource;
  /** `sha256:<hex>` over the sorted content manifest: what state.yaml records as read back. */
  digest: string;
  /** A squashfs source: the sha256 (hex) of the file itself. */
  fileSha256?: string;
  /** Relative path → entry, for every entry below the root. */
  entries: Map<string, SourceEntry>;
}

export interface ImageRecord {
  /** Path relative to its partition root, e.g. cOS/active.img. */
  file: string;
  label: 'COS_ACTIVE' | 'COS_PASSIVE' | 'COS_SYSTEM';
  fs: 'ext2';
  sizeBytes: number;
  /** Chunked sha256 of the image file (`sha256-4m:<hex>`, see node/image-digest.ts). */
  digest: string;
}

export interface DeployRequest {
  /** Mounted COS_STATE and COS_RECOVERY filesystems (directories). */
  stateDir: string;
  recoveryDir: string;
  source: OsSource;
  /** active.img size; default max(3072 MiB, source size + headroom). */
  systemSizeMiB?: number;
  /** A scratch directory on the same host (for mount points of the image being filled). */
  workDir: string;
  onProgress?: ByteProgress;
  signal?: AbortSignal;
  /** Reads of the source (often the boot medium) that move no byte for this long fail as a stall. */
  stallTimeoutMs?: number;
  /**
   * The source's content digests taken before the install began (installer/deploy/source-digest.ts):
   * active.img's tree is checked against these. Absent: taken when deploy starts.
   */
  sourceDigests?: SourceDigests;
  /** The COS_STATE and COS_RECOVERY devices, named when what is read back differs. */
  stateDevice?: string;
  recoveryDevice?: string;
}

export interface DeployResult {
  active: ImageRecord;
  passive: ImageRecord;
  recovery: ImageRecord;
  /** sha256 of the source (squashfs file) or of a manifest of the tree. */
  sourceDigest: string;
  /** The source's content digest (`sha256:…`, source-digest.ts) active.img's tree was checked against. */
  contentDigest: string;
}

export interface BootloaderRequest {
  firmware: 'efi' | 'bios';
  /** Whole target disk (e.g. /dev/loop3) — for i386-pc grub-install. */
  device: string;
  /** The COS_GRUB ESP partition device (efi). Written with mtools, never mounted. */
  espDevice?: string;
  /** Mounted COS_STATE (grub2/ lives here), COS_OEM (grubenv, grubcustom). */
  stateDir: string;
  oemDir: string;
  /** Extra kernel arguments (third_party_kernel_args in /oem/grubenv). */
  thirdPartyKernelArgs?: string;
  /** The TTY for console= (install.tty), default tty1. */
  tty?: string;
  /**
   * Devices among which each boot label (COS_STATE, COS_OEM, COS_RECOVERY) must be unique.
   * Default: every block device blkid sees (production). Tests on a shared machine pass their own.
   */
  labelCheckDevices?: string[];
  /** The boot chain chosen from the image (bootloader/image-chain.ts); absent: hvinstall's own. */
  bootChain?: import('../bootloader/image-chain.js').BootChainChoice;
  /** The install source, read for the image's boot chain. */
  source?: OsSource;
  signal?: AbortSignal;
}
