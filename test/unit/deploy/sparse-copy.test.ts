import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { mkdtemp, open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chunkedDigestOf, DIGEST_CHUNK } from '../../../node/image-digest.js';
import { copyImage, dataRuns, imageDigest } from '../../../installer/deploy/sparse-copy.js';

const MiB = 1024 * 1024;
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'hv-sparse-copy-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A sparse file of `size` bytes with the given pieces written (no fsync: the kernel still holds them). */
async function sparseFile(name: string, size: number, pieces: Array<[number, Buffer]>, where = dir): Promise<string> {
  const file = path.join(where, name);
  const fh = await open(file, 'w');
  await fh.truncate(size);
  for (const [at, data] of pieces) await fh.write(data, 0, data.length, at);
  await fh.close();
  return file;
}

const noise = (n: number, seed: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => ((i * 31 + seed) % 251) + 1));

describe('copyImage', () => {
  it('copies data and holes exactly, relabels in the stream, and digests what it read and wrote', async () => {
    // Data in chunk 0 (with the "label" at 1024+120), a run across the chunk 2/3 boundary, a
    // lone byte in the last, unaligned chunk (that tail cannot go through O_DIRECT).
    const size = 5 * DIGEST_CHUNK + 12345;
    const src = await sparseFile('src.img', size, [
      [0, noise(8192, 1)],
      [3 * DIGEST_CHUNK - 70_000, noise(150_000, 2)],
      [size - 1, Buffer.from([9])],
    ]);
    const relabel = { label: 'COS_PASSIVE', offsets: [1024 + 120] };
    const r = await copyImage(src, [{ path: path.join(dir, 'a.img'), relabel }, { path: path.join(dir, 'b.img') }]);

    const source = await readFile(src);
    const expectedA = Buffer.from(source);
    Buffer.from('COS_PASSIVE'.padEnd(16, '\0')).copy(expectedA, 1024 + 120);
    const [a, b] = [await readFile(path.join(dir, 'a.img')), await readFile(path.join(dir, 'b.img'))];
    expect(a.equals(expectedA)).toBe(true);
    expect(b.equals(source)).toBe(true);
    expect(r.sourceDigest).toBe(chunkedDigestOf(source));
    expect(r.targetDigests).toEqual([chunkedDigestOf(expectedA), chunkedDigestOf(source)]);
    expect((await stat(path.join(dir, 'b.img'))).blocks * 512).toBeLessThan(2 * MiB); // holes stay holes
    expect(await imageDigest(path.join(dir, 'a.img'))).toBe(r.targetDigests[0]);
  });

  it('reads data the kernel holds over an unwritten extent (the FIEMAP trap)', async () => {
    const file = path.join(dir, 'prealloc.img');
    await writeFile(file, '');
    await execa('fallocate', ['-l', String(3 * DIGEST_CHUNK), file]); // unwritten extents
    const fh = await open(file, 'r+');
    await fh.write(noise(4096, 3), 0, 4096, DIGEST_CHUNK + 8192); // dirty page over an unwritten extent
    await fh.close();
    const r = await copyImage(file, [{ path: path.join(dir, 'prealloc-copy.img') }]);
    const data = await readFile(file);
    expect(r.sourceDigest).toBe(chunkedDigestOf(data));
    expect((await readFile(path.join(dir, 'prealloc-copy.img'))).equals(data)).toBe(true);
  });

  it('gives the same digest where the filesystem cannot map extents (tmpfs) and reads everything', async () => {
    const shm = existsSync('/dev/shm') ? '/dev/shm' : dir;
    const pieces: Array<[number, Buffer]> = [[DIGEST_CHUNK + 5, noise(100, 4)]];
    const onTmpfs = await sparseFile(`hv-sparse-copy-${process.pid}.img`, 2 * DIGEST_CHUNK, pieces, shm);
    const onDisk = await sparseFile('same.img', 2 * DIGEST_CHUNK, pieces);
    try {
      expect(await imageDigest(onTmpfs)).toBe(await imageDigest(onDisk));
      expect(await imageDigest(onDisk)).toBe(chunkedDigestOf(await readFile(onDisk)));
    } finally {
      await rm(onTmpfs, { force: true });
    }
  });

  it('stops when aborted, and says where a target cannot be written', async () => {
    const src = await sparseFile('abort.img', 4 * DIGEST_CHUNK, [[0, noise(4096, 5)], [3 * DIGEST_CHUNK, noise(4096, 6)]]);
    await expect(copyImage(src, [{ path: path.join(dir, 'aborted.img') }], { signal: AbortSignal.abort() })).rejects.toThrow(/abort/i);
    await expect(copyImage(src, [{ path: path.join(dir, 'no-such-dir', 'x.img') }])).rejects.toThrow(/ENOENT.*no-such-dir/);
  });

  it('digests an empty file', async () => {
    const empty = path.join(dir, 'empty.img');
    await writeFile(empty, '');
    expect(await imageDigest(empty)).toBe(chunkedDigestOf(new Uint8Array(0)));
  });
});

describe('dataRuns', () => {
  it('finds non-zero 64 KiB runs and merges neighbours', () => {
    const buf = Buffer.alloc(DIGEST_CHUNK);
    buf[10] = 1;
    buf[65536 + 3] = 1;
    buf[5 * 65536] = 1;
    expect(dataRuns(buf, buf.length)).toEqual([
      [0, 2 * 65536],
      [5 * 65536, 6 * 65536],
    ]);
    expect(dataRuns(buf, 100)).toEqual([[0, 100]]);
    expect(dataRuns(Buffer.alloc(65536), 65536)).toEqual([]);
  });
});
