import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { HvError, ExitCode } from '../lib/errors.js';
import { run } from '../lib/exec.js';
import { fetchDebianPackage } from './debian-package.js';
import { copyKernelModules } from './kernel-modules.js';
import { FALLBACK_EPOCH, packCpio } from './reproducible.js';
import { BUSYBOX } from './host-tools.js';
import { POWEROFF_AFTER_OUTPUT } from './poweroff-after-output.js';

export interface BootChainOptions {
  /** Where the downloaded kernel package and its unpacked tree are kept between runs. */
  cacheDir: string;
  /** Debian package; default: what linux-image-amd64 depends on. */
  kernelPackage?: string;
  /** The time stamped on the initrd's files (reproducible builds). */
  epoch?: number;
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
    await packCpio(root, initrd, { epoch: opts.epoch ?? FALLBACK_EPOCH, compression: 'gzip' });
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
  /** The package file (its name carries the version). */
  deb: string;
}

/** Downloads (once) and unpacks Debian's kernel package (signed vmlinuz, modules) into the cache. */
export async function fetchDebianKernel(cacheDir: string, pkg?: string): Promise<DebianKernel> {
  const name = pkg ?? (await defaultKernelPackage());
  const unpacked = await fetchDebianPackage(cacheDir, name, {
    purpose: 'the kernel',
    afterUnpack: async (dir) => {
      await run('depmod', ['-b', dir, (await readdir(path.join(dir, 'lib/modules')))[0]]);
    },
  });
  const version = (await readdir(path.join(unpacked.dir, 'lib/modules')))[0];
  return { version, vmlinuz: path.join(unpacked.dir, 'boot', `vmlinuz-${version}`), modulesRoot: unpacked.dir, deb: unpacked.deb };
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
export const INITRD_INIT = `#!/bin/busybox sh
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
fail() { echo "HVTEST-INITRD-FAILED $*"; ${POWEROFF_AFTER_OUTPUT}; }
[ -n "$dev" ] || fail "no device labelled $label"
mount -o ro "$dev" /state || fail "cannot mount $dev"
[ -f "/state$img" ] || fail "no image $img on $dev"
mount -o ro,loop "/state$img" /newroot || fail "cannot loop-mount $img"
mkdir -p /newroot/run 2>/dev/null
exec switch_root /newroot /sbin/init
`;
