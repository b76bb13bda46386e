/**
 * The install's reads from a boot medium that hangs or crawls, on a real FUSE medium (harness.ts):
 * the bundle copy, the source checksum, mke2fs and the unsquashfs fallback each fail as a stall naming the file and how far
 * they got, leave no temp file behind, and finish (byte for byte) once the medium answers again or
 * while it is only slow.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { copyBundle } from '../../../installer/steps/bundle-copy.js';
import { sha256File } from '../../../installer/deploy/checksum.js';
import { buildExt2Image } from '../../../installer/deploy/image-build.js';
import { unpackSquashfs } from '../../../installer/deploy/source.js';
import { run } from '../../../lib/exec.js';
import { StallError } from '../../../lib/stall-watchdog.js';
import { HvError } from '../../../lib/errors.js';
import { mountSlowMedium, type SlowMedium } from './harness.js';

let work: string;
let medium: SlowMedium | undefined;
/** A tmpfs a test mounted under work (unmounted before work is removed). */
let destMount: string | undefined;
const ARCHIVE = randomBytes(6 * 1024 * 1024);

async function listAll(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) out.push(path.relative(dir, path.join(e.parentPath, e.name)));
  return out.sort();
}

beforeEach(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'hv-slow-media-'));
  const src = path.join(work, 'src');
  await mkdir(path.join(src, 'bundle'), { recursive: true });
  await writeFile(path.join(src, 'bundle', 'metadata.yaml'), 'images: []\n');
  await writeFile(path.join(src, 'bundle', 'rke2-images.linux-amd64.tar.zst'), ARCHIVE);
  await mkdir(path.join(src, 'tree/etc'), { recursive: true });
  await writeFile(path.join(src, 'tree/etc/os-release'), 'ID=test\n');
  await writeFile(path.join(src, 'tree/big'), ARCHIVE);
});

afterEach(async () => {
  await medium?.close();
  medium = undefined;
  while (destMount && (await run('umount', [destMount], { allowFailure: true })).exitCode === 0);
  destMount = undefined;
  await rm(work, { recursive: true, force: true });
});

