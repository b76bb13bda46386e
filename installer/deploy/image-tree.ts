/**
 * The tree inside a built image against the source's digests taken before the install began: the
 * proof that active.img holds the source as it was, not as it became (a file truncated or replaced
 * while mke2fs read it). The image is mounted read-only, which does not change its bytes.
 */
import { mkdtemp, rmdir } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { contentManifest, firstDifference, sourceChanged, type SourceDigests } from './source-digest.js';

export const IMAGE_MOUNT_PREFIX = 'hv-deploy-img-';

export async function checkImageTree(image: string, name: string, digests: SourceDigests, workDir: string, signal?: AbortSignal): Promise<void> {
  const mnt = await mkdtemp(path.join(workDir, IMAGE_MOUNT_PREFIX));
  try {
    await run('mount', ['-t', 'ext2', '-o', 'ro,loop,noatime', image, mnt], { timeoutMs: 120_000 });
    try {
      const got = await contentManifest(mnt, { signal });
      // mke2fs makes lost+found; it is the image's own, not the source's.
      if (!digests.entries.has('lost+found')) for (const rel of [...got.keys()]) if (rel === 'lost+found' || rel.startsWith('lost+found/')) got.delete(rel);
      const diff = firstDifference(digests.entries, got);
      if (diff) throw sourceChanged(digests, `the tree built into ${name} differs from the one digested before the install: ${diff}`);
    } finally {
      await run('umount', [mnt], { allowFailure: true, timeoutMs: 120_000 });
    }
  } finally {
    await rmdir(mnt).catch(() => undefined);
  }
}
