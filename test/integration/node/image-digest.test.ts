/**
 * fileChunkDigest on a real ext4 filesystem (root: a loop mount), where FIEMAP maps the file: only
 * the chunks with an extent are read (written or unwritten), and the digest is coreutils' one.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdir, open } from 'node:fs/promises';
import path from 'node:path';
import { DIGEST_CHUNK, fileChunkDigest } from '../../../node/image-digest.js';
import { Cleanup, sh, tempDir } from '../install/helpers.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

const coreutilsDigest = async (file: string): Promise<string> =>
  `sha256-4m:${(await sh('sh', ['-c', `split -b ${DIGEST_CHUNK} --filter='sha256sum | cut -c1-64' "$1" | sha256sum | cut -c1-64`, 'sh', file])).stdout.trim()}`;

describe('fileChunkDigest on ext4', () => {
  it('reads only the chunks FIEMAP maps (written or unwritten), and digests the holes as zeros', async () => {
    const dir = await tempDir(cleanup, 'hv-digest-');
    const mnt = path.join(dir, 'mnt');
    await mkdir(mnt);
    await sh('truncate', ['-s', '128M', path.join(dir, 'fs.img')]);
    await sh('mkfs.ext4', ['-q', '-F', path.join(dir, 'fs.img')]);
    await sh('mount', ['-o', 'loop', path.join(dir, 'fs.img'), mnt]);
    cleanup.add(() => sh('umount', ['-l', mnt], { allowFailure: true }));

    // 16 chunks, the last one short: data in chunk 0, across chunks 6 and 7, in the last; chunk 11
    // allocated but unwritten (fallocate); the rest holes.
    const file = path.join(mnt, 'active.img');
    const fh = await open(file, 'w');
    await fh.truncate(DIGEST_CHUNK * 16 - 4096);
    await fh.write(Buffer.from('superblock'), 0, 10, 1024);
    await fh.write(Buffer.alloc(8192, 0xa5), 0, 8192, DIGEST_CHUNK * 7 - 4096);
    await fh.write(Buffer.from('the end'), 0, 7, DIGEST_CHUNK * 16 - 4096 - 7);
    await fh.close();
    await sh('fallocate', ['-o', String(DIGEST_CHUNK * 11), '-l', '65536', '-n', file]);
    // Written back, so the extents are on the disk and not only delayed allocations (both count as data).
    await sh('sync', ['-f', file]);

    const got = await fileChunkDigest(file);
    expect(got.digest).toBe(await coreutilsDigest(file));
    expect(got.chunks).toBe(16);
    expect(got.chunksRead).toBe(5); // 0, 6, 7, 11, 15
  });
});
