import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { mkdtemp, open, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ext2LabelOffsets } from '../../../installer/deploy/ext2-label.js';
import { buildExt2Image } from '../../../installer/deploy/image-build.js';
import { copyImage, imageDigest } from '../../../installer/deploy/sparse-copy.js';
import { buildTestOsTree } from '../../../iso-build/index.js';
// File digests from the test's own oracle (holes hashed as zeros without being read: a sparse image
// read whole costs about 5 s of system time per GiB here).
import { sparseDigests } from '../install/helpers.js';

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'hv-relabel-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('relabelling copies in the stream', () => {
  it.each([
    ['4 KiB blocks, 1 GiB', 1024],
    ['a size with a partial last group', 333],
  ])('gives the same bytes as cp + tune2fs -L (%s), with every digest right', async (_name, sizeMiB) => {
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
    const r = await copyImage(active, [{ path: passive, relabel: { label: 'COS_PASSIVE', offsets: offsets! } }, { path: plain }]);
    const [ofPassive, ofTune2fs, ofPlain, ofActive] = await Promise.all([passive, viaTune2fs, plain, active].map(sparseDigests));
    expect(ofPassive.sha256).toBe(ofTune2fs.sha256);
    expect(ofPlain.sha256).toBe(ofActive.sha256);
    expect(ofPassive.sha256).not.toBe(ofActive.sha256);
    expect(r.targetDigests[0]).toBe(ofPassive.chunked);
    expect(r.targetDigests[1]).toBe(ofActive.chunked);
    expect(r.sourceDigest).toBe(r.targetDigests[1]);
    expect(r.targetDigests[0]).not.toBe(r.sourceDigest);
    expect(await imageDigest(passive)).toBe(r.targetDigests[0]);
    // What docs/deploy.md tells operators to run gives the same digest.
    const viaCoreutils = await execa('sh', ['-c', `split -b 4194304 --filter='sha256sum | cut -c1-64' '${passive}' | sha256sum`]);
    expect(`sha256-4m:${viaCoreutils.stdout.split(' ')[0]}`).toBe(r.targetDigests[0]);
    const [st, stPlain] = [await stat(passive), await stat(plain)];
    expect(st.blocks * 512).toBeLessThan(st.size / 4); // holes kept (the tree is 3 MiB)
    expect(stPlain.size).toBe(sizeMiB * 1024 * 1024);
    expect((await execa('e2label', [passive])).stdout.trim()).toBe('COS_PASSIVE');
    await execa('e2fsck', ['-fn', passive]);
  });
});
