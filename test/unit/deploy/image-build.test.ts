import { describe, expect, it } from 'vitest';
import { derivedUuid, e2fsprogsEnv, mkfsExt2Args } from '../../../installer/deploy/image-build.js';
import { dataRuns } from '../../../installer/deploy/sparse-copy.js';

describe('reproducible ext2 image arguments', () => {
  const spec = { tree: '/src', file: '/state/cOS/.active.img.partial', label: 'COS_ACTIVE' as const, sizeBytes: 3072 * 1024 * 1024, inodes: 196608, sourceDigest: 'ab'.repeat(32), epoch: 1700000000 };

  it('derives a valid, stable UUID per source and purpose', () => {
    const u = derivedUuid(spec.sourceDigest, 'fs-uuid');
    expect(u).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(derivedUuid(spec.sourceDigest, 'fs-uuid')).toBe(u);
    expect(derivedUuid(spec.sourceDigest, 'hash-seed')).not.toBe(u);
    expect(derivedUuid('cd'.repeat(32), 'fs-uuid')).not.toBe(u);
  });

  it('builds an ext2 image from the tree with the label, size and fixed identity', () => {
    const args = mkfsExt2Args(spec);
    expect(args.slice(0, 2)).toEqual(['-t', 'ext2']);
    expect(args).toContain('-d');
    expect(args[args.indexOf('-d') + 1]).toBe('/src');
    expect(args[args.indexOf('-L') + 1]).toBe('COS_ACTIVE');
    expect(args[args.indexOf('-U') + 1]).toBe(derivedUuid(spec.sourceDigest, 'fs-uuid'));
    expect(args[args.indexOf('-E') + 1]).toBe(`hash_seed=${derivedUuid(spec.sourceDigest, 'hash-seed')}`);
    expect(args[args.indexOf('-N') + 1]).toBe('196608');
    expect(args.slice(-2)).toEqual([spec.file, `${3072 * 1024}k`]);
    expect(e2fsprogsEnv(spec.epoch)).toEqual({ E2FSPROGS_FAKE_TIME: '1700000000' });
  });
});

describe('dataRuns (hole detection for sparse copies)', () => {
  const K64 = 64 * 1024;

  it('finds nothing in zeros', () => {
    expect(dataRuns(Buffer.alloc(4 * K64), 4 * K64)).toEqual([]);
  });

  it('keeps 64 KiB grains holding any non-zero byte, merging neighbours', () => {
    const b = Buffer.alloc(6 * K64);
    b[10] = 1; // grain 0
    b[K64 + 5] = 1; // grain 1 (merges with 0)
    b[4 * K64 + K64 - 1] = 1; // grain 4
    expect(dataRuns(b, b.length)).toEqual([
      [0, 2 * K64],
      [4 * K64, 5 * K64],
    ]);
  });

  it('handles a short last chunk and ignores bytes past length', () => {
    const b = Buffer.alloc(2 * K64);
    b[K64 + 100] = 9;
    expect(dataRuns(b, K64 + 200)).toEqual([[K64, K64 + 200]]);
    expect(dataRuns(b, K64 + 50)).toEqual([]);
  });
});
