/**
 * The small initramfs (stage 1: initramfs-init.ts): static busybox, the storage and filesystem
 * modules that reach the boot medium, and this build's medium id. A few MiB, so firmware and grub
 * load it quickly from a CD; the live root (node, hvinstall, the disk tools) stays on the medium.
 * For PXE the live root is appended to it as a second, uncompressed cpio archive (the kernel unpacks
 * concatenated archives into one rootfs), so one initrd file is the whole live system.
 */
import { chmod, copyFile, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { copyKernelModules } from '../kernel-modules.js';
import { packCpio } from '../reproducible.js';
import { BUSYBOX } from '../host-tools.js';
import { INITRAMFS_INIT, LIVE_SQUASHFS_PATH, MEDIUM_ID_FILE } from './initramfs-init.js';
import { INITRAMFS_MODULES } from './tools.js';

export interface InitramfsOptions {
  kernel: { version: string; modulesRoot: string };
  mediumId: string;
  epoch: number;
  out: string;
}

export async function buildInitramfs(opts: InitramfsOptions): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'hv-initramfs-'));
  try {
    const root = path.join(work, 'root');
    for (const d of ['bin', 'proc', 'sys', 'dev', 'run', 'etc/hv-live', 'lib/modules']) await mkdir(path.join(root, d), { recursive: true });
    await copyFile(BUSYBOX, path.join(root, 'bin/busybox'));
    await chmod(path.join(root, 'bin/busybox'), 0o755);
    // The kernel runs /sbin/modprobe for module requests (a filesystem type, crc32c).
    await symlink('bin', path.join(root, 'sbin'));
    const loadable = await copyKernelModules(root, opts.kernel.modulesRoot, opts.kernel.version, INITRAMFS_MODULES);
    await writeFile(path.join(root, 'etc/hv-live/initramfs-modules'), loadable.join('\n') + '\n');
    await writeFile(path.join(root, MEDIUM_ID_FILE), opts.mediumId + '\n');
    await writeFile(path.join(root, 'init'), INITRAMFS_INIT, { mode: 0o755 });
    // zstd: Debian's kernel unpacks zstd initramfs archives (CONFIG_RD_ZSTD=y); -19: it is small.
    await packCpio(root, opts.out, { epoch: opts.epoch, compression: 'zstd', zstdLevel: 19 });
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * The PXE initrd: an uncompressed cpio holding the live root at hvlive/live.squashfs (already
 * compressed, so compressing it again gains nothing), then the stage-1 initramfs.
 */
export async function buildPxeInitrd(opts: { initramfs: string; liveSquashfs: string; epoch: number; out: string }): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'hv-pxe-initrd-'));
  try {
    const root = path.join(work, 'root');
    const dest = path.join(root, LIVE_SQUASHFS_PATH);
    await mkdir(path.dirname(dest), { recursive: true });
    await copyFile(opts.liveSquashfs, dest);
    const part = path.join(work, 'live.cpio');
    await packCpio(root, part, { epoch: opts.epoch, compression: 'none' });
    await run('sh', ['-c', 'cat "$1" "$2" > "$3"', 'cat', part, opts.initramfs, opts.out], { timeoutMs: 10 * 60_000 });
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
