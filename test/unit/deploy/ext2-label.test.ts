import { describe, expect, it } from 'vitest';
import { encodeExt2Label, ext2LabelOffsets } from '../../../installer/deploy/ext2-label.js';

/** A superblock as mke2fs -t ext2 -b 4096 writes it for a 3 GiB image (the fields we read). */
function superblock(opts: { blocks?: number; roCompat?: number; compat?: number; incompat?: number; logBlock?: number; firstData?: number; perGroup?: number } = {}): Buffer {
  const sb = Buffer.alloc(1024);
  sb.writeUInt32LE(opts.blocks ?? 786432, 4);
  sb.writeUInt32LE(opts.firstData ?? 0, 20);
  sb.writeUInt32LE(opts.logBlock ?? 2, 24);
  sb.writeUInt32LE(opts.perGroup ?? 32768, 32);
  sb.writeUInt16LE(0xef53, 56);
  sb.writeUInt32LE(opts.compat ?? 0x38, 92);
  sb.writeUInt32LE(opts.incompat ?? 0x2, 96);
  sb.writeUInt32LE(opts.roCompat ?? 0x3, 100);
  return sb;
}

describe('ext2LabelOffsets', () => {
  it('lists the primary label and the sparse_super backups (groups 1 and powers of 3, 5, 7)', () => {
    const groupBytes = 32768 * 4096;
    // 786432 blocks / 32768 per group = 24 groups: backups in 1, 3, 5, 7, 9.
    expect(ext2LabelOffsets(superblock())).toEqual([1144, ...[1, 3, 5, 7, 9].map((g) => g * groupBytes + 120)]);
  });

  it('lists every group without sparse_super', () => {
    const offs = ext2LabelOffsets(superblock({ roCompat: 0x2, blocks: 4 * 32768 }));
    expect(offs).toEqual([1144, 1 * 32768 * 4096 + 120, 2 * 32768 * 4096 + 120, 3 * 32768 * 4096 + 120]);
  });

  it('handles 1 KiB blocks, where block 0 is the boot block', () => {
    const offs = ext2LabelOffsets(superblock({ logBlock: 0, firstData: 1, perGroup: 8192, blocks: 3 * 8192 + 1 }));
    expect(offs).toEqual([1144, (8192 + 1) * 1024 + 120]);
  });

  it('declines layouts tune2fs must handle: not ext2, checksummed metadata, sparse_super2, 64-bit', () => {
    expect(ext2LabelOffsets(Buffer.alloc(1024))).toBeUndefined();
    expect(ext2LabelOffsets(superblock({ roCompat: 0x403 }))).toBeUndefined();
    expect(ext2LabelOffsets(superblock({ compat: 0x238 }))).toBeUndefined();
    expect(ext2LabelOffsets(superblock({ incompat: 0x82 }))).toBeUndefined();
  });
});

describe('encodeExt2Label', () => {
  it('pads to 16 bytes and refuses longer labels', () => {
    expect(encodeExt2Label('COS_PASSIVE')).toEqual(Buffer.from('COS_PASSIVE\0\0\0\0\0'));
    expect(() => encodeExt2Label('A_LABEL_THAT_IS_TOO_LONG')).toThrow(/too long/);
  });
});
