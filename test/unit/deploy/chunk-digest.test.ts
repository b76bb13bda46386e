import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { chunkCount, chunkedDigestOf, chunkRange, combineChunkSha256s, DIGEST_CHUNK, DIGEST_RE, fileChunkDigest, zeroChunkSha256 } from '../../../node/image-digest.js';

const sha = (b: Uint8Array | string): string => createHash('sha256').update(b).digest('hex');

describe('the chunked image digest', () => {
  it('is sha256 over the 4 MiB chunks\' sha256s, one hex line each', () => {
    const data = Buffer.alloc(DIGEST_CHUNK * 2 + 5, 1);
    const lines = [sha(data.subarray(0, DIGEST_CHUNK)), sha(data.subarray(DIGEST_CHUNK, 2 * DIGEST_CHUNK)), sha(data.subarray(2 * DIGEST_CHUNK))];
    const want = `sha256-4m:${sha(lines.map((l) => `${l}\n`).join(''))}`;
    expect(chunkedDigestOf(data)).toBe(want);
    expect(combineChunkSha256s(lines)).toBe(want);
    expect(want).toMatch(DIGEST_RE);
  });

  it('knows the hash of a hole of any length', () => {
    expect(zeroChunkSha256(DIGEST_CHUNK)).toBe(sha(Buffer.alloc(DIGEST_CHUNK)));
    expect(zeroChunkSha256(4096)).toBe(sha(Buffer.alloc(4096)));
    expect(zeroChunkSha256(4096)).toBe(zeroChunkSha256(4096));
  });

  it('differs from a plain sha256 and changes with any byte', () => {
    const data = Buffer.alloc(DIGEST_CHUNK + 1);
    const before = chunkedDigestOf(data);
    expect(before).not.toBe(`sha256-4m:${sha(data)}`);
    data[DIGEST_CHUNK] = 1;
    expect(chunkedDigestOf(data)).not.toBe(before);
  });

  it('splits sizes into chunks, the last one shorter', () => {
    expect(chunkCount(0)).toBe(0);
    expect(chunkCount(1)).toBe(1);
    expect(chunkCount(DIGEST_CHUNK)).toBe(1);
    expect(chunkCount(DIGEST_CHUNK + 1)).toBe(2);
    expect(chunkRange(1, DIGEST_CHUNK + 10)).toEqual([DIGEST_CHUNK, DIGEST_CHUNK + 10]);
    expect(chunkedDigestOf(new Uint8Array(0))).toBe(`sha256-4m:${sha('')}`);
  });

  /** Runs `fn` in a new temporary directory, removed after it, with PATH restored as it was. */
  const inTempDir = async (fn: (dir: string) => Promise<void>): Promise<void> => {
    const dir = mkdtempSync(path.join(tmpdir(), 'hv-digest-'));
    const savedPath = process.env.PATH;
    try {
      await fn(dir);
    } finally {
      process.env.PATH = savedPath;
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const coreutilsDigest = (file: string): string =>
    `sha256-4m:${execFileSync('sh', ['-c', `split -b ${DIGEST_CHUNK} --filter='sha256sum | cut -c1-64' "$1" | sha256sum | cut -c1-64`, 'sh', file], { encoding: 'utf8' }).trim()}`;

  it('reads a file to the digest coreutils gives (docs/deploy.md), for a partial last chunk and an exact multiple', () =>
    inTempDir(async (dir) => {
      for (const size of [DIGEST_CHUNK * 2 + 12345, DIGEST_CHUNK, 0]) {
        const file = path.join(dir, `img-${size}`);
        const data = Buffer.alloc(size);
        for (let i = 0; i < size; i += 4093) data[i] = (i / 4093) & 0xff;
        writeFileSync(file, data);
        expect((await fileChunkDigest(file)).digest).toBe(coreutilsDigest(file));
      }
    }));

  it('without filefrag (no FIEMAP) reads every chunk of a sparse file, holes included, to the same digest', () =>
    inTempDir(async (dir) => {
      const file = path.join(dir, 'sparse.img');
      writeFileSync(file, Buffer.alloc(0));
      truncateSync(file, DIGEST_CHUNK * 10 - 100);
      const fd = openSync(file, 'r+');
      writeSync(fd, Buffer.from('chunk zero'), 0, 10, 17);
      writeSync(fd, Buffer.from('chunk six, and into seven'), 0, 25, DIGEST_CHUNK * 7 - 5);
      closeSync(fd);
      const want = coreutilsDigest(file);
      process.env.PATH = path.join(dir, 'no-tools');
      expect(await fileChunkDigest(file)).toEqual({ digest: want, chunks: 10, chunksRead: 10 });
    }));

  it('names the file when it ends before its size (it changed while read)', () =>
    inTempDir(async (dir) => {
      const file = path.join(dir, 'shrinking.img');
      writeFileSync(file, Buffer.alloc(DIGEST_CHUNK * 3, 1));
      // A filefrag that cuts the file once its size was taken, and knows no extents: every chunk is read.
      mkdirSync(path.join(dir, 'bin'));
      writeFileSync(path.join(dir, 'bin/filefrag'), `#!/bin/sh\ntruncate -s ${DIGEST_CHUNK + 1000} "$2"\nexit 1\n`, { mode: 0o755 });
      process.env.PATH = `${path.join(dir, 'bin')}:${process.env.PATH}`;
      await expect(fileChunkDigest(file)).rejects.toThrow(`${file}: ended at byte ${DIGEST_CHUNK + 1000} while its size is ${DIGEST_CHUNK * 3}: the file changed while it was read`);
    }));
});
