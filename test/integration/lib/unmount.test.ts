/**
 * unmountWhenFree against the race that made a read-back check fail "EBUSY": an image loop-mounted
 * from a filesystem, a prober holding that loop device open while the image is unmounted, and the
 * filesystem's own umount right after. Real mounts and loop devices (root).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { unmountWhenFree } from '../../../lib/unmount.js';
import { Cleanup, holdOpen, isMounted, sh, tempDir } from '../install/helpers.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());


/** `outer` mounted from an image file; `inner` loop-mounted from an image on it; the inner loop device. */
async function nestedMounts(): Promise<{ outer: string; inner: string; loop: string }> {
  const dir = await tempDir(cleanup, 'hv-unmount-');
  const outer = path.join(dir, 'outer');
  const inner = path.join(dir, 'inner');
  await mkdir(outer);
  await mkdir(inner);
  await sh('truncate', ['-s', '32M', path.join(dir, 'outer.img')]);
  await sh('mkfs.ext4', ['-q', '-F', path.join(dir, 'outer.img')]);
  await sh('mount', ['-o', 'loop', path.join(dir, 'outer.img'), outer]);
  cleanup.add(() => sh('umount', ['-l', outer], { allowFailure: true }));
  await sh('truncate', ['-s', '8M', path.join(outer, 'inner.img')]);
  await sh('mkfs.ext4', ['-q', '-F', path.join(outer, 'inner.img')]);
  await sh('mount', ['-o', 'ro,loop', path.join(outer, 'inner.img'), inner]);
  cleanup.add(() => sh('umount', ['-l', inner], { allowFailure: true }));
  const loop = (await sh('findmnt', ['-n', '-o', 'SOURCE', inner])).stdout.trim();
  expect(loop).toMatch(/^\/dev\/loop\d+$/);
  return { outer, inner, loop };
}


describe('unmountWhenFree', () => {
  it('waits out a loop device held open for a moment, where a plain umount fails busy', async () => {
    const { outer, inner, loop } = await nestedMounts();
    const holder = await holdOpen(cleanup, loop, 2);
    await sh('umount', [inner]);
    // The race itself: the loop device outlives its mount while held, so its backing file keeps outer busy.
    const plain = await sh('umount', [outer], { allowFailure: true });
    expect(plain.stderr).toMatch(/target is busy/);
    expect(await isMounted(outer)).toBe(true);

    await unmountWhenFree(outer);
    expect(holder.exitCode).toBe(0); // it could only succeed once the holder let go
    expect(await isMounted(outer)).toBe(false);
    const backing = (await sh('losetup', ['--list', '--noheadings', '--output', 'BACK-FILE'])).stdout;
    expect(backing).not.toContain(path.join(outer, 'inner.img'));
  });

  it('names the busy filesystem and where to look when the hold outlasts the window, and leaves it mounted', async () => {
    const { outer, inner, loop } = await nestedMounts();
    await holdOpen(cleanup, loop, 30);
    await sh('umount', [inner]);
    const err = await unmountWhenFree(outer, { busyWindowMs: 500 }).then(() => undefined, (e: unknown) => e as Error);
    expect(err?.message).toContain(`umount ${outer}`);
    expect(err?.message).toContain('still busy after 0.5 s');
    expect(err?.message).toContain(`fuser -vm ${outer}`);
    expect(err?.message).toMatch(/target is busy/);
    expect(await isMounted(outer)).toBe(true);
  });

  it('fails at once on what is not a busy mount (not mounted), without waiting out the window (ten minutes here: the test timeout would end it first)', async () => {
    const dir = await tempDir(cleanup, 'hv-unmount-');
    const err = await unmountWhenFree(dir, { busyWindowMs: 600_000 }).then(() => undefined, (e: unknown) => e as Error);
    expect(err?.message).toMatch(/exited with status \d+: umount /);
    expect(err?.message).toMatch(/not mounted/);
    expect(err?.message).not.toContain('still busy');
  });
});
