import { HvError, ExitCode } from '../../lib/errors.js';

export const MiB = 1024 * 1024;
/** Harvester pins system.size to 3072 MiB (harvester/harvester-installer pkg/config/cos.go ConvertToElementalConfig). */
export const DEFAULT_SYSTEM_SIZE_MIB = 3072;
/** Elemental's ImgOverhead: room above the tree for logs, upgrades in place and ext2 metadata. */
export const IMAGE_HEADROOM_MIB = 256;
export const EXT2_BLOCK_SIZE = 4096;
export const EXT2_INODE_SIZE = 256;
/** mke2fs's default bytes-per-inode for a filesystem of this size ("default" usage type). */
const DEFAULT_INODE_RATIO = 16384;

/** What the source tree holds, measured by walking it. */
export interface TreeMeasure {
  /** Sum of regular file sizes (apparent). */
  fileBytes: number;
  /** Space the tree takes in 4 KiB blocks: files rounded up, one block per directory and long symlink. */
  blockBytes: number;
  /** Number of entries (files, directories, links, devices): each needs an inode. */
  entries: number;
}

/** An explicit system.size must hold the tree plus 5% and this much; the headroom is for auto-sizing. */
const FIT_SLACK_MIB = 8;

export interface ImageGeometry {
  sizeBytes: number;
  /** Inodes to ask mke2fs for: the default ratio, or more when the tree has many small files. */
  inodes: number;
  /** The size auto-sizing would pick for the tree (tree, metadata and headroom). */
  neededBytes: number;
}

/**
 * Size of active.img: system.size when given (refusing a size that cannot hold the tree with a
 * little slack), else the larger of the 3072 MiB default and the tree plus headroom. Whole MiB, so partition and
 * image arithmetic stays exact.
 */
export function planImageGeometry(tree: TreeMeasure, systemSizeMiB?: number): ImageGeometry {
  // Inodes: 25% spare over the tree's entries, never fewer than mke2fs's default for the size.
  const treeInodes = Math.ceil(tree.entries * 1.25) + 1024;
  // ext2 metadata: inode tables, plus ~1.5% for bitmaps, group descriptors and indirect blocks.
  const metadata = treeInodes * EXT2_INODE_SIZE + Math.ceil(tree.blockBytes * 0.015);
  const fitBytes = roundUpMiB((tree.blockBytes + metadata) * 1.05) + FIT_SLACK_MIB * MiB;
  const neededBytes = roundUpMiB(tree.blockBytes + metadata) + IMAGE_HEADROOM_MIB * MiB;
  let sizeBytes: number;
  if (systemSizeMiB !== undefined) {
    if (!Number.isInteger(systemSizeMiB) || systemSizeMiB <= 0) {
      throw new HvError(`system size must be a positive whole number of MiB, got ${systemSizeMiB}`, {
        where: 'deploy: system.size',
        exitCode: ExitCode.usage,
      });
    }
    sizeBytes = systemSizeMiB * MiB;
    if (sizeBytes < fitBytes) {
      throw new HvError(
        `the OS tree needs ${Math.ceil(fitBytes / MiB)} MiB in active.img but system.size is ${systemSizeMiB} MiB`,
        {
          where: 'deploy: system.size',
          hint: `raise system.size to at least ${Math.ceil(neededBytes / MiB)} MiB, which leaves the usual ${IMAGE_HEADROOM_MIB} MiB free (COS_STATE must hold two images of that size)`,
          exitCode: ExitCode.checkFailed,
        },
      );
    }
  } else {
    sizeBytes = Math.max(DEFAULT_SYSTEM_SIZE_MIB * MiB, neededBytes);
  }
  const inodes = Math.max(Math.floor(sizeBytes / DEFAULT_INODE_RATIO), treeInodes);
  return { sizeBytes, inodes, neededBytes };
}

export function roundUpMiB(bytes: number): number {
  return Math.ceil(bytes / MiB) * MiB;
}

export function blocksFor(bytes: number): number {
  return Math.ceil(bytes / EXT2_BLOCK_SIZE) * EXT2_BLOCK_SIZE;
}
