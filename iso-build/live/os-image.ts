/**
 * The OS the live installer deploys: the test OS tree with Debian's kernel and the cos-img boot
 * chain (iso-build/test-os-tree.ts and boot-chain.ts, so the installed disk boots), packed as
 * squashfs — the same form as a live medium's rootfs.squashfs.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { buildTestOsTree } from '../test-os-tree.js';

export async function buildOsImage(opts: { workDir: string; cacheDir: string; kernelPackage?: string; out: string }): Promise<void> {
  const tree = await buildTestOsTree(path.join(opts.workDir, 'os-tree'), { kernel: { cacheDir: path.join(opts.cacheDir, 'kernel'), kernelPackage: opts.kernelPackage } });
  await rm(opts.out, { force: true });
  await run('mksquashfs', [tree.dir, opts.out, '-noappend', '-comp', 'zstd', '-no-progress', '-quiet', '-all-root'], { timeoutMs: 10 * 60_000 });
}
