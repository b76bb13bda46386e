import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { HvError } from '../../../lib/errors.js';
import { DEFAULT_SYSTEM_SIZE_MIB, IMAGE_HEADROOM_MIB, MiB, planImageGeometry } from '../../../installer/deploy/image-size.js';
import { fuzzSeed } from '../../fuzz-seed.js';

const small = { fileBytes: 20 * MiB, blockBytes: 21 * MiB, entries: 500 };

describe('planImageGeometry', () => {
  it('uses the 3072 MiB default for a tree that fits', () => {
    const g = planImageGeometry(small);
    expect(g.sizeBytes).toBe(DEFAULT_SYSTEM_SIZE_MIB * MiB);
    expect(g.inodes).toBe(Math.floor((3072 * MiB) / 16384));
  });

  it('grows past the default for a tree larger than it, with headroom', () => {
    const big = { fileBytes: 4000 * MiB, blockBytes: 4000 * MiB, entries: 100_000 };
    const g = planImageGeometry(big);
    expect(g.sizeBytes).toBeGreaterThan(4000 * MiB + IMAGE_HEADROOM_MIB * MiB);
    expect(g.sizeBytes % MiB).toBe(0);
    expect(g.sizeBytes).toBe(g.neededBytes);
  });

  it('honours system.size when the tree fits in it', () => {
    expect(planImageGeometry(small, 512).sizeBytes).toBe(512 * MiB);
  });

  it('refuses a system.size that cannot hold the tree, naming the size needed', () => {
    let err: unknown;
    try {
      planImageGeometry({ fileBytes: 900 * MiB, blockBytes: 900 * MiB, entries: 10 }, 900);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(HvError);
    expect((err as HvError).message).toMatch(/needs 9\d\d MiB in active.img but system.size is 900 MiB/);
    expect((err as HvError).hint).toMatch(/raise system.size to at least/);
    expect((err as HvError).exitCode).toBe(1);
  });

  it('refuses a size that is not a positive whole number of MiB', () => {
    expect(() => planImageGeometry(small, 0)).toThrow(/positive whole number/);
    expect(() => planImageGeometry(small, 10.5)).toThrow(/positive whole number/);
  });

  it('gives many-small-file trees enough inodes', () => {
    const g = planImageGeometry({ fileBytes: 1 * MiB, blockBytes: 800 * MiB, entries: 400_000 });
    expect(g.inodes).toBeGreaterThanOrEqual(400_000);
  });

  it('always yields whole MiB no smaller than the tree plus headroom (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 20_000 }), fc.integer({ min: 1, max: 2_000_000 }), (mib, entries) => {
        const g = planImageGeometry({ fileBytes: mib * MiB, blockBytes: mib * MiB, entries });
        return g.sizeBytes % MiB === 0 && g.sizeBytes >= mib * MiB + IMAGE_HEADROOM_MIB * MiB && g.inodes >= entries;
      }),
      { seed: fuzzSeed('image geometry: whole MiB, tree plus headroom, enough inodes') },
    );
  });
});
