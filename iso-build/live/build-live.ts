/**
 * Builds the live installer system as a kernel + one initramfs: Debian's kernel and the modules the
 * installer needs, busybox, node with its shared libraries, the built hvinstall (dist/ and only the
 * production node_modules), the disk tools the install engine runs, and an OS image to deploy
 * (os.squashfs: the test OS tree with its A/B boot chain). Its /init runs the automatic install
 * (harvester.install.automatic=true + harvester.install.config_url=…) as Harvester's live ISO does.
 */
import { createHash } from 'node:crypto';
import { chmod, copyFile, cp, lstat, mkdir, mkdtemp, readFile, readlink, realpath, rm, stat, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import { fetchDebianKernel } from '../boot-chain.js';
import { BUSYBOX } from '../test-os-tree.js';
import { buildOsImage } from './os-image.js';
import { LIVE_INIT, UDHCPC_SCRIPT } from './init-script.js';
import { LIVE_DATA_DIRS, LIVE_MODULES, LIVE_TOOLS, OPTIONAL_TOOLS } from './tools.js';

export interface LiveBuildOptions {
  /** The repository whose dist/, bin/, package.json and package-lock.json are packed. */
  repoDir: string;
  /** Where vmlinuz, initrd and os.squashfs are written. */
  outDir: string;
  /** Downloads kept between runs (the Debian kernel package). */
  cacheDir: string;
  kernelPackage?: string;
}

export interface LiveBuild {
  kernel: string;
  initrd: string;
  /** The OS image inside the initramfs, also left next to it for inspection. */
  osSquashfs: string;
  kernelVersion: string;
  /** Tools the build host lacked (only optional ones are tolerated). */
  missingOptionalTools: string[];
  initrdBytes: number;
}

/** Where hvinstall lives inside the live system. */
export const LIVE_APP_DIR = '/opt/hvinstall';
/** The OS image the live init deploys. */
export const LIVE_OS_IMAGE = '/run/live/os.squashfs';

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
    await copyModules(root, kernel.modulesRoot, kernel.version);

    const busybox = path.join(root, 'usr/bin/busybox');
    await copyFile(BUSYBOX, busybox);
    await chmod(busybox, 0o755);
    await symlink('busybox', path.join(root, 'usr/bin/sh'));
    // The kernel runs /sbin/modprobe for module requests (a filesystem type, crc32c for ext4).
    await symlink('/usr/bin/busybox', path.join(root, 'usr/sbin/modprobe'));

    const missingOptionalTools: string[] = [];
    const binaries: string[] = [process.execPath];
    for (const tool of LIVE_TOOLS) {
      const found = await which(tool);
      if (found) binaries.push(found);
      else if (OPTIONAL_TOOLS.has(tool)) missingOptionalTools.push(tool);
      else throw new HvError(`${tool} is not installed on the build host`, { where: 'iso-build/live', hint: 'run make deps (it installs .ci/apt-packages.txt)', exitCode: ExitCode.usage });
    }
    for (const bin of binaries) await copyWithLibraries(root, bin);
    if (path.resolve(process.execPath) !== '/usr/bin/node') await symlink(process.execPath, path.join(root, 'usr/bin/node')).catch(() => undefined);
    for (const dir of LIVE_DATA_DIRS) {
      if (await stat(dir).catch(() => undefined)) await cp(dir, path.join(root, dir), { recursive: true, verbatimSymlinks: true });
    }

    await copyApp(repo, path.join(root, LIVE_APP_DIR.slice(1)));
    await writeFile(path.join(root, 'usr/bin/hvinstall'), `#!/bin/sh\nexec node ${LIVE_APP_DIR}/dist/installer/cli.js "$@"\n`, { mode: 0o755 });

    const osSquashfs = path.join(outDir, 'os.squashfs');
    await buildOsImage({ workDir: work, cacheDir: opts.cacheDir, kernelPackage: opts.kernelPackage, out: osSquashfs });
    await copyFile(osSquashfs, path.join(root, LIVE_OS_IMAGE.slice(1)));

    await writeFile(path.join(root, 'init'), LIVE_INIT, { mode: 0o755 });
    await writeFile(path.join(root, 'etc/hv-live/udhcpc.script'), UDHCPC_SCRIPT, { mode: 0o755 });
    await writeFile(path.join(root, 'etc/hv-live/modules'), LIVE_MODULES.join('\n') + '\n');
    await writeFile(path.join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
    await writeFile(path.join(root, 'etc/group'), 'root:x:0:\n');

    const initrd = path.join(outDir, 'initrd.zst');
    // zstd: Debian's kernel unpacks a zstd initramfs (CONFIG_RD_ZSTD=y); -6 keeps the build quick.
    await run('sh', ['-c', `cd '${root}' && find . | LC_ALL=C sort | cpio -o -H newc --quiet | zstd -q -T0 -6 -f -o '${initrd}'`], { timeoutMs: 20 * 60_000 });
    const vmlinuz = path.join(outDir, 'vmlinuz');
    await copyFile(kernel.vmlinuz, vmlinuz);
    return { kernel: vmlinuz, initrd, osSquashfs, kernelVersion: kernel.version, missingOptionalTools, initrdBytes: (await stat(initrd)).size };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** Merged-/usr layout, as Debian's: /bin, /sbin, /lib, /lib64 are links into /usr. */
async function makeSkeleton(root: string): Promise<void> {
  for (const d of ['usr/bin', 'usr/sbin', 'usr/lib', 'usr/lib64', 'etc/hv-live', 'proc', 'sys', 'dev', 'run/live', 'tmp', 'root', 'var/lib', 'mnt', 'bb', 'oem']) {
    await mkdir(path.join(root, d), { recursive: true });
  }
  for (const [link, target] of [['bin', 'usr/bin'], ['sbin', 'usr/sbin'], ['lib', 'usr/lib'], ['lib64', 'usr/lib64']]) {
    await symlink(target, path.join(root, link));
  }
  await chmod(path.join(root, 'tmp'), 0o1777);
}

/** The live modules and their dependencies (modprobe --show-depends over the unpacked kernel), decompressed, then depmod. */
async function copyModules(root: string, modulesRoot: string, version: string): Promise<void> {
  for (const m of LIVE_MODULES) {
    const r = await run('modprobe', ['-d', modulesRoot, '-S', version, '--show-depends', m], { allowFailure: true });
    if (r.exitCode !== 0) continue; // built into the kernel
    for (const line of r.stdout.split('\n')) {
      const ko = /^insmod (\S+)/.exec(line.trim())?.[1];
      if (!ko) continue;
      const dest = path.join(root, 'usr', path.relative(modulesRoot, ko).replace(/\.(xz|zst|gz)$/, ''));
      if (await stat(dest).catch(() => undefined)) continue;
      await mkdir(path.dirname(dest), { recursive: true });
      if (ko.endsWith('.xz')) await run('sh', ['-c', `xz -dc '${ko}' > '${dest}'`]);
      else if (ko.endsWith('.zst')) await run('zstd', ['-q', '-f', '-d', ko, '-o', dest]);
      else await copyFile(ko, dest);
    }
  }
  await run('depmod', ['-b', path.join(root, 'usr'), version]);
}

async function which(tool: string): Promise<string | undefined> {
  for (const dir of ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin']) {
    const p = path.join(dir, tool);
    if (await stat(p).then((s) => s.isFile()).catch(() => false)) return p;
  }
  return undefined;
}

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

export async function sha256File(file: string): Promise<string> {
  return createHash('sha256').update(await readFile(file)).digest('hex');
}
