/**
 * Debian packages the build takes files from (the kernel, shim-signed, grub-efi-amd64-signed):
 * `apt-get download` once into a cache shared between runs and worktrees, unpacked there with
 * `dpkg-deb -x`. Never installed on the build host, never committed.
 */
import { mkdir, mkdtemp, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode } from '../lib/errors.js';
import { run } from '../lib/exec.js';

export interface DebianPackage {
  name: string;
  /** The downloaded .deb in the cache (its file name carries the version). */
  deb: string;
  /** Where it is unpacked (the package's files under their absolute paths). */
  dir: string;
}

/** `<name>_<version>_<arch>.deb` → version (`%3a` is apt's spelling of an epoch colon). Pure. */
export function debVersion(debFile: string): string | undefined {
  const m = /^[^_]+_([^_]+)_[^_]+\.deb$/.exec(path.basename(debFile));
  return m ? decodeURIComponent(m[1]) : undefined;
}

/**
 * Downloads (once) and unpacks a package into cacheDir. `afterUnpack` runs on the fresh tree before
 * it is published (the kernel's depmod). Concurrent callers each work in a directory of their own
 * and publish with an atomic rename, so nobody sees a half-written .deb or a half-unpacked tree.
 */
export async function fetchDebianPackage(cacheDir: string, name: string, opts: { afterUnpack?: (dir: string) => Promise<void>; purpose?: string } = {}): Promise<DebianPackage> {
  await mkdir(cacheDir, { recursive: true });
  const unpacked = path.join(cacheDir, name);
  const findDeb = async (dir: string) => (await readdir(dir)).find((f) => f.startsWith(`${name}_`) && f.endsWith('.deb'));
  if (!(await isComplete(unpacked))) {
    const work = await mkdtemp(path.join(cacheDir, `.${name}.`));
    try {
      let deb = await findDeb(cacheDir);
      if (!deb) {
        await run('apt-get', ['download', name], { cwd: work, timeoutMs: 20 * 60_000 }).catch((err: unknown) => {
          throw new HvError(`cannot download the Debian package ${name}${opts.purpose ? ` (${opts.purpose})` : ''}`, {
            where: 'iso-build: apt-get download',
            hint: `run apt-get update; ${name} comes from Debian bookworm main, which apt's sources must list`,
            exitCode: ExitCode.usage,
            cause: err,
          });
        });
        deb = await findDeb(work);
        if (!deb) throw new HvError(`apt-get download ${name} left no .deb in ${work}`, { where: 'iso-build', exitCode: ExitCode.usage });
        await rename(path.join(work, deb), path.join(cacheDir, deb));
      }
      const tmp = path.join(work, 'unpacked');
      await run('dpkg-deb', ['-x', path.join(cacheDir, deb), tmp], { timeoutMs: 20 * 60_000 });
      if (opts.afterUnpack) await opts.afterUnpack(tmp);
      await writeMarker(tmp);
      // A leftover without the marker (an old interrupted unpack) is replaced; a complete one from a
      // concurrent fetch makes our rename fail, which is fine.
      if (!(await isComplete(unpacked))) await rm(unpacked, { recursive: true, force: true });
      await rename(tmp, unpacked).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
      });
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }
  const deb = await findDeb(cacheDir);
  if (!deb) throw new HvError(`${unpacked} exists but its .deb is gone from ${cacheDir}`, { hint: `remove ${unpacked} and build again`, exitCode: ExitCode.usage });
  return { name, deb: path.join(cacheDir, deb), dir: unpacked };
}

// Written last into a fresh unpack: its presence means the tree is whole. Trees unpacked before
// the marker existed (a kernel with boot/) count as whole too.
const MARKER = '.hv-unpacked';

async function writeMarker(dir: string): Promise<void> {
  await writeFile(path.join(dir, MARKER), '');
}

async function isComplete(dir: string): Promise<boolean> {
  if (await stat(path.join(dir, MARKER)).catch(() => undefined)) return true;
  return (await stat(path.join(dir, 'boot')).catch(() => undefined)) !== undefined;
}

/** A file the build needs from a package; says which package should have had it when it is missing. */
export async function packageFile(pkg: DebianPackage, file: string): Promise<string> {
  const p = path.join(pkg.dir, file);
  if (!(await stat(p).then((s) => s.isFile()).catch(() => false))) {
    throw new HvError(`${file} is not in the Debian package ${pkg.name} (${path.basename(pkg.deb)})`, {
      where: pkg.dir,
      hint: `the package's layout changed, or the download is damaged: remove ${pkg.dir} and ${pkg.deb} and build again`,
      exitCode: ExitCode.usage,
    });
  }
  return p;
}
