import { describe, expect, it } from 'vitest';
import { chunksWithData, DIGEST_CHUNK } from '../../../node/image-digest.js';
import { parseFilefrag } from '../../../node/file-extents.js';

// filefrag 1.47.0 on an ext2 image mke2fs -d just wrote (trimmed): written, unwritten and the last extent.
const MKE2FS_IMAGE = `Filesystem type is: ef53
File size of state/cOS/active.img is 3221225472 (786432 blocks of 4096 bytes)
 ext:     logical_offset:        physical_offset: length:   expected: flags:
   0:        0..     194:      37752..     37946:    195:            
   1:      195..     215:      33648..     33668:     21:      37947:
   2:      216..     365:      33669..     33818:    150:             unwritten
   5:      372..   26623:      37952..     64203:  26252:      33620:
  65:   786416..  786431:      33632..     33647:     16:      70331: last,unwritten,eof
state/cOS/active.img: 60 extents found
`;

describe('parseFilefrag', () => {
  it('reads every extent as a byte range, unwritten ones included (a dirty page may sit on them)', () => {
    expect(parseFilefrag(MKE2FS_IMAGE, 3221225472)).toEqual([
      [0, 195 * 4096],
      [195 * 4096, 216 * 4096],
      [216 * 4096, 366 * 4096],
      [372 * 4096, 26624 * 4096],
      [786416 * 4096, 3221225472],
    ]);
  });

  it('reads delayed-allocation extents (written, not yet on disk)', () => {
    const text = `Filesystem type is: ef53
File size of t.img is 8388608 (2048 blocks of 4096 bytes)
 ext:     logical_offset:        physical_offset: length:   expected: flags:
   0:      160..     175:          0..         0:      0:             last,unknown_loc,delalloc
t.img: 1 extent found
`;
    expect(parseFilefrag(text, 8388608)).toEqual([[160 * 4096, 176 * 4096]]);
  });

  it('knows a file of holes only', () => {
    expect(parseFilefrag('Filesystem type is: ef53\nFile size of h.img is 8388608 (2048 blocks of 4096 bytes)\nh.img: 0 extents found\n', 8388608)).toEqual([]);
  });

  it('gives up (so the caller reads everything) on output it does not know', () => {
    expect(parseFilefrag('Filesystem type is: 1021994\nFile size of t.img is 8388608 (2048 blocks of 4096 bytes)\nt.img: FIBMAP/FIEMAP unsupported\n', 8388608)).toBeUndefined();
    expect(parseFilefrag(MKE2FS_IMAGE, 4096)).toBeUndefined(); // the file changed size since
    expect(parseFilefrag('', 10)).toBeUndefined();
    expect(parseFilefrag(MKE2FS_IMAGE.replace('  0:        0..     194:', '  0:      194..       0:'), 3221225472)).toBeUndefined();
  });
});

describe('chunksWithData', () => {
  it('marks every chunk an extent touches', () => {
    const size = 4 * DIGEST_CHUNK + 100;
    expect(chunksWithData([[0, 4096], [DIGEST_CHUNK * 2 - 1, DIGEST_CHUNK * 2 + 1], [size - 1, size]], size)).toEqual([true, true, true, false, true]);
    expect(chunksWithData([], size)).toEqual([false, false, false, false, false]);
  });

  it('marks every chunk when the extents are unknown', () => {
    expect(chunksWithData(undefined, 2 * DIGEST_CHUNK)).toEqual([true, true]);
  });
});
