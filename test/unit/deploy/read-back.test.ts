import { afterAll, describe, expect, it } from 'vitest';
import { mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { physicalOffset, readBackDigests, readBackFile, readBackImage, readBackImages, ReadBackMismatch } from '../../../installer/deploy/read-back.js';
import { Sha256Pool } from '../../../installer/deploy/hash-pool.js';

const MiB = 1024 * 1024;
const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/** The chunked digest computed here, from the bytes, as coreutils would (split | sha256sum | sha256sum). */
function chunks(data: Buffer): { digest: string; chunks: string[] } {
  const sums: string[] = [];
  for (let at = 0; at < data.length; at += 4 * MiB) sums.push(createHash('sha256').update(data.subarray(at, at + 4 * MiB)).digest('hex'));
  return { digest: `sha256-4m:${createHash('sha256').update(sums.map((s) => `${s}\n`).join('')).digest('hex')}`, chunks: sums };
}

async function image(bytes: Buffer): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-readback-'));
  dirs.push(dir);
  const file = path.join(dir, 'img');
  await writeFile(file, bytes);
  return file;
}

describe('readBackImage', () => {
  it('returns the digest of an image that holds what was written (an unaligned tail too)', async () => {
    const data = randomBytes(9 * MiB + 1234);
    const file = await image(data);
    const pool = new Sha256Pool(1);
    try {
      const want = chunks(data);
      expect(await readBackImage({ path: file, name: 'cOS/x.img', sizeBytes: data.length, ...want }, { pool })).toBe(want.digest);
    } finally {
      await pool.close();
    }
  });

  it('names the image, the first bad 4 MiB chunk and the device when one byte differs', async () => {
    const data = randomBytes(12 * MiB);
    const want = chunks(data);
    const bad = Buffer.from(data);
    bad[9 * MiB + 77] ^= 0xff;
    const file = await image(bad);
    const pool = new Sha256Pool(1);
    try {
      const err = await readBackImage({ path: file, name: 'cOS/passive.img', sizeBytes: data.length, ...want }, { pool, device: '/dev/sdz4' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ReadBackMismatch);
      expect((err as ReadBackMismatch).offset).toBe(8 * MiB);
      expect((err as Error).message).toMatch(/^cOS\/passive\.img read back from \/dev\/sdz4 differs from what was written from byte 8388608 \(4 MiB chunk 2\)/);
    } finally {
      await pool.close();
    }
  });

  it('a size other than the one written is a mismatch too', async () => {
    const data = randomBytes(MiB);
    const file = await image(data.subarray(0, MiB - 4096));
    const pool = new Sha256Pool(1);
    try {
      await expect(readBackImage({ path: file, name: 'cOS/active.img', sizeBytes: MiB, ...chunks(data) }, { pool, device: '/dev/sdz4' })).rejects.toThrow('cOS/active.img on /dev/sdz4 is 1044480 bytes, 1048576 were written');
    } finally {
      await pool.close();
    }
  });

  it('a hole where data was written reads as zeros and is found', async () => {
    const data = randomBytes(8 * MiB);
    const file = await image(Buffer.alloc(0));
    const fh = await open(file, 'r+');
    await fh.write(data, 0, 4 * MiB, 0);
    await fh.truncate(8 * MiB);
    await fh.close();
    const pool = new Sha256Pool(1);
    try {
      await expect(readBackImage({ path: file, name: 'img', sizeBytes: 8 * MiB, ...chunks(data) }, { pool })).rejects.toThrow('from byte 4194304 (4 MiB chunk 1)');
    } finally {
      await pool.close();
    }
  });
});

describe('readBackImages: several images read together', () => {
  /** An image like active.img, and two copies of it with other bytes in one chunk (a relabel). */
  function family(): Buffer[] {
    const active = randomBytes(10 * MiB + 4096);
    const passive = Buffer.from(active);
    passive.write('COS_PASSIVE', 1024 + 120);
    const recovery = Buffer.from(active);
    recovery.write('COS_SYSTEM', 1024 + 120);
    recovery.write('COS_SYSTEM', 8 * MiB + 5);
    return [active, passive, recovery];
  }
  const expected = (files: string[], data: Buffer[], name = (k: number) => `img${k}`) =>
    data.map((d, k) => ({ path: files[k]!, name: name(k), sizeBytes: d.length, ...chunks(d) }));

  it("returns each image's own digest, as read one by one, where their bytes are equal and where they differ", async () => {
    const data = family();
    const files = await Promise.all(data.map(image));
    const pool = new Sha256Pool(2);
    try {
      expect(await readBackImages(expected(files, data), { pool })).toEqual(data.map((d) => chunks(d).digest));
    } finally {
      await pool.close();
    }
  });

  it('a corrupted first image does not lend its hash to the equal copies: each is digested as the disk holds it', async () => {
    const data = family();
    const bad = Buffer.from(data[0]!);
    bad[4 * MiB + 9] ^= 0x01;
    const files = await Promise.all([bad, data[1]!, data[2]!].map(image));
    const pool = new Sha256Pool(2);
    try {
      const got = await readBackDigests(files, { pool });
      expect(got.map((g) => g.digest)).toEqual([chunks(bad).digest, chunks(data[1]!).digest, chunks(data[2]!).digest]);
      const err = await readBackImages(expected(files, data, (k) => ['cOS/active.img', 'cOS/passive.img', 'cOS/recovery.img'][k]!), { pool, device: '/dev/sdz4' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ReadBackMismatch);
      expect((err as Error).message).toMatch(/^cOS\/active\.img read back from \/dev\/sdz4 differs from what was written from byte 4194304 \(4 MiB chunk 1\)/);
    } finally {
      await pool.close();
    }
  });

  it('names a later image that differs from the first where it should equal it, with its own device', async () => {
    const data = family();
    const bad = Buffer.from(data[2]!);
    bad[2 * MiB] ^= 0x80;
    const files = await Promise.all([data[0]!, data[1]!, bad].map(image));
    const pool = new Sha256Pool(1);
    try {
      const want = expected(files, data, (k) => `cOS/${k}.img`).map((e, k) => ({ ...e, device: k === 2 ? '/dev/sdz2' : '/dev/sdz4' }));
      const err = await readBackImages(want, { pool }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ReadBackMismatch);
      expect((err as ReadBackMismatch).file).toBe('cOS/2.img');
      expect((err as Error).message).toMatch(/^cOS\/2\.img read back from \/dev\/sdz2 differs from what was written from byte 0 \(4 MiB chunk 0\)/);
    } finally {
      await pool.close();
    }
  });

  it('a hole in one image where the others hold data is found', async () => {
    const data = family();
    const files = await Promise.all(data.map(image));
    const fh = await open(files[1]!, 'r+');
    await fh.truncate(8 * MiB);
    await fh.truncate(data[1]!.length);
    await fh.close();
    const pool = new Sha256Pool(1);
    try {
      await expect(readBackImages(expected(files, data), { pool })).rejects.toThrow('img1 read back from the disk differs from what was written from byte 8388608 (4 MiB chunk 2)');
    } finally {
      await pool.close();
    }
  });
});

describe('readBackFile', () => {
  it('accepts the bytes meant and names the file when they differ', async () => {
    const file = await image(Buffer.from('state: yes\n'));
    await expect(readBackFile(file, 'state.yaml', 'state: yes\n')).resolves.toBeUndefined();
    await expect(readBackFile(file, 'state.yaml', 'state: no\n', '/dev/sdz4')).rejects.toThrow(/^state\.yaml read back from \/dev\/sdz4 differs from what was written: sha256 /);
  });
});

describe('physicalOffset', () => {
  const frag = `Filesystem type is: ef53
File size of x is 16777216 (4096 blocks of 4096 bytes)
 ext:     logical_offset:        physical_offset: length:   expected: flags:
   0:        0..    1023:      34816..     35839:   1024:
   1:     2048..    2559:      40960..     41471:    512:      35840: last,eof
x: 2 extents found
`;
  it('maps a file byte to its partition byte through the extent holding it', () => {
    expect(physicalOffset(frag, 0)).toBe(34816 * 4096);
    expect(physicalOffset(frag, 1023 * 4096 + 5)).toBe(35839 * 4096 + 5);
    expect(physicalOffset(frag, 2050 * 4096 + 1)).toBe((40960 + 2) * 4096 + 1);
  });
  it('a byte in a hole has no place on the partition', () => {
    expect(physicalOffset(frag, 1500 * 4096)).toBeUndefined();
    expect(physicalOffset('not filefrag', 0)).toBeUndefined();
  });
});
