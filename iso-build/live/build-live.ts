/**
 * Builds the live installer system in three parts (docs/iso.md):
 * - the live root, a squashfs (hvlive/live.squashfs on the medium): Debian's kernel modules the
 *   installer needs, busybox, node with its shared libraries, the built hvinstall (dist/ and only
 *   the production node_modules) and the disk tools the install engine runs. Its /init
 *   (init-script.ts) runs the automatic install (harvester.install.automatic=true +
 *   harvester.install.config_url=…) as Harvester's live ISO does;
 * - the small initramfs (initramfs.ts) that finds the medium by label and switch_roots into the
 *   live root, and the PXE initrd (the same with the live root appended);
 * - the OS image to install (rootfs.squashfs: the test OS tree with its A/B boot chain, or a given
 *   image), which the ISO carries next to bundle/.
 * Everything is stamped with one build time (reproducible.ts), so the same inputs give the same bytes.
 */
import { createHash } from 'node:crypto';
import { chmod, copyFile, cp, lstat, mkdir, mkdtemp, readFile, readlink, realpath, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { createReadStream } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import { findOnPath } from '../../lib/find-on-path.js';
import { fetchDebianKernel } from '../boot-chain.js';
import { copyKernelModules } from '../kernel-modules.js';
import { packSquashfs } from '../reproducible.js';
import { BUSYBOX } from '../host-tools.js';
import { buildInitramfs, buildPxeInitrd } from './initramfs.js';
import { buildOsImage } from './os-image.js';
import { LIVE_INIT, UDHCPC_SCRIPT } from './init-script.js';
import { LIVE_DATA_DIRS, LIVE_LIBRARIES, LIVE_MODULES, LIVE_TOOLS, OPTIONAL_TOOLS } from './tools.js';

export interface LiveBuildOptions {
  /** The repository whose dist/, bin/, package.json and package-lock.json are packed. */
  repoDir: string;
  /** Where the parts are written (vmlinuz, initrd, initrd-pxe, live.squashfs, rootfs.squashfs). */
  outDir: string;
  /** Downloads kept between runs (the Debian kernel package). */
  cacheDir: string;
  kernelPackage?: string;
  /** The build time stamped on every file (reproducible.ts buildEpoch). */
  epoch: number;
  /** A prebuilt OS image (squashfs) to install instead of the test OS. */
  osImage?: string;
}

export interface LiveBuild {
  kernel: string;
  /** The small initramfs (the ISO's /boot/initrd; also -kernel/-initrd with the medium attached). */
  initrd: string;
  /** The initramfs with the live root appended: the PXE initrd, needs no medium. */
  pxeInitrd: string;
  /** The live root (the medium's hvlive/live.squashfs). */
  liveSquashfs: string;
  /** The OS image to install (the medium's rootfs.squashfs, the PXE rootfs). */
  osSquashfs: string;
  kernelVersion: string;
  /** The kernel package file (its name carries the version). */
  kernelDeb: string;
  /** Names this build's medium: the ISO carries /.disk/id/<mediumId>, the initramfs looks for it. */
  mediumId: string;
  /** Tools the build host lacked (only optional ones are tolerated). */
  missingOptionalTools: string[];
}

/** The one-file bundle of the CLI that `make build` writes (scripts/generators/live-cli-bundle.mjs). */
export const LIVE_CLI_BUNDLE = 'dist/installer/hvinstall.bundle.js';
/** Where hvinstall lives inside the live system. */
export const LIVE_APP_DIR = '/opt/hvinstall';
/** Where the live system finds the boot medium (dracut's dmsquash-live mount point). */
export const LIVE_MEDIUM_DIR = '/run/initramfs/live';

export async function buildLiveInstaller(opts: LiveBuildOptions): Promise<LiveBuild> {
  const repo = path.resolve(opts.repoDir);
  if (!(await stat(path.join(repo, 'dist/installer/cli.js')).catch(() => undefined))) {
    throw new HvError(`${repo}/dist is not built`, { where: 'iso-build/live', hint: 'run make build first', exitCode: ExitCode.usage });
  }
  const outDir = path.resolve(opts.outDir);
  await mkdir(outDir, { recursive: true });
  const kernel = await fetchDebianKernel(path.join(opts.cacheDir, 'kernel'), opts.kernelPackage);
  const work = await mkdtemp(path.join(os.tmpdir(), 'hv-live-'));
  try {
    const root = path.join(work, 'root');
    await makeSkeleton(root);
    await copyKernelModules(path.join(root, 'usr'), kernel.modulesRoot, kernel.version, LIVE_MODULES);

    const busybox = path.join(root, 'usr/bin/busybox');
    await copyFile(BUSYBOX, busybox);
    await chmod(busybox, 0o755);
    await symlink('busybox', path.join(root, 'usr/bin/sh'));
    // The kernel runs /sbin/modprobe for module requests (a filesystem type, crc32c for ext4).
    await symlink('/usr/bin/busybox', path.join(root, 'usr/sbin/modprobe'));

    const missingOptionalTools: string[] = [];
    const binaries: string[] = [process.execPath];
    for (const tool of LIVE_TOOLS) {
      const found = await findOnPath(tool, HOST_TOOL_DIRS);
      if (found) binaries.push(found);
      else if (OPTIONAL_TOOLS.has(tool)) missingOptionalTools.push(tool);
      else throw new HvError(`${tool} is not installed on the build host`, { where: 'iso-build/live', hint: 'run make deps (it installs .ci/apt-packages.txt)', exitCode: ExitCode.usage });
    }
    for (const bin of [...binaries, ...LIVE_LIBRARIES]) await copyWithLibraries(root, bin);
    if (path.resolve(process.execPath) !== '/usr/bin/node') await symlink(process.execPath, path.join(root, 'usr/bin/node')).catch(() => undefined);
    for (const dir of LIVE_DATA_DIRS) {
      if (await stat(dir).catch(() => undefined)) await cp(dir, path.join(root, dir), { recursive: true, verbatimSymlinks: true });
    }

    await copyApp(repo, path.join(root, LIVE_APP_DIR.slice(1)));
    await writeFile(path.join(root, 'usr/bin/hvinstall'), liveLauncher(await liveEntry(repo)), { mode: 0o755 });

    await writeFile(path.join(root, 'init'), LIVE_INIT, { mode: 0o755 });
    await writeFile(path.join(root, 'etc/hv-live/udhcpc.script'), UDHCPC_SCRIPT, { mode: 0o755 });
    await writeFile(path.join(root, 'etc/hv-live/modules'), LIVE_MODULES.join('\n') + '\n');
    await writeFile(path.join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
    await writeFile(path.join(root, 'etc/group'), 'root:x:0:\n');

    const liveSquashfs = path.join(outDir, 'live.squashfs');
    await rm(liveSquashfs, { force: true });
    // zstd level 9: within a few per cent of the default (15) in size, several times faster to build.
    await packSquashfs(root, liveSquashfs, opts.epoch, { zstdLevel: 9, timeoutMs: 20 * 60_000 });

    const osSquashfs = path.join(outDir, 'rootfs.squashfs');
    if (opts.osImage) await copyFile(opts.osImage, osSquashfs);
    else await buildOsImage({ workDir: work, cacheDir: opts.cacheDir, kernelPackage: opts.kernelPackage, out: osSquashfs, epoch: opts.epoch });

    const vmlinuz = path.join(outDir, 'vmlinuz');
    await copyFile(kernel.vmlinuz, vmlinuz);
    // The medium id depends on what must match the initramfs: the kernel (its modules) and the live root.
    const mediumId = (await sha256Files([vmlinuz, liveSquashfs])).slice(0, 16);
    const initrd = path.join(outDir, 'initrd');
    await buildInitramfs({ kernel, mediumId, epoch: opts.epoch, out: initrd });
    const pxeInitrd = path.join(outDir, 'initrd-pxe');
    await buildPxeInitrd({ initramfs: initrd, liveSquashfs, epoch: opts.epoch, out: pxeInitrd });
    return {
      kernel: vmlinuz,
      initrd,
      pxeInitrd,
      liveSquashfs,
      osSquashfs,
      kernelVersion: kernel.version,
      kernelDeb: kernel.deb,
      mediumId,
      missingOptionalTools,
    };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** Merged-/usr layout, as Debian's: /bin, /sbin, /lib, /lib64 are links into /usr. */
async function makeSkeleton(root: string): Promise<void> {
  for (const d of ['usr/bin', 'usr/sbin', 'usr/lib', 'usr/lib64', 'etc/hv-live', 'proc', 'sys', 'dev', 'run', 'tmp', 'root', 'var/lib', 'mnt', 'bb', 'oem']) {
    await mkdir(path.join(root, d), { recursive: true });
  }
  for (const [link, target] of [['bin', 'usr/bin'], ['sbin', 'usr/sbin'], ['lib', 'usr/lib'], ['lib64', 'usr/lib64']]) {
    await symlink(target, path.join(root, link));
  }
  await chmod(path.join(root, 'tmp'), 0o1777);
}

/** The host's own tools, whatever PATH the build runs with. */
const HOST_TOOL_DIRS = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Copies a binary (keeping a symlink as a symlink to its copied target) and every library ldd names. */
async function copyWithLibraries(root: string, file: string): Promise<void> {
  await copyPath(root, file);
  const r = await run('ldd', [file], { allowFailure: true });
  if (r.exitCode !== 0) return; // statically linked
  for (const line of r.stdout.split('\n')) {
    const lib = /=>\s*(\/\S+)/.exec(line)?.[1] ?? /^\s*(\/\S+)\s+\(/.exec(line)?.[1];
    if (lib) await copyPath(root, lib);
  }
}

/** Copies an absolute path into root at the same place (through /usr on the merged layout), following symlinks. */
async function copyPath(root: string, file: string): Promise<void> {
  const dest = path.join(root, usrPath(file));
  if (await lstat(dest).catch(() => undefined)) return;
  await mkdir(path.dirname(dest), { recursive: true });
  const st = await lstat(file);
  if (st.isSymbolicLink()) {
    const target = await readlink(file);
    const absolute = path.resolve(path.dirname(file), target);
    await copyPath(root, absolute);
    await symlink(path.isAbsolute(target) ? usrPath(target) : target, dest);
    return;
  }
  const real = await realpath(file);
  await copyFile(real, dest);
  await chmod(dest, st.mode & 0o7777);
}

function usrPath(p: string): string {
  return p.replace(/^\/(bin|sbin|lib|lib64)(\/|$)/, '/usr/$1$2');
}

/**
 * What the live system's hvinstall runs: the one-file bundle of the CLI when `make build` made it
 * (scripts/generators/live-cli-bundle.mjs; loading ~300 modules is most of a start under emulation
 * and on slow USB media), else the modules themselves.
 */
export async function liveEntry(repo: string): Promise<string> {
  const bundled = await stat(path.join(repo, LIVE_CLI_BUNDLE)).catch(() => undefined);
  return bundled?.isFile() ? LIVE_CLI_BUNDLE : 'dist/installer/cli.js';
}

/** The live system's /usr/bin/hvinstall for an entry (a path under the app directory). Pure. */
export function liveLauncher(entry: string): string {
  return `#!/bin/sh\nexec node ${LIVE_APP_DIR}/${entry} "$@"\n`;
}

/** dist/, the launcher, package.json, schemas and the production dependencies (from package-lock.json; dev ones left out). */
async function copyApp(repo: string, dest: string): Promise<void> {
  await mkdir(dest, { recursive: true });
  await cp(path.join(repo, 'dist'), path.join(dest, 'dist'), { recursive: true, filter: (src) => !src.endsWith('.map') });
  await copyFile(path.join(repo, 'package.json'), path.join(dest, 'package.json'));
  if (await stat(path.join(repo, 'schemas')).catch(() => undefined)) await cp(path.join(repo, 'schemas'), path.join(dest, 'schemas'), { recursive: true });
  // The self-contained hvagent the install puts on the node (hvinstall's default --agent).
  await cp(path.join(repo, 'build/hvagent-payload'), path.join(dest, 'build/hvagent-payload'), { recursive: true, preserveTimestamps: true });
  for (const pkgPath of productionPackages(JSON.parse(await readFile(path.join(repo, 'package-lock.json'), 'utf8')) as PackageLock)) {
    const src = path.join(repo, pkgPath);
    if (!(await stat(src).catch(() => undefined))) continue; // optional dependency for another platform
    await cp(src, path.join(dest, pkgPath), { recursive: true, verbatimSymlinks: true });
  }
}

interface PackageLock {
  packages: Record<string, { dev?: boolean; devOptional?: boolean; optional?: boolean; link?: boolean }>;
}

/** node_modules paths npm would install with --omit=dev. Pure. */
export function productionPackages(lock: PackageLock): string[] {
  return Object.entries(lock.packages)
    .filter(([p, meta]) => p.startsWith('node_modules/') && !meta.dev && !meta.devOptional && !meta.link)
    .map(([p]) => p)
    .sort();
}

/** sha256 over the files' bytes in order, streamed (the live root is tens of MiB). */
export async function sha256Files(files: string[]): Promise<string> {
  const h = createHash('sha256');
  for (const f of files) {
    for await (const chunk of createReadStream(f)) h.update(chunk as Buffer);
  }
  return h.digest('hex');
}
