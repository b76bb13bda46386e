import { afterEach, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { chmod, lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_BUNDLE_DIRS } from '../../../agent/preload/settings.js';
import { HvError, ExitCode } from '../../../lib/errors.js';
import {
  BUNDLE_NODE_PATH,
  bundleSpaceProblem,
  copyBundle,
  planBundleCopy,
  scanTree,
  SPACE_HEADROOM_BYTES,
  type TreeEntry,
} from '../../../installer/steps/bundle-copy.js';
import { bundleDestination } from '../../../installer/steps/content-steps.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) {
    await chmodTree(d);
    await rm(d, { recursive: true, force: true });
  }
});

/** Read-only directories a test made must be writable again to be removed. */
async function chmodTree(d: string): Promise<void> {
  const s = await lstat(d).catch(() => undefined);
  if (!s?.isDirectory()) return;
  await chmod(d, 0o755);
  for (const n of await readdir(d)) await chmodTree(path.join(d, n));
}

async function tmp(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'hv-bundle-'));
  dirs.push(d);
  return d;
}

const BIG_FS = { bsize: 4096, bavail: 1e9 };
const bigFs = async () => BIG_FS;

/** A small bundle in Harvester's layout, with modes, a nested directory and a symlink. */
async function makeBundle(root: string): Promise<string> {
  const b = path.join(root, 'bundle');
  await mkdir(path.join(b, 'harvester/images'), { recursive: true });
  await mkdir(path.join(b, 'harvester/images-lists'), { recursive: true });
  await writeFile(path.join(b, 'metadata.yaml'), 'images:\n  common:\n    - list: harvester/images-lists/a.txt\n      archive: harvester/images/a.tar.zst\n');
  await writeFile(path.join(b, 'harvester/images/a.tar.zst'), Buffer.alloc(300_000, 7));
  await writeFile(path.join(b, 'harvester/images-lists/a.txt'), 'docker.io/library/busybox:latest\n');
  await writeFile(path.join(b, 'harvester/run.sh'), '#!/bin/sh\n');
  await chmod(path.join(b, 'harvester/run.sh'), 0o750);
  await symlink('images/a.tar.zst', path.join(b, 'harvester/latest.tar.zst'));
  return b;
}

/** rel → "kind mode size content" for every entry: what "the same bundle" means. */
async function manifest(root: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await scanTree(root)) {
    const full = path.join(root, e.rel);
    out[e.rel] =
      e.kind === 'file' ? `file ${e.mode.toString(8)} ${e.size} ${(await readFile(full)).toString('base64').slice(0, 40)} ${e.mtimeMs}` : e.kind === 'symlink' ? `link ${await readlink(full)}` : `${e.kind} ${e.mode.toString(8)}`;
  }
  return out;
}

const file = (rel: string, size: number, mtimeMs = 1000, mode = 0o644): TreeEntry => ({ rel, kind: 'file', mode, size, mtimeMs });
const dir = (rel: string, mode = 0o755): TreeEntry => ({ rel, kind: 'dir', mode, size: 0, mtimeMs: 0 });
const link = (rel: string, target: string): TreeEntry => ({ rel, kind: 'symlink', mode: 0o777, size: 0, mtimeMs: 0, target });

describe('where the bundle goes', () => {
  it('is the path the agent looks at first, under the /var/lib/rancher bind directory', () => {
    expect(BUNDLE_NODE_PATH).toBe(DEFAULT_BUNDLE_DIRS[0]);
    expect(bundleDestination(['/oem', '/var/lib/rancher', '/var/lib/kubelet'])).toBe('.state/var-lib-rancher.bind/hvagent/bundle');
  });
  it('is refused when /var/lib/rancher is not persistent', () => {
    expect(() => bundleDestination(['/oem'])).toThrow(/\/var\/lib\/rancher\/hvagent\/bundle is not under a persistent state path/);
  });
});

