/**
 * The test OS's own initramfs: busybox, the init in files/init (the Elemental initrd contract),
 * the yip rootfs-stage reader, rsync (the persistent-path mirror), e2fsck, dumpe2fs, blkid and
 * mountpoint, and the kernel modules that reach COS_STATE and mount the layout. Reproducible:
 * sorted cpio, one mtime, gzip without a name or time.
 */
import { createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import { copyKernelModules } from '../kernel-modules.js';
import { copyProgramWithLibraries } from '../initrd-parts.js';
import { BUSYBOX } from '../host-tools.js';
import { systemdOsFile } from './files.js';

/** Disks (NVMe, virtio, SATA/SCSI), loop images, ext2/3/4 (crc32c first: ext4 asks the crypto API for it), the RW overlay. */
export const COS_INITRD_MODULES = ['nvme', 'virtio_blk', 'virtio_scsi', 'virtio_pci', 'ahci', 'sd_mod', 'loop', 'crc32c_generic', 'ext4', 'overlay'] as const;
/** Beside busybox (Debian's busybox-static has no blkid and no mountpoint applet). */
export const COS_INITRD_PROGRAMS = ['/usr/bin/rsync', '/sbin/e2fsck', '/sbin/dumpe2fs', '/sbin/blkid', '/usr/bin/mountpoint'] as const;
/** The initramfs's own files, from iso-build/systemd-os/files, and where they go. */
export const COS_INITRD_FILES: ReadonlyArray<[source: string, dest: string, mode: number]> = [
  ['init', 'init', 0o755],
  ['yip-stage.awk', 'lib/hvtest/yip-stage.awk', 0o644],
  ['yip-rootfs.sh', 'lib/hvtest/yip-rootfs.sh', 0o644],
];

export interface CosInitrdOptions {
  /** Where rsync, e2fsck and their libraries come from: the OS tree, or '/' (the host). */
  programsRoot: string;
  /** The directory holding lib/modules/<kernelVersion>. */
  modulesRoot: string;
  kernelVersion: string;
  /** The initrd file to write (gzip cpio). */
  out: string;
  /** The mtime of every entry. */
  epoch: number;
}

export interface CosInitrd {
  file: string;
  bytes: number;
  sha256: string;
  /** The modules it loads (the rest are built into the kernel). */
  modules: string[];
}

export async function buildCosInitrd(o: CosInitrdOptions): Promise<CosInitrd> {
  const bb = await stat(BUSYBOX).catch(() => undefined);
  if (!bb?.isFile()) throw new HvError(`${BUSYBOX} is missing: the test OS initramfs runs Debian's busybox-static`, { hint: 'apt-get install busybox-static', exitCode: ExitCode.usage });
  const work = await mkdtemp(path.join(os.tmpdir(), 'hv-cos-initrd-'));
  try {
    const root = path.join(work, 'root');
    for (const d of ['bin', 'usr/bin', 'usr/sbin', 'lib', 'etc', 'proc', 'sys', 'dev', 'run', 'sysroot', 'oem', 'tmp']) await mkdir(path.join(root, d), { recursive: true });
    // The kernel calls /sbin/modprobe for module requests (crc32c, a filesystem type).
    await symlink('bin', path.join(root, 'sbin'));
    await copyFile(BUSYBOX, path.join(root, 'bin/busybox'));
    await chmod(path.join(root, 'bin/busybox'), 0o755);
    for (const p of COS_INITRD_PROGRAMS) await copyProgramWithLibraries(o.programsRoot, p, root);
    const modules = await copyKernelModules(root, o.modulesRoot, o.kernelVersion, COS_INITRD_MODULES);
    await writeFile(path.join(root, 'etc/initrd-modules'), modules.join('\n') + '\n');
    for (const [src, dest, mode] of COS_INITRD_FILES) {
      await mkdir(path.dirname(path.join(root, dest)), { recursive: true });
      await copyFile(systemdOsFile(src), path.join(root, dest));
      await chmod(path.join(root, dest), mode);
    }
    await mkdir(path.dirname(o.out), { recursive: true });
    await run('find', [root, '-exec', 'touch', '-h', '-d', `@${o.epoch}`, '{}', '+']);
    await run('sh', ['-c', `cd '${root}' && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --reproducible --quiet | gzip -n -6 > '${o.out}'`], { timeoutMs: 10 * 60_000 });
    const data = await readFile(o.out);
    return { file: o.out, bytes: data.length, sha256: createHash('sha256').update(data).digest('hex'), modules };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