describe('a boot medium that stops answering', () => {
  it('the bundle copy fails as a stall after its attempts, leaves no temp file, and resumes once the medium answers', async () => {
    medium = await mountSlowMedium(path.join(work, 'src'), work);
    const dest = path.join(work, 'dest');
    await medium.stall();
    const err = await copyBundle(path.join(medium.mount, 'bundle'), dest, { stallTimeoutMs: 1_000, attempts: 2, retryDelayMs: 100 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HvError);
    expect((err as HvError).message).toMatch(/^the image bundle's source stopped delivering data: no byte read from .*\/medium\/bundle\/(metadata\.yaml|rke2-images\.linux-amd64\.tar\.zst) for 1 s at 0 B of .* \(2 attempts\)$/);
    expect((err as HvError).hint).toContain('the boot medium hangs');
    expect((await listAll(dest)).filter((f) => f.includes('hvbundle-tmp'))).toEqual([]);

    await medium.resume();
    const r = await copyBundle(path.join(medium.mount, 'bundle'), dest, { stallTimeoutMs: 1_000 });
    expect(r.files).toBe(2);
    expect((await readFile(path.join(dest, 'rke2-images.linux-amd64.tar.zst'))).equals(ARCHIVE)).toBe(true);
  });

  it('a medium that is slow but moving is not a stall', async () => {
    // 6 MiB at 4 MiB/s takes 1.5 s, as long as the stall timeout in all, but every single read is short.
    medium = await mountSlowMedium(path.join(work, 'src'), work, 4 * 1024 * 1024);
    const dest = path.join(work, 'dest');
    const r = await copyBundle(path.join(medium.mount, 'bundle'), dest, { stallTimeoutMs: 1_500, attempts: 1 });
    expect(r.copiedBytes).toBe(ARCHIVE.length + 'images: []\n'.length);
    expect((await readFile(path.join(dest, 'rke2-images.linux-amd64.tar.zst'))).equals(ARCHIVE)).toBe(true);
  });

  it('the source checksum fails as a stall at the byte it reached', async () => {
    medium = await mountSlowMedium(path.join(work, 'src'), work);
    await medium.stall();
    const err = await sha256File(path.join(medium.mount, 'tree/big'), { stallTimeoutMs: 800 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StallError);
    expect((err as Error).message).toMatch(/^no byte read from .*\/medium\/tree\/big for 1 s at byte 0$/);
    await medium.resume();
    const want = createHash('sha256').update(ARCHIVE).digest('hex');
    expect(await sha256File(path.join(medium.mount, 'tree/big'), { stallTimeoutMs: 800 })).toBe(want);
  });

  it('mke2fs reading a stalled source tree is stopped and named; the same build succeeds once the medium answers', async () => {
    medium = await mountSlowMedium(path.join(work, 'src'), work);
    const spec = { tree: path.join(medium.mount, 'tree'), file: path.join(work, 'active.img'), label: 'COS_ACTIVE' as const, sizeBytes: 64 * 1024 * 1024, inodes: 1024, sourceDigest: 'a'.repeat(64), epoch: 1_700_000_000 };
    await medium.stall();
    const err = await buildExt2Image(spec, undefined, 1_500).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StallError);
    expect((err as Error).message).toMatch(/^mke2fs wrote nothing to .*active\.img for [12] s at \d+ MiB: reading the OS source .*\/medium\/tree stalled \(a hung boot medium\?\)$/);
    await medium.resume();
    await buildExt2Image(spec, undefined, 1_500);
    expect((await stat(spec.file)).size).toBe(spec.sizeBytes);
  });

  it('unsquashfs of a squashfs on a stalled medium is stopped and named; once the medium answers it unpacks byte for byte', async () => {
    await run('mksquashfs', [path.join(work, 'src/tree'), path.join(work, 'src/rootfs.squashfs'), '-noappend', '-no-progress', '-comp', 'gzip']);
    medium = await mountSlowMedium(path.join(work, 'src'), work);
    // unsquashfs's progress is the space used under dest: a tmpfs of its own, so that other
    // writers to /tmp (the integration files running alongside) cannot hide the stall.
    const dest = path.join(work, 'unpacked');
    await mkdir(dest);
    await run('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'hv-slow-media-dest', dest]);
    destMount = dest;
    await medium.stall();
    const err = await unpackSquashfs(path.join(medium.mount, 'rootfs.squashfs'), dest, 1_500).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HvError);
    expect((err as HvError).message).toMatch(/^unsquashfs wrote nothing under .*\/unpacked for [12] s: reading the squashfs source .*\/medium\/rootfs\.squashfs stalled \(a hung boot medium\?\)$/);
    expect((err as HvError).where).toBe('deploy: unsquashfs');
    await medium.resume();
    // An empty dest again: the stopped unsquashfs may still hold a file there, so a fresh tmpfs.
    await run('umount', ['-l', dest]);
    await run('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'hv-slow-media-dest', dest]);
    await unpackSquashfs(path.join(medium.mount, 'rootfs.squashfs'), dest, 1_500);
    // Buffer.equals: toEqual walks a 6 MiB buffer element by element (40–80 s on this machine).
    expect((await readFile(path.join(dest, 'big'))).equals(ARCHIVE)).toBe(true);
    expect(await readFile(path.join(dest, 'etc/os-release'), 'utf8')).toBe('ID=test\n');
  });

  it('a file that is not a squashfs is refused as such, not as a stall', async () => {
    const dest = path.join(work, 'unpacked');
    await mkdir(dest);
    const err = await unpackSquashfs(path.join(work, 'src/tree/big'), dest, 1_500).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HvError);
    expect((err as HvError).message).toBe(`cannot read the squashfs source ${path.join(work, 'src/tree/big')}`);
  });
});