describe('planBundleCopy', () => {
  it('into an empty destination: every directory and file, total bytes', () => {
    const p = planBundleCopy([dir('h'), file('h/a', 10), file('m.yaml', 5), link('h/l', 'a')], []);
    expect(p.dirs.map((d) => d.rel)).toEqual(['h']);
    expect(p.copy.map((f) => f.rel)).toEqual(['h/a', 'm.yaml']);
    expect(p.links.map((l) => l.rel)).toEqual(['h/l']);
    expect(p).toMatchObject({ files: 2, totalBytes: 15, copyBytes: 15, keep: [], remove: [] });
  });

  it('keeps a file of the same size and mtime, recopies one that differs in either, chmods one whose mode differs', () => {
    const src = [file('same', 10, 5000), file('size', 10), file('time', 10, 2000), file('mode', 10, 1000, 0o600)];
    const dst = [file('same', 10, 5000), file('size', 11), file('time', 10, 3000), file('mode', 10, 1000, 0o644)];
    const p = planBundleCopy(src, dst);
    expect(p.keep.map((f) => f.rel)).toEqual(['mode', 'same']);
    expect(p.fixMode.map((f) => f.rel)).toEqual(['mode']);
    expect(p.copy.map((f) => f.rel)).toEqual(['size', 'time']);
    expect(p.copyBytes).toBe(20);
    expect(p.remove).toEqual([]);
  });

  it('removes what the source does not hold (a stale bundle, temp files), top-most only, and counts the bytes freed', () => {
    const src = [dir('h'), file('h/a', 10)];
    const dst = [dir('h'), file('h/a', 10), file('h/.a.0123456789ab.hvbundle-tmp', 4), dir('old'), file('old/x', 100), dir('old/y'), file('old/y/z', 50), file('stale', 7)];
    const p = planBundleCopy(src, dst);
    expect(p.remove.map((e) => e.rel)).toEqual(['h/.a.0123456789ab.hvbundle-tmp', 'old', 'stale']);
    expect(p.freedBytes).toBe(161);
    expect(p.keep.map((f) => f.rel)).toEqual(['h/a']);
  });

  it('replaces an entry of another kind, and a symlink pointing elsewhere', () => {
    const src = [file('was-dir', 3), dir('was-file'), file('was-file/f', 1), link('l1', 'new'), link('l2', 'same')];
    const dst = [dir('was-dir'), file('was-dir/inner', 9), file('was-file', 1), link('l1', 'old'), link('l2', 'same')];
    const p = planBundleCopy(src, dst);
    expect(p.remove.map((e) => e.rel)).toEqual(['l1', 'was-dir', 'was-file']);
    expect(p.copy.map((f) => f.rel)).toEqual(['was-dir', 'was-file/f']);
    expect(p.links.map((l) => l.rel)).toEqual(['l1']);
  });

  it('refuses a special file, naming it', () => {
    const fifo: TreeEntry = { rel: 'h/pipe', kind: 'other', what: 'FIFO', mode: 0o644, size: 0, mtimeMs: 0 };
    let err: unknown;
    try {
      planBundleCopy([dir('h'), fifo], [], '/iso/bundle');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(HvError);
    expect((err as HvError).message).toBe('the image bundle holds /iso/bundle/h/pipe, a FIFO, which cannot be copied');
    expect((err as HvError).exitCode).toBe(ExitCode.installFailed);
  });
});

describe('bundleSpaceProblem', () => {
  const plan = planBundleCopy([file('a', 10 * 4096 + 1), file('b', 1)], [file('stale', 8192)]);
  const need = 11 * 4096 + 4096; // a: 11 blocks, b: 1 block
  it('fits when the blocks to write plus the headroom are free, counting what the removals free', () => {
    const bavail = (need + SPACE_HEADROOM_BYTES - 8192) / 4096;
    expect(bundleSpaceProblem(plan, { bsize: 4096, bavail }, '/mnt/p')).toBeUndefined();
  });
  it('one block short: a clear error with what, where and what to do', () => {
    const bavail = (need + SPACE_HEADROOM_BYTES - 8192) / 4096 - 1;
    const err = bundleSpaceProblem(plan, { bsize: 4096, bavail }, '/mnt/p/bundle');
    expect(err).toBeInstanceOf(HvError);
    expect(err!.message).toMatch(/^the image bundle does not fit on COS_PERSISTENT: .* to copy \(2 files\) plus 64 MiB headroom, .* free$/);
    expect(err!.where).toBe('/mnt/p/bundle');
    expect(err!.hint).toContain('--bundle none');
  });
});

describe('copyBundle on temp directories', () => {
  it('copies files, directories, modes, mtimes and symlinks; progress ends at the bytes copied', async () => {
    const t = await tmp();
    const src = await makeBundle(t);
    const dst = path.join(t, 'persistent/.state/var-lib-rancher.bind/hvagent/bundle');
    const progress: Array<[number, number]> = [];
    const r = await copyBundle(src, dst, { statfs: bigFs, onProgress: (d, n) => progress.push([d, n]) });
    expect(await manifest(dst)).toEqual(await manifest(src));
    expect((await stat(path.join(dst, 'harvester/run.sh'))).mode & 0o777).toBe(0o750);
    expect(await readlink(path.join(dst, 'harvester/latest.tar.zst'))).toBe('images/a.tar.zst');
    const total = 300_000 + (await stat(path.join(src, 'metadata.yaml'))).size + 33 + 10;
    expect(r).toMatchObject({ files: 4, bytes: total, copied: 4, copiedBytes: total, kept: 0, removed: [] });
    expect(progress[0]).toEqual([0, total]);
    expect(progress.at(-1)).toEqual([total, total]);
    expect(progress.every(([d], i) => i === 0 || d >= progress[i - 1]![0])).toBe(true);
  });

  it('a re-run keeps every file (same inode and mtime) and copies nothing', async () => {
    const t = await tmp();
    const src = await makeBundle(t);
    const dst = path.join(t, 'dst');
    await copyBundle(src, dst, { statfs: bigFs });
    const before = await stat(path.join(dst, 'harvester/images/a.tar.zst'));
    const r = await copyBundle(src, dst, { statfs: bigFs });
    const after = await stat(path.join(dst, 'harvester/images/a.tar.zst'));
    expect(r).toMatchObject({ copied: 0, copiedBytes: 0, kept: 4, removed: [] });
    expect([after.ino, after.mtimeMs]).toEqual([before.ino, before.mtimeMs]);
    expect(await manifest(dst)).toEqual(await manifest(src));
  });

  it('recopies a changed source file (same size, newer mtime), keeping the others', async () => {
    const t = await tmp();
    const src = await makeBundle(t);
    const dst = path.join(t, 'dst');
    await copyBundle(src, dst, { statfs: bigFs });
    const list = path.join(src, 'harvester/images-lists/a.txt');
    await writeFile(list, 'docker.io/library/busybox:1.36.1\n'.slice(0, 33));
    await utimes(list, new Date(), new Date(Date.now() + 5000));
    const keptIno = (await stat(path.join(dst, 'harvester/images/a.tar.zst'))).ino;
    const r = await copyBundle(src, dst, { statfs: bigFs });
    expect(r).toMatchObject({ copied: 1, kept: 3 });
    expect(await readFile(path.join(dst, 'harvester/images-lists/a.txt'), 'utf8')).toBe(await readFile(list, 'utf8'));
    expect((await stat(path.join(dst, 'harvester/images/a.tar.zst'))).ino).toBe(keptIno);
    expect(await manifest(dst)).toEqual(await manifest(src));
  });

  it('removes a stale bundle and the temp file a killed copy left behind', async () => {
    const t = await tmp();
    const src = await makeBundle(t);
    const dst = path.join(t, 'dst');
    await copyBundle(src, dst, { statfs: bigFs });
    await mkdir(path.join(dst, 'rancherd/images'), { recursive: true });
    await writeFile(path.join(dst, 'rancherd/images/old-v1.tar.zst'), 'old');
    await writeFile(path.join(dst, 'harvester/images/.a.tar.zst.0123456789ab.hvbundle-tmp'), Buffer.alloc(1000));
    const r = await copyBundle(src, dst, { statfs: bigFs });
    expect(r.removed).toEqual(['harvester/images/.a.tar.zst.0123456789ab.hvbundle-tmp', 'rancherd']);
    expect(await manifest(dst)).toEqual(await manifest(src));
  });

  it('a truncated destination file (same mtime, shorter) is recopied', async () => {
    const t = await tmp();
    const src = await makeBundle(t);
    const dst = path.join(t, 'dst');
    await copyBundle(src, dst, { statfs: bigFs });
    const a = path.join(dst, 'harvester/images/a.tar.zst');
    const m = (await stat(a)).mtime;
    await writeFile(a, Buffer.alloc(10));
    await utimes(a, m, m);
    expect(await copyBundle(src, dst, { statfs: bigFs })).toMatchObject({ copied: 1, kept: 3 });
    expect(await manifest(dst)).toEqual(await manifest(src));
  });

  it('read-only source directories are copied read-only, and a re-run into them still works', async () => {
    const t = await tmp();
    const src = await makeBundle(t);
    const dst = path.join(t, 'dst');
    await chmod(path.join(src, 'harvester/images'), 0o555);
    await copyBundle(src, dst, { statfs: bigFs });
    expect((await stat(path.join(dst, 'harvester/images'))).mode & 0o777).toBe(0o555);
    await writeFile(path.join(src, 'metadata.yaml'), 'images: {}\n');
    await chmod(path.join(src, 'harvester/images'), 0o755);
    await rm(path.join(src, 'harvester/images/a.tar.zst'));
    await chmod(path.join(src, 'harvester/images'), 0o555);
    const r = await copyBundle(src, dst, { statfs: bigFs });
    expect(r.removed).toEqual(['harvester/images/a.tar.zst']); // latest.tar.zst stays: a dangling symlink is still one
    expect(await manifest(dst)).toEqual(await manifest(src));
  });

  it('refuses when it does not fit, before writing anything', async () => {
    const t = await tmp();
    const src = await makeBundle(t);
    const dst = path.join(t, 'dst');
    await expect(copyBundle(src, dst, { statfs: async () => ({ bsize: 4096, bavail: 100 }) })).rejects.toThrow(/does not fit on COS_PERSISTENT/);
    expect(await readdir(dst)).toEqual([]);
  });

  it('refuses a bundle holding a FIFO, naming it, before writing anything', async () => {
    const t = await tmp();
    const src = await makeBundle(t);
    execFileSync('mkfifo', [path.join(src, 'harvester/pipe')]);
    const dst = path.join(t, 'dst');
    await expect(copyBundle(src, dst, { statfs: bigFs })).rejects.toThrow(`the image bundle holds ${src}/harvester/pipe, a FIFO, which cannot be copied`);
    expect(await readdir(dst)).toEqual([]);
  });

  it('checks every file, copied (before it gets its name) or kept; a failed check fails the copy, and the file neither gets its name nor stays', async () => {
    const t = await tmp();
    const src = await makeBundle(t);
    const dst = path.join(t, 'dst');
    const seen: Record<string, string> = {};
    const check = async (rel: string, file: string) => {
      seen[rel] = (await readFile(file)).toString('base64');
    };
    await copyBundle(src, dst, { statfs: bigFs, check });
    const files = (await scanTree(src)).filter((e) => e.kind === 'file').map((e) => e.rel).sort();
    expect(files.length).toBe(4);
    expect(Object.keys(seen).sort()).toEqual(files);
    for (const rel of files) expect(seen[rel]).toBe((await readFile(path.join(src, rel))).toString('base64'));
    // A re-run keeps them all, and checks them all the same.
    for (const k of Object.keys(seen)) delete seen[k];
    await copyBundle(src, dst, { statfs: bigFs, check });
    expect(Object.keys(seen).sort()).toEqual(files);
    await rm(dst, { recursive: true, force: true });
    const bad = 'harvester/images/a.tar.zst';
    const err = await copyBundle(src, dst, { statfs: bigFs, check: async (rel) => { if (rel === bad) throw new Error(`bad ${rel}`); } }).catch((e: unknown) => e);
    expect((err as Error).message).toBe(`bad ${bad}`);
    const left = (await scanTree(dst)).map((e) => e.rel);
    expect(left.filter((r) => r.endsWith('.hvbundle-tmp'))).toEqual([]);
    expect(left).not.toContain(bad);
  });

  it('stops on abort mid-copy and leaves no temp file; the next run completes', async () => {
    const t = await tmp();
    const src = await makeBundle(t);
    await writeFile(path.join(src, 'harvester/images/big.tar.zst'), Buffer.alloc(12 * 1024 * 1024, 1));
    const dst = path.join(t, 'dst');
    const ac = new AbortController();
    const err = await copyBundle(src, dst, {
      statfs: bigFs,
      signal: ac.signal,
      onProgress: (d) => {
        if (d >= 4 * 1024 * 1024) ac.abort(new Error('interrupted by SIGTERM'));
      },
    }).catch((e: unknown) => e);
    expect((err as Error).message).toBe('interrupted by SIGTERM');
    const left = (await scanTree(dst)).map((e) => e.rel);
    expect(left.filter((r) => r.endsWith('.hvbundle-tmp'))).toEqual([]);
    expect(left).not.toContain('harvester/images/big.tar.zst');
    await copyBundle(src, dst, { statfs: bigFs });
    expect(await manifest(dst)).toEqual(await manifest(src));
  });
});
