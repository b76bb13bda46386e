import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, open, readdir, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { deployImages, parseStateYaml, verifyDeployment } from '../../../installer/deploy/index.js';
import type { DeployResult } from '../../../installer/disk/contracts.js';
import { HvError } from '../../../lib/errors.js';
import { buildTestOsTree, type TestOsTree } from '../../../iso-build/index.js';
import { harvesterParts, makeLoopDisk, mountImage, mountsUnder, sh, type LoopDisk } from './loop-disk.js';
import { sparseDigests } from '../install/helpers.js';

const MiB = 1024 * 1024;
const disks: LoopDisk[] = [];
let scratch: string;
let tree: TestOsTree;

async function disk(opts: Parameters<typeof harvesterParts>[0] = {}): Promise<LoopDisk> {
  const d = await makeLoopDisk(harvesterParts(opts));
  disks.push(d);
  return d;
}

function request(d: LoopDisk, extra: Partial<Parameters<typeof deployImages>[0]> = {}): Parameters<typeof deployImages>[0] {
  return {
    stateDir: d.byLabel('COS_STATE').mountpoint!,
    recoveryDir: d.byLabel('COS_RECOVERY').mountpoint!,
    source: { kind: 'dir', path: tree.dir },
    systemSizeMiB: 64,
    workDir: path.join(d.dir, 'work'),
    ...extra,
  };
}

async function sha256(file: string): Promise<string> {
  return createHash('sha256').update(await readFile(file)).digest('hex');
}

async function fsLabel(file: string): Promise<string> {
  return (await sh('blkid', ['-c', '/dev/null', '-o', 'value', '-s', 'LABEL', file])).trim();
}

/** Every image: label, fsck-clean, holds the tree's files byte for byte, sparse on disk, digest as recorded. */
async function expectImagesMatchTree(d: LoopDisk, result: DeployResult, t: TestOsTree): Promise<void> {
  const state = d.byLabel('COS_STATE').mountpoint!;
  const recovery = d.byLabel('COS_RECOVERY').mountpoint!;
  for (const [root, rec] of [
    [state, result.active],
    [state, result.passive],
    [recovery, result.recovery],
  ] as const) {
    const file = path.join(root, rec.file);
    expect(await fsLabel(file)).toBe(rec.label);
    await sh('e2fsck', ['-fn', file]);
    const st = await stat(file);
    expect(st.size).toBe(rec.sizeBytes);
    expect(st.blocks * 512).toBeLessThan(st.size * 0.75); // holes kept
    expect((await sparseDigests(file)).chunked).toBe(rec.digest); // the test's own oracle, holes not read
    const m = await mountImage(file, scratch);
    try {
      for (const [rel, sum] of Object.entries(t.files)) expect(await sha256(path.join(m.dir, rel)), rel).toBe(sum);
      expect((await stat(path.join(m.dir, 'bin/sh'))).isFile()).toBe(true); // symlink to busybox resolves
    } finally {
      await m.unmount();
    }
  }
}

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'hv-deploy-it-'));
  tree = await buildTestOsTree(path.join(scratch, 'tree'), { payloadBytes: 24 * MiB });
});

afterAll(async () => {
  for (const d of disks) await d.cleanup();
  for (const m of (await mountsUnder(scratch)).reverse()) await execa('umount', ['-l', m], { reject: false });
  await rm(scratch, { recursive: true, force: true });
});

