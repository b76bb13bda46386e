/** Harvester's partition sizes and limits (harvester/harvester-installer pkg/config/config.go, pkg/console/util.go, pkg/util/disk.go), in MiB unless named otherwise. */
export const MiB = 1024 * 1024;
export const GiB = 1024 * MiB;

export const ESP_MIB = 64;
export const BIOS_GRUB_MIB = 1;
export const OEM_MIB = 50;
export const RECOVERY_MIB = 8192;
export const STATE_MIB = 15360;
/** Harvester pins active.img to 3072 MiB (`system.size`). */
export const SYSTEM_SIZE_MIB = 3072;
/** Harvester's default persistent size when the data partition shares the disk. */
export const DEFAULT_PERSISTENT_MIB = 150 * 1024;
/** Harvester's smallest persistent_partition_size. */
export const MIN_PERSISTENT_GIB = 150;
export const MIN_PERSISTENT_MIB = MIN_PERSISTENT_GIB * 1024;
/** The "VM data" room Harvester keeps on a shared disk when computing the largest persistent size. */
export const MIN_SHARED_DATA_MIB = 51200;
/** Elemental's smallest partition. */
export const MIN_PARTITION_MIB = 64;

/** Install disk alone: OS and the Longhorn default disk on one disk (`SingleDiskMinSizeGiB`). */
export const SINGLE_DISK_MIN_GIB = 250;
/** Install disk with a separate data disk, and for the witness role (`MultipleDiskMinSizeGiB`). */
export const MULTIPLE_DISK_MIN_GIB = 180;
/** A separate Longhorn data disk (`HardMinDataDiskSizeGiB`). */
export const DATA_DISK_MIN_GIB = 50;
/** Largest disk Harvester accepts for an msdos table (bytes). */
export const MBR_MAX_BYTES = 2_199_023_255_040;

/** The install disk's minimum: the OS and data on one disk need more than the OS alone. */
export function installDiskMinGiB(layout: { separateDataDisk: boolean; witness: boolean }): number {
  return layout.separateDataDisk || layout.witness ? MULTIPLE_DISK_MIN_GIB : SINGLE_DISK_MIN_GIB;
}

/** Whole GiB, rounded down, as Harvester computes them (bytes >> 30). */
export function wholeGiB(bytes: number): number {
  return Math.floor(bytes / GiB);
}

/** Harvester's messages for the disk and partition-size rules (pkg/config/validator.go, pkg/util/disk.go). */
export const DISK_MESSAGES = {
  installDiskTooSmall: (minGiB: number) => `installation disk size is too small. Minimum ${minGiB}Gi is required`,
  dataDiskTooSmall: `data disk size is too small. Minimum ${DATA_DISK_MIN_GIB}Gi is required`,
  partitionFormat: "partition size must end with 'Mi' or 'Gi'. Decimals and negatives are not allowed",
  partitionTooSmall: `partition size is too small. Minimum ${MIN_PERSISTENT_GIB}Gi is required`,
  partitionTooLarge: (maxGiB: number) => `partition size is too large. Maximum ${maxGiB}Gi is allowed`,
} as const;

/** `ParsePartitionSize`: `persistent_partition_size` (`^\d+(Mi|Gi)$`) in MiB, or undefined when the format is wrong. */
export function parsePartitionSizeMiB(value: string): number | undefined {
  const m = /^(\d+)(Mi|Gi)$/.exec(value);
  if (!m) return undefined;
  const n = Number.parseInt(m[1]!, 10);
  return m[2] === 'Gi' ? n * 1024 : n;
}

export function roundUp(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}

export function alignDown(n: number, to: number): number {
  return Math.floor(n / to) * to;
}

/**
 * COS_STATE must hold active + passive + the transition image an upgrade builds before renaming it
 * over active (harvester#7457: a too-small COS_STATE made upgrades fail with I/O errors). Harvester's
 * 15 GiB assumes a 3 GiB image; a larger image grows the partition. 5 % for ext4 metadata, 256 MiB
 * for grub files and state.yaml.
 */
export function stateSizeMiB(systemMiB: number): number {
  return Math.max(STATE_MIB, roundUp(Math.ceil(3 * systemMiB * 1.05) + 256, 1024));
}

/** COS_RECOVERY holds recovery.img and, during `upgrade --recovery`, its transition image. */
export function recoverySizeMiB(systemMiB: number): number {
  return Math.max(RECOVERY_MIB, roundUp(Math.ceil(2 * systemMiB * 1.05) + 256, 1024));
}

/** active.img size for a source tree of this many bytes: Harvester's 3072 MiB, or the tree plus 10 % and 256 MiB. */
export function systemSizeForSourceMiB(sourceBytes: number | undefined): number {
  if (sourceBytes === undefined) return SYSTEM_SIZE_MIB;
  return Math.max(SYSTEM_SIZE_MIB, roundUp(Math.ceil((sourceBytes * 1.1) / MiB) + 256, 256));
}

export function formatBytes(bytes: number): string {
  if (bytes >= GiB && bytes % GiB === 0) return `${bytes / GiB} GiB`;
  if (bytes >= GiB) return `${(bytes / GiB).toFixed(1)} GiB`;
  if (bytes >= MiB) return `${Math.round(bytes / MiB)} MiB`;
  if (bytes >= 1024) return `${Math.round(bytes / 1024)} KiB`;
  return `${bytes} B`;
}
