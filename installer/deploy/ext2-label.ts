/**
 * Where an ext2 filesystem keeps its label: the primary superblock and every backup copy. Lets a
 * copy be relabelled while it is streamed (so its checksum is taken in the same pass) with the
 * same bytes `tune2fs -L` writes. Returns undefined for layouts it does not cover (checksummed
 * metadata, sparse_super2, 64-bit block counts), and the caller falls back to tune2fs.
 */

const SUPERBLOCK_OFFSET = 1024;
const MAGIC = 0xef53;
const LABEL_FIELD = 120;
const LABEL_LENGTH = 16;
const COMPAT_SPARSE_SUPER2 = 0x200;
const INCOMPAT_64BIT = 0x80;
const RO_COMPAT_SPARSE_SUPER = 0x1;
const RO_COMPAT_METADATA_CSUM = 0x400;

/** Byte offsets (in the image) of every copy of the 16-byte label field, ascending. */
export function ext2LabelOffsets(superblock: Buffer): number[] | undefined {
  if (superblock.length < 1024 || superblock.readUInt16LE(56) !== MAGIC) return undefined;
  const blocksCount = superblock.readUInt32LE(4);
  const firstDataBlock = superblock.readUInt32LE(20);
  const blockSize = 1024 << superblock.readUInt32LE(24);
  const blocksPerGroup = superblock.readUInt32LE(32);
  const compat = superblock.readUInt32LE(92);
  const incompat = superblock.readUInt32LE(96);
  const roCompat = superblock.readUInt32LE(100);
  if (compat & COMPAT_SPARSE_SUPER2 || incompat & INCOMPAT_64BIT || roCompat & RO_COMPAT_METADATA_CSUM) return undefined;
  if (blocksPerGroup === 0) return undefined;
  const groups = Math.ceil((blocksCount - firstDataBlock) / blocksPerGroup);
  const backups = new Set<number>();
  if (roCompat & RO_COMPAT_SPARSE_SUPER) {
    if (groups > 1) backups.add(1);
    for (const base of [3, 5, 7]) for (let g = base; g < groups; g *= base) backups.add(g);
  } else {
    for (let g = 1; g < groups; g++) backups.add(g);
  }
  const offsets = [SUPERBLOCK_OFFSET + LABEL_FIELD];
  for (const g of [...backups].sort((a, b) => a - b)) offsets.push((g * blocksPerGroup + firstDataBlock) * blockSize + LABEL_FIELD);
  return offsets;
}

/** The label field's bytes: the label, NUL-padded to 16 bytes. */
export function encodeExt2Label(label: string): Buffer {
  const b = Buffer.alloc(LABEL_LENGTH);
  if (Buffer.byteLength(label) > LABEL_LENGTH) throw new Error(`ext2 label too long: ${label}`);
  b.write(label, 'utf8');
  return b;
}

export const EXT2_LABEL_LENGTH = LABEL_LENGTH;
