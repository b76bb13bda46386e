/**
 * The install plan: everything `hvinstall install` will do to the disks, computed up front from the
 * config and the machine's facts (pure), printable by `hvinstall plan` and applied by the steps.
 */
import type { ImageFacts } from '../render/types.js';

export type Firmware = 'efi' | 'bios';
export type PartitionTableKind = 'gpt' | 'msdos';
export type FsType = 'vfat' | 'ext4' | 'none';

export type PartitionRole = 'efi' | 'bios' | 'oem' | 'recovery' | 'state' | 'persistent' | 'data';

export interface PlannedPartition {
  number: number;
  role: PartitionRole;
  /** GPT partition name (Elemental's names: efi, bios, oem, recovery, state, persistent). */
  name: string;
  /** Filesystem label; undefined for bios_grub. */
  label?: string;
  fs: FsType;
  /** GPT type code as gdisk names it (EF00, EF02, 8300; commands.ts maps it to its GUID) or msdos type byte (83). */
  typeCode: string;
  /** Byte offsets; start and size are multiples of 1 MiB. */
  startBytes: number;
  sizeBytes: number;
  /** Logical sectors of the target disk. */
  startSector: number;
  endSector: number;
  /** Where the installed system mounts it (informational). */
  mount?: string;
  /** msdos boot flag (COS_STATE on msdos, as Elemental does). */
  bootable?: boolean;
  /** Deterministic per install, so a resumed install ends identical to an uninterrupted one. */
  partUuid: string;
  fsUuid?: string;
}

export interface PlannedDataDisk {
  path: string;
  sizeBytes: number;
  label: 'HARV_LH_DEFAULT';
  fs: 'ext4';
  fsUuid: string;
  mount: string;
}

export interface PlannedImage {
  /** Partition label the file lives on. */
  on: 'COS_STATE' | 'COS_RECOVERY';
  file: string;
  label: 'COS_ACTIVE' | 'COS_PASSIVE' | 'COS_SYSTEM';
  fs: 'ext2';
  sizeMiB: number;
}

export interface PlannedFile {
  /** Partition label the file lives on. */
  on: 'COS_OEM' | 'COS_PERSISTENT' | 'COS_STATE';
  /** Path relative to the partition root. */
  path: string;
  mode: number;
  what: string;
}

export type StepName =
  | 'guard'
  | 'clear'
  | 'partition'
  | 'format'
  | 'verify'
  | 'deploy'
  | 'bootloader'
  | 'oem'
  | 'persistent'
  | 'agent'
  | 'chroot'
  | 'finish';

export interface PlannedStep {
  name: StepName;
  description: string;
}

export interface InstallPlan {
  /** sha256 over everything that shapes the disk; a journal only resumes a plan with the same digest. */
  digest: string;
  device: string;
  deviceSizeBytes: number;
  logicalSectorSize: number;
  firmware: Firmware;
  table: PartitionTableKind;
  diskGuid: string;
  role: string;
  mode: string;
  partitions: PlannedPartition[];
  dataDisk?: PlannedDataDisk;
  /** Other disks to wipe (wipe_disks_list / wipe_all_disks). */
  wipeDisks: string[];
  systemSizeMiB: number;
  images: PlannedImage[];
  files: PlannedFile[];
  /** Directories created under COS_PERSISTENT/.state (<path-with-dashes>.bind). */
  persistentStatePaths: string[];
  steps: PlannedStep[];
  /** Things the operator should know that do not stop the install. */
  notes: string[];
  /** Bytes destroyed: a list of what is on the disks now (for the confirmation prompt). */
  destroys: string[];
  /** What the OS image brings (who bootstraps, its release metadata), when the source was inspected; the oem step renders with it. */
  image?: ImageFacts;
  /** The disks the config's rules chose, with every disk and why (install.device_selector, data_disk_selector). */
  diskChoices?: import('../preflight/disk-select.js').DiskChoice[];
  /** The boot chain the bootloader step installs (the image's or hvinstall's own), when the source was inspected. */
  bootChain?: import('../bootloader/image-chain.js').BootChainChoice;
}