describe('deployImages', () => {
  it('builds active, passive and recovery images from a directory, sparse, labelled, with state.yaml', async () => {
    const d = await disk();
    const progress: Array<[number, number]> = [];
    const result = await deployImages(request(d, { onProgress: (a, b) => progress.push([a, b]) }));
    expect(result.active).toMatchObject({ file: 'cOS/active.img', label: 'COS_ACTIVE', fs: 'ext2', sizeBytes: 64 * MiB });
    expect(result.passive.label).toBe('COS_PASSIVE');
    expect(result.recovery).toMatchObject({ file: 'cOS/recovery.img', label: 'COS_SYSTEM' });
    await expectImagesMatchTree(d, result, tree);

    for (const root of [d.byLabel('COS_STATE').mountpoint!, d.byLabel('COS_RECOVERY').mountpoint!]) {
      const st = parseStateYaml(await readFile(path.join(root, 'state.yaml'), 'utf8'));
      expect(st).toMatchObject({ source: { kind: 'dir', path: tree.dir }, sourceDigest: result.sourceDigest, active: result.active, passive: result.passive, recovery: result.recovery });
    }
    expect((await verifyDeployment(d.byLabel('COS_STATE').mountpoint!, d.byLabel('COS_RECOVERY').mountpoint!)).every((c) => c.ok)).toBe(true);
    expect(progress.length).toBeGreaterThan(1);
    const [lastDone, lastTotal] = progress[progress.length - 1];
    expect(lastDone).toBe(lastTotal);
    expect(progress.every(([a, b]) => a <= b)).toBe(true);
    expect(await mountsUnder(path.join(d.dir, 'work'))).toEqual([]); // source released
    const leftovers = (await readdir(path.join(d.byLabel('COS_STATE').mountpoint!, 'cOS'))).filter((f) => f.endsWith('.partial'));
    expect(leftovers).toEqual([]);
  });

  it('deploys from a squashfs file, recording its checksum as the source digest', async () => {
    const sq = path.join(scratch, 'rootfs.squashfs');
    await sh('mksquashfs', [tree.dir, sq, '-noappend', '-quiet', '-comp', 'gzip']);
    const d = await disk();
    const result = await deployImages(request(d, { source: { kind: 'squashfs', path: sq } }));
    expect(result.sourceDigest).toBe(await sha256(sq));
    await expectImagesMatchTree(d, result, tree);
  });

  it('sizes active.img at 3072 MiB by default', async () => {
    const d = await disk({ stateMiB: 6800, recoveryMiB: 3400 });
    const result = await deployImages(request(d, { systemSizeMiB: undefined }));
    expect(result.active.sizeBytes).toBe(3072 * MiB);
    const st = await stat(path.join(d.byLabel('COS_STATE').mountpoint!, 'cOS/passive.img'));
    expect(st.size).toBe(3072 * MiB);
    expect(st.blocks * 512).toBeLessThan(200 * MiB);
  });

  it('is idempotent: a re-run keeps verified images untouched and gives the same result', async () => {
    const d = await disk();
    const first = await deployImages(request(d));
    const activeFile = path.join(d.byLabel('COS_STATE').mountpoint!, 'cOS/active.img');
    const before = await stat(activeFile);
    const again = await deployImages(request(d));
    expect(again).toEqual(first);
    const after = await stat(activeFile);
    expect(after.ino).toBe(before.ino);
    expect(after.mtimeMs).toBe(before.mtimeMs);
  });

  it('detects a corrupted image by its digest and rebuilds it on the next run', async () => {
    const d = await disk();
    const first = await deployImages(request(d));
    const stateDir = d.byLabel('COS_STATE').mountpoint!;
    const passive = path.join(stateDir, 'cOS/passive.img');
    const fh = await open(passive, 'r+');
    await fh.write(Buffer.from('corruption'), 0, 10, 5 * MiB);
    await fh.close();
    const checks = await verifyDeployment(stateDir, d.byLabel('COS_RECOVERY').mountpoint!);
    const bad = checks.filter((c) => !c.ok);
    expect(bad.map((c) => c.label)).toEqual(['COS_PASSIVE']);
    expect(bad[0].problem).toMatch(/^cOS\/passive\.img read back from the disk differs from what was written: digest sha256-4m:[0-9a-f]{64}, expected sha256-4m:[0-9a-f]{64}$/);
    const repaired = await deployImages(request(d));
    expect(repaired).toEqual(first);
    expect((await sparseDigests(passive)).chunked).toBe(first.passive.digest);
  });

  it('after a SIGKILL in the middle of the copy, a re-run ends byte-identical to an uninterrupted deploy', async () => {
    const big = await buildTestOsTree(path.join(scratch, 'tree-big'), { payloadBytes: 96 * MiB });
    const reference = await disk({ stateMiB: 700, recoveryMiB: 360 });
    const expected = await deployImages(request(reference, { source: { kind: 'dir', path: big.dir }, systemSizeMiB: 256 }));

    const d = await disk({ stateMiB: 700, recoveryMiB: 360 });
    const req = request(d, { source: { kind: 'dir', path: big.dir }, systemSizeMiB: 256 });
    const child = execa(path.resolve('node_modules/.bin/vite-node'), [path.resolve('test/integration/deploy/deploy-child.ts'), JSON.stringify({ ...req, stallMs: 150 })], { reject: false });
    let killedAt = 0;
    child.stdout?.on('data', (b: Buffer) => {
      for (const line of b.toString().split('\n')) {
        const m = /^progress (\d+) (\d+)$/.exec(line);
        // Past the active image (a third of the bytes) means the copy to passive/recovery is running.
        if (m && !killedAt && Number(m[1]) > Number(m[2]) * 0.45) {
          killedAt = Number(m[1]);
          child.kill('SIGKILL');
        }
      }
    });
    const r = await child;
    expect(r.signal, `child output: ${r.stdout}\n${r.stderr}`).toBe('SIGKILL');
    const cos = await readdir(path.join(d.byLabel('COS_STATE').mountpoint!, 'cOS'));
    expect(cos.some((f) => f.endsWith('.partial'))).toBe(true); // it really died mid-copy
    expect(cos).not.toContain('passive.img');

    const resumed = await deployImages(req);
    expect(resumed).toEqual(expected);
    await expectImagesMatchTree(d, resumed, big);
    expect((await readdir(path.join(d.byLabel('COS_STATE').mountpoint!, 'cOS'))).filter((f) => f.endsWith('.partial'))).toEqual([]);
    expect(await mountsUnder(path.join(d.dir, 'work'))).toEqual([]); // the killed run's bind mount is gone
  });
});

