/** Harvester's size rules and the planner's own sizing, at their boundaries, with the figures written out. */
import { describe, expect, it } from 'vitest';
import { formatBytes, parsePartitionSizeMiB, recoverySizeMiB, stateSizeMiB, systemSizeForSourceMiB, installDiskMinGiB, wholeGiB } from '../../../config/disk-sizes.js';
import { parseBlkidExport } from '../../../installer/disk/block.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

describe('parsePartitionSizeMiB (Harvester: ^\\d+(Mi|Gi)$)', () => {
  it.each([
    ['150Gi', 153600],
    ['1Gi', 1024],
    ['153600Mi', 153600],
    ['0Mi', 0],
  ])('%s is %d MiB', (v, mib) => expect(parsePartitionSizeMiB(v)).toBe(mib));
  it.each(['150', '150GB', '150gi', '1.5Gi', '-1Gi', '150Gi ', ' 150Gi', '150Gix', 'Gi', ''])('%j is refused', (v) => expect(parsePartitionSizeMiB(v)).toBeUndefined());
});

describe('image and partition sizing', () => {
  it("COS_STATE holds three images plus 5 % and 256 MiB, in whole GiB, never below Harvester's 15 GiB", () => {
    expect(stateSizeMiB(3072)).toBe(15360);
    // 3 × 5000 × 1.05 = 15750, + 256 = 16006 → 16384
    expect(stateSizeMiB(5000)).toBe(16384);
    // 3 × 4795 × 1.05 = 15104.25 → 15105, + 256 = 15361 → 16384: the 256 MiB counts
    expect(stateSizeMiB(4795)).toBe(16384);
    expect(stateSizeMiB(4794)).toBe(15360);
  });
  it("COS_RECOVERY holds two images plus 5 % and 256 MiB, never below Harvester's 8 GiB", () => {
    expect(recoverySizeMiB(3072)).toBe(8192);
    // 2 × 3780 × 1.05 = 7938, + 256 = 8194 → 9216
    expect(recoverySizeMiB(3780)).toBe(9216);
    expect(recoverySizeMiB(3779)).toBe(8192);
  });
  it('active.img: 3072 MiB, or the tree plus 10 % and 256 MiB in 256 MiB steps', () => {
    expect(systemSizeForSourceMiB(undefined)).toBe(3072);
    expect(systemSizeForSourceMiB(2 * GiB)).toBe(3072);
    // 4 GiB × 1.1 = 4505.6 → 4506, + 256 = 4762 → 4864
    expect(systemSizeForSourceMiB(4 * GiB)).toBe(4864);
    // 2560 MiB × 1.1 = 2816, + 256 = 3072 exactly
    expect(systemSizeForSourceMiB(2560 * MiB)).toBe(3072);
    expect(systemSizeForSourceMiB(2561 * MiB)).toBe(3328);
  });
  it('the install disk minimum: 250 GiB alone, 180 GiB with a data disk or as witness; whole GiB round down', () => {
    expect(installDiskMinGiB({ separateDataDisk: false, witness: false })).toBe(250);
    expect(installDiskMinGiB({ separateDataDisk: true, witness: false })).toBe(180);
    expect(installDiskMinGiB({ separateDataDisk: false, witness: true })).toBe(180);
    expect(wholeGiB(250 * GiB - 1)).toBe(249);
    expect(wholeGiB(250 * GiB)).toBe(250);
  });
});

describe('formatBytes', () => {
  it.each([
    [0, '0 B'],
    [1023, '1023 B'],
    [1024, '1 KiB'],
    [1536, '2 KiB'],
    [MiB - 1, '1024 KiB'],
    [MiB, '1 MiB'],
    [1.5 * MiB, '2 MiB'],
    [GiB - 1, '1024 MiB'],
    [GiB, '1 GiB'],
    [300 * GiB, '300 GiB'],
    [GiB + 1, '1.0 GiB'],
    [1.25 * GiB, '1.3 GiB'],
  ])('%d bytes: %s', (n, s) => expect(formatBytes(n)).toBe(s));
});

describe('parseBlkidExport', () => {
  it('skips lines without a key (=x, blank) and blocks with nothing in them', () => {
    expect(parseBlkidExport('\n\n=orphan\nDEVNAME=/dev/a\nTYPE=ext4\n\n\n=x\n\n')).toEqual([{ DEVNAME: '/dev/a', TYPE: 'ext4' }]);
    expect(parseBlkidExport('')).toEqual([]);
  });
});
