import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { createHash } from 'node:crypto';
import { mkdtemp, open, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ext2LabelOffsets } from '../../../installer/deploy/ext2-label.js';
import { buildExt2Image } from '../../../installer/deploy/image-build.js';
import { copySparseAndHash } from '../../../installer/deploy/sparse-copy.js';
import { sha256File } from '../../../installer/deploy/checksum.js';
import { buildTestOsTree } from '../../../iso-build/index.js';

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'hv-relabel-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function sha256(file: string): Promise<string> {
  return createHash('sha256').update(await readFile(file)).digest('hex');
}

describe('relabelling copies in the stream', () => {
  it.each([
    ['4 KiB blocks, 1 GiB', 1024],
    ['a size with a partial last group', 333],
  ])('gives the same bytes as cp + tune2fs -L (%s), with every checksum right', async (_name, sizeMiB) => {
    const tree = await buildTestOsTree(path.join(dir, `tree-${sizeMiB}`), { payloadBytes: 3 * 1024 * 1024 });
    const active = path.join(dir, `active-${sizeMiB}.img`);
    const epoch = 1_700_000_000;
    await buildExt2Image({ tree: tree.dir, file: active, label: 'COS_ACTIVE', sizeBytes: sizeMiB * 1024 * 1024, inodes: 65536, sourceDigest: 'ab'.repeat(32), epoch });
    const sb = Buffer.alloc(1024);
    const fh = await open(active, 'r');
    await fh.read(sb, 0, 1024, 1024);
    await fh.close();
    const offsets = ext2LabelOffsets(sb);
    expect(offsets).toBeDefined();

    const viaTune2fs = path.join(dir, `tune2fs-${sizeMiB}.img`);
    await execa('cp', ['--sparse=always', active, viaTune2fs]);
    await execa('tune2fs', ['-L', 'COS_PASSIVE', viaTune2fs], { env: { E2FSPROGS_FAKE_TIME: String(epoch) } });

    const passive = path.join(dir, `passive-${sizeMiB}.img`);
    const plain = path.join(dir, `plain-${sizeMiB}.img`);
    const r = await copySparseAndHash(active, [{ path: passive, relabel: { label: 'COS_PASSIVE', offsets: offsets! } }, { path: plain }]);
    expect(await sha256(passive)).toBe(await sha256(viaTune2fs));
    expect(r.targetSha256[0]).toBe(await sha256(passive));
    expect(r.targetSha256[1]).toBe(await sha256(active));
    expect(r.sourceSha256).toBe(await sha256(active));
    expect(await sha256File(passive)).toBe(r.targetSha256[0]);
    expect((await execa('e2label', [passive])).stdout.trim()).toBe('COS_PASSIVE');
    await execa('e2fsck', ['-fn', passive]);
  });
});
