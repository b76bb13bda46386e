/**
 * The OS the live installer deploys: the test OS tree with Debian's kernel and the cos-img boot
 * chain (iso-build/test-os-tree.ts and boot-chain.ts, so the installed disk boots), packed as
 * squashfs — the form of a Harvester ISO's rootfs.squashfs — with the build's time on every file.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { packSquashfs } from '../reproducible.js';
import { buildTestOsTree } from '../test-os-tree.js';

export async function buildOsImage(opts: { workDir: string; cacheDir: string; kernelPackage?: string; out: string; epoch: number }): Promise<void> {
  const tree = await buildTestOsTree(path.join(opts.workDir, 'os-tree'), {
    epoch: opts.epoch,
    kernel: { cacheDir: path.join(opts.cacheDir, 'kernel'), kernelPackage: opts.kernelPackage },
  });
  await rm(opts.out, { force: true });
  await packSquashfs(tree.dir, opts.out, opts.epoch, { timeoutMs: 10 * 60_000 });
}
