// A build host without a tool, or whose apt cannot give a package, or whose package lacks a file:
// each stops the build with the package named and what to do, and leaves nothing half-written.
import { chmod, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HvError } from '../../../lib/errors.js';
import { run } from '../../../lib/exec.js';
import { debVersion, fetchDebianPackage, packageFile } from '../../../iso-build/debian-package.js';
import { requireBuildTools } from '../../../iso-build/host-tools.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'hv-host-faults-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('requireBuildTools', () => {
  it('names every missing command and file with its Debian package, in one message', async () => {
    const bin = path.join(dir, 'bin');
    await mkdir(bin, { recursive: true });
    await writeFile(path.join(bin, 'xorriso'), '#!/bin/sh\n', { mode: 0o755 });
    const err = await requireBuildTools({
      pathVar: bin,
      tools: { xorriso: 'xorriso', mcopy: 'mtools', 'mkfs.vfat': 'dosfstools' },
      files: { [path.join(dir, 'no/boot_hybrid.img')]: 'grub-pc-bin' },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HvError);
    const e = err as HvError;
    expect(e.message).toContain('the command mcopy (package mtools)');
    expect(e.message).toContain('the command mkfs.vfat (package dosfstools)');
    expect(e.message).toContain('no/boot_hybrid.img (package grub-pc-bin)');
    expect(e.message).not.toContain('xorriso');
    expect(e.hint).toBe('apt-get install dosfstools grub-pc-bin mtools  (make deps installs everything in .ci/apt-packages.txt)');
    expect(e.exitCode).toBe(2);
  });

  it('passes when everything is there', async () => {
    await expect(requireBuildTools({ pathVar: path.join(dir, 'bin'), tools: { xorriso: 'xorriso' }, files: {} })).resolves.toBeUndefined();
  });
});

describe('fetchDebianPackage', () => {
  // apt-get stubbed first on PATH: what it does decides the case.
  async function withApt<T>(script: string, fn: () => Promise<T>): Promise<T> {
    const bin = await mkdtemp(path.join(dir, 'apt-'));
    await writeFile(path.join(bin, 'apt-get'), `#!/bin/sh\n${script}\n`);
    await chmod(path.join(bin, 'apt-get'), 0o755);
    const old = process.env.PATH;
    process.env.PATH = `${bin}:${old}`;
    try {
      return await fn();
    } finally {
      process.env.PATH = old;
    }
  }

  it('a package apt cannot give: the package and what to do, and no leftovers in the cache', async () => {
    const cache = path.join(dir, 'cache-missing');
    const err = await withApt("echo 'E: Unable to locate package shim-signed' >&2; exit 100", () =>
      fetchDebianPackage(cache, 'shim-signed', { purpose: 'the Secure Boot chain of the ISO' }).catch((e: unknown) => e),
    );
    const e = err as HvError;
    expect(e.message).toBe('cannot download the Debian package shim-signed (the Secure Boot chain of the ISO)');
    expect(e.hint).toMatch(/apt-get update; shim-signed comes from Debian bookworm main/);
    expect(String((e.cause as Error).message)).toContain('Unable to locate package shim-signed');
    expect(await readdir(cache)).toEqual([]);
  });

  it('a package without the file the build needs says which package and which file', async () => {
    const cache = path.join(dir, 'cache-wrong');
    const src = path.join(dir, 'deb-src');
    await mkdir(path.join(src, 'DEBIAN'), { recursive: true });
    await mkdir(path.join(src, 'usr/lib/shim'), { recursive: true });
    await writeFile(path.join(src, 'usr/lib/shim/other.efi'), 'x');
    await writeFile(path.join(src, 'DEBIAN/control'), 'Package: shim-signed\nVersion: 1.0\nArchitecture: amd64\nMaintainer: t <t@t>\nDescription: test\n');
    const deb = path.join(dir, 'shim-signed_1.0_amd64.deb');
    await run('dpkg-deb', ['--root-owner-group', '-b', src, deb]);
    const pkg = await withApt(`cp '${deb}' .`, () => fetchDebianPackage(cache, 'shim-signed'));
    expect(debVersion(pkg.deb)).toBe('1.0');
    const err = await packageFile(pkg, '/usr/lib/shim/shimx64.efi.signed').catch((e: unknown) => e);
    expect((err as HvError).message).toBe('/usr/lib/shim/shimx64.efi.signed is not in the Debian package shim-signed (shim-signed_1.0_amd64.deb)');
    // Cached: a second fetch does not call apt-get again (this one would fail).
    await expect(withApt('exit 1', () => fetchDebianPackage(cache, 'shim-signed'))).resolves.toMatchObject({ deb: pkg.deb });
  });

  it('reads versions from package file names, epochs included', () => {
    expect(debVersion('/c/shim-signed_1.51~1+deb12u1+16.1-2~deb12u1_amd64.deb')).toBe('1.51~1+deb12u1+16.1-2~deb12u1');
    expect(debVersion('grub-efi-amd64-signed_1%3a2.06_amd64.deb')).toBe('1:2.06');
    expect(debVersion('not-a-deb.txt')).toBeUndefined();
  });
});