describe('deployImages refusals leave nothing half-written', () => {
  async function expectNoImages(d: LoopDisk): Promise<void> {
    for (const label of ['COS_STATE', 'COS_RECOVERY']) {
      const cos = path.join(d.byLabel(label).mountpoint!, 'cOS');
      const files = existsSync(cos) ? await readdir(cos) : [];
      expect(files.filter((f) => f.includes('.img'))).toEqual([]);
      expect(existsSync(path.join(d.byLabel(label).mountpoint!, 'state.yaml'))).toBe(false);
    }
  }

  it('refuses a missing source directory', async () => {
    const d = await disk();
    const err = await deployImages(request(d, { source: { kind: 'dir', path: path.join(scratch, 'nope') } })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HvError);
    expect((err as HvError).message).toMatch(/the OS source .*nope is not a directory/);
    await expectNoImages(d);
  });

  it('refuses a file that is not squashfs', async () => {
    const d = await disk();
    const notSq = path.join(scratch, 'not.squashfs');
    await sh('sh', ['-c', `head -c 100000 /dev/urandom > ${notSq}`]);
    const err = await deployImages(request(d, { source: { kind: 'squashfs', path: notSq } })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HvError);
    expect((err as HvError).message).toMatch(/cannot read the squashfs source/);
    await expectNoImages(d);
  });

  it('refuses a system.size too small for the tree', async () => {
    const d = await disk();
    const err = await deployImages(request(d, { systemSizeMiB: 16 })).catch((e: unknown) => e);
    expect((err as HvError).message).toMatch(/the OS tree needs \d+ MiB in active.img but system.size is 16 MiB/);
    await expectNoImages(d);
  });

  it('stops when aborted in the middle of the copy, removing its partial images', async () => {
    const d = await disk();
    const ac = new AbortController();
    const err = await deployImages(
      request(d, {
        signal: ac.signal,
        onProgress: (done, total) => {
          if (done > total * 0.4) ac.abort(new Error('operator cancelled'));
        },
      }),
    ).catch((e: unknown) => e);
    expect((err as Error).message).toBe('operator cancelled');
    await expectNoImages(d);
    for (const label of ['COS_STATE', 'COS_RECOVERY']) {
      expect((await readdir(path.join(d.byLabel(label).mountpoint!, 'cOS'))).filter((f) => f.endsWith('.partial'))).toEqual([]);
    }
    expect(await mountsUnder(path.join(d.dir, 'work'))).toEqual([]);
  });

  it('refuses when COS_STATE cannot hold two fully allocated images', async () => {
    const d = await disk({ stateMiB: 100 });
    const err = await deployImages(request(d)).catch((e: unknown) => e);
    expect((err as HvError).message).toMatch(/not enough space on .*cos_state for the OS images: need 128 MiB, \d+ MiB free/);
    await expectNoImages(d);
  });
});
