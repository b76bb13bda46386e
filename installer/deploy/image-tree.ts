/**
 * The tree inside a built image against the source's digests taken before the install began: the
 * proof that active.img holds the source as it was, not as it became (a file truncated or replaced
 * while mke2fs read it). The image is mounted read-only, which does not change its bytes.
 */
import { mkdtemp, rmdir } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { unmountWhenFree } from '../../lib/unmount.js';
import { contentManifest, firstDifference, sourceChanged, type SourceDigests } from './source-digest.js';
import { ReadBackMismatch } from './read-back.js';
import { IMAGE_MOUNT_PREFIX } from './source.js';


export interface ImageTreeOptions {
  /** The source as mounted for the build: read again to tell a changed source from a bad disk. */
  tree: string;
  /** The partition the image is on. */
  device?: string;
  signal?: AbortSignal;
}

export async function checkImageTree(image: string, name: string, digests: SourceDigests, workDir: string, opts: ImageTreeOptions): Promise<void> {
  const signal = opts.signal;
  const mnt = await mkdtemp(path.join(workDir, IMAGE_MOUNT_PREFIX));
  try {
    await run('mount', ['-t', 'ext2', '-o', 'ro,loop,noatime', image, mnt], { timeoutMs: 120_000 });
    let failed = false;
    try {
      const got = await contentManifest(mnt, { signal });
      // mke2fs makes lost+found; it is the image's own, not the source's.
      if (!digests.entries.has('lost+found')) for (const rel of [...got.keys()]) if (rel === 'lost+found' || rel.startsWith('lost+found/')) got.delete(rel);
      const diff = firstDifference(digests.entries, got);
      if (diff) throw await blame(diff, name, digests, opts);
    } catch (err) {
      failed = true;
      throw err;
    } finally {
      // An image left mounted keeps COS_STATE busy: say so here, unless the check already failed.
      await unmountWhenFree(mnt, { busyWindowMs: failed ? 0 : undefined }).catch((err: unknown) => {
        if (!failed) throw err;
      });
    }
  } finally {
    await rmdir(mnt).catch(() => undefined);
  }
}

/**
 * A difference is the source's fault when the source's own entry no longer matches its digest;
 * when the source still does, the image lost what was written to it: the disk's fault.
 */
async function blame(diff: { rel: string; text: string }, name: string, digests: SourceDigests, opts: ImageTreeOptions): Promise<Error> {
  const want = digests.entries.get(diff.rel);
  const now = want ? (await contentManifest(opts.tree, { only: diff.rel }).catch(() => new Map())).get(diff.rel) : undefined;
  if (want && now && firstDifference(new Map([[diff.rel, want]]), new Map([[diff.rel, now]])) === undefined) {
    return new ReadBackMismatch(`${name} on ${opts.device ?? 'the disk'} does not hold the source's /${diff.rel}, though the source still does: ${diff.text}; the disk did not store what was written`, name, undefined);
  }
  return sourceChanged(digests, `the tree built into ${name} differs from the one digested before the install: ${diff.text}`);
}
