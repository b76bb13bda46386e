/** Harvester's partition sizes and limits (harvester/harvester-installer pkg/config/config.go, pkg/console/util.go, pkg/util/disk.go), in MiB unless named otherwise. */
import { HvError, ExitCode } from '../../lib/errors.js';

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
export const MIN_PERSISTENT_MIB = 150 * 1024;
/** The "VM data" room Harvester keeps on a shared disk when computing the largest persistent size. */
export const MIN_SHARED_DATA_MIB = 51200;
/** Elemental's smallest partition. */
export const MIN_PARTITION_MIB = 64;

export const SINGLE_DISK_MIN_GIB = 250;
export const MULTIPLE_DISK_MIN_GIB = 180;
export const DATA_DISK_MIN_GIB = 50;
/** Largest disk Harvester accepts for an msdos table (bytes). */
export const MBR_MAX_BYTES = 2_199_023_255_040;

/** Parses `persistent_partition_size` (`^\d+(Mi|Gi)$`) into MiB, with Harvester's message. */
export function parsePartitionSizeMiB(value: string): number {
  const m = /^(\d+)(Mi|Gi)$/.exec(value);
  if (!m) {
    throw new HvError(`partition size must end with 'Mi' or 'Gi'. Decimals and negatives are not allowed`, {
      where: `install.persistent_partition_size: ${JSON.stringify(value)}`,
      hint: 'write a whole number of MiB or GiB, e.g. 150Gi',
      exitCode: ExitCode.checkFailed,
    });
  }
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
