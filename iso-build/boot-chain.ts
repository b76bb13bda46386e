import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { HvError, ExitCode } from '../lib/errors.js';
import { run } from '../lib/exec.js';
import { BUSYBOX } from './test-os-tree.js';
import { copyKernelModules } from './initrd-parts.js';

export interface BootChainOptions {
  /** Where the downloaded kernel package and its unpacked tree are kept between runs. */
  cacheDir: string;
  /** Debian package; default: what linux-image-amd64 depends on. */
  kernelPackage?: string;
}

/** Modules the initramfs loads (with their dependencies) to reach COS_STATE and the image. */
// crc32c first: ext4 asks the crypto API for it at mount time, which needs a modprobe the
// kernel can call, so it is loaded up front instead.
export const INITRD_MODULES = ['nvme', 'virtio_blk', 'virtio_pci', 'loop', 'crc32c_generic', 'ext4'] as const;

/**
 * Adds boot/vmlinuz (Debian's kernel) and boot/initrd to an OS tree. The initrd is the test
 * implementation of the cos-img boot chain Harvester's initramfs also follows: find the
 * partition named by root=LABEL=, mount it read-only, loop-mount cos-img/filename as the new root,
 * switch_root into it.
 */
export async function addBootChain(tree: string, opts: BootChainOptions): Promise<Record<string, string>> {
  const kernel = await fetchDebianKernel(opts.cacheDir, opts.kernelPackage);
  const work = await mkdtemp(path.join(os.tmpdir(), 'hv-initrd-'));
  try {
    const root = path.join(work, 'root');
    for (const d of ['bin', 'proc', 'sys', 'dev', 'state', 'newroot', 'lib/modules']) await mkdir(path.join(root, d), { recursive: true });
    await symlink('bin', path.join(root, 'sbin')); // the kernel calls /sbin/modprobe for module requests
    await copyFile(BUSYBOX, path.join(root, 'bin/busybox'));
    await chmod(path.join(root, 'bin/busybox'), 0o755);
    const loaded = await copyKernelModules(root, kernel.modulesRoot, kernel.version, INITRD_MODULES);
    await writeFile(path.join(root, 'modules.list'), loaded.join('\n') + '\n');
    await writeFile(path.join(root, 'init'), INITRD_INIT, { mode: 0o755 });
    const initrd = path.join(tree, 'boot/initrd');
    await mkdir(path.dirname(initrd), { recursive: true });
    await run('sh', ['-c', `cd '${root}' && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1 > '${initrd}'`]);
    await copyFile(kernel.vmlinuz, path.join(tree, 'boot/vmlinuz'));
    return {
      'boot/vmlinuz': await sha256Of(path.join(tree, 'boot/vmlinuz')),
      'boot/initrd': await sha256Of(initrd),
    };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

interface DebianKernel {
  version: string;
  vmlinuz: string;
  /** Directory holding lib/modules/<version> (a modprobe -d base). */
  modulesRoot: string;
}

/** Downloads (once) and unpacks Debian's kernel package into the cache. */
export async function fetchDebianKernel(cacheDir: string, pkg?: string): Promise<DebianKernel> {
  await mkdir(cacheDir, { recursive: true });
  const name = pkg ?? (await defaultKernelPackage());
  const unpacked = path.join(cacheDir, name);
  if (!(await stat(path.join(unpacked, 'boot')).catch(() => undefined))) {
    // Several tests (and make e2e) may fetch at once: each works in its own directory and publishes
    // with an atomic rename, so no one ever sees a half-written .deb or a half-unpacked tree.
    const work = await mkdtemp(path.join(cacheDir, `.${name}.`));
    try {
      let deb = (await readdir(cacheDir)).find((f) => f.startsWith(`${name}_`) && f.endsWith('.deb'));
      if (!deb) {
        await run('apt-get', ['download', name], { cwd: work, timeoutMs: 20 * 60_000 }).catch((err: unknown) => {
          throw new HvError(`cannot download the kernel package ${name}`, {
            where: 'iso-build: apt-get download',
            hint: 'run apt-get update, and check that Debian mirrors are reachable',
            exitCode: ExitCode.usage,
            cause: err,
          });
        });
        deb = (await readdir(work)).find((f) => f.startsWith(`${name}_`) && f.endsWith('.deb'));
        if (!deb) throw new HvError(`apt-get download ${name} left no .deb in ${work}`, { where: 'iso-build', exitCode: ExitCode.usage });
        await rename(path.join(work, deb), path.join(cacheDir, deb));
      }
      const tmp = path.join(work, 'unpacked');
      await run('dpkg-deb', ['-x', path.join(cacheDir, deb), tmp], { timeoutMs: 20 * 60_000 });
      await run('depmod', ['-b', tmp, (await readdir(path.join(tmp, 'lib/modules')))[0]]);
      // A leftover without boot/ (an old interrupted unpack) is replaced; a complete one from a
      // concurrent fetch makes our rename fail, which is fine.
      if (!(await stat(path.join(unpacked, 'boot')).catch(() => undefined))) await rm(unpacked, { recursive: true, force: true });
      await rename(tmp, unpacked).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
      });
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }
  const version = (await readdir(path.join(unpacked, 'lib/modules')))[0];
  return { version, vmlinuz: path.join(unpacked, 'boot', `vmlinuz-${version}`), modulesRoot: unpacked };
}

async function defaultKernelPackage(): Promise<string> {
  const r = await run('apt-cache', ['depends', 'linux-image-amd64']);
  const m = /Depends:\s*(linux-image-\S+)/.exec(r.stdout);
  if (!m) throw new HvError('cannot tell which kernel package linux-image-amd64 depends on', { where: 'iso-build: apt-cache depends', hint: 'run apt-get update', exitCode: ExitCode.usage });
  return m[1];
}

async function sha256Of(file: string): Promise<string> {
  return createHash('sha256').update(await readFile(file)).digest('hex');
}

/** PID 1 of the test initramfs: the cos-img boot chain. Prints HVTEST-INITRD lines for tests. */
const INITRD_INIT = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.list); do modprobe "$m" 2>/dev/null; done
label=; img=
for a in $(cat /proc/cmdline); do
  case "$a" in
    root=LABEL=*) label="\${a#root=LABEL=}" ;;
    cos-img/filename=*) img="\${a#cos-img/filename=}" ;;
  esac
done
echo "HVTEST-INITRD root=LABEL=$label image=$img"
dev=; i=0
while [ $i -lt 30 ]; do
  dev=$(findfs "LABEL=$label" 2>/dev/null) && break
  sleep 1; i=$((i + 1))
done
fail() { echo "HVTEST-INITRD-FAILED $*"; sleep 1; poweroff -f; }
[ -n "$dev" ] || fail "no device labelled $label"
mount -o ro "$dev" /state || fail "cannot mount $dev"
[ -f "/state$img" ] || fail "no image $img on $dev"
mount -o ro,loop "/state$img" /newroot || fail "cannot loop-mount $img"
mkdir -p /newroot/run 2>/dev/null
exec switch_root /newroot /sbin/init
`;
