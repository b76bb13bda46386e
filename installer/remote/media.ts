/**
 * Getting at the contents of the install ISO (its rootfs squashfs and image bundle): loop-mount it
 * read-only where the kernel has iso9660, else extract the wanted paths with `xorriso -osirrox`
 * (this build machine's kernel has no iso9660). `iso_url: local` means the medium we booted from.
 */
import { mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import { Host } from '../../lib/host.js';
import type { Logger } from '../../lib/logger.js';

export interface IsoMedia {
  /** Directory holding the ISO's files (a mount point or an extraction). */
  root: string;
  method: 'loop-mount' | 'xorriso';
  /** ISO paths that were present (xorriso) or all of them (mount). */
  found: string[];
  close(): Promise<void>;
}

/** Harvester ISOs carry these; the installer needs the squashfs (live root) and the image bundle. */
export const DEFAULT_ISO_PATHS = ['/rootfs.squashfs', '/bundle', '/harvester-release.yaml'];

/**
 * The device or file of the medium we booted from (Harvester's `iso_url: local`, commit 2a7a1d4a):
 * the source of /run/initramfs/live, else the filesystem labelled COS_LIVE.
 */
export async function findLocalIso(host = new Host()): Promise<string> {
  const mounts = (await host.readText('/proc/self/mounts')) ?? (await host.readText('/proc/mounts')) ?? '';
  for (const line of mounts.split('\n')) {
    const [src, target] = line.split(' ');
    if (target === '/run/initramfs/live' && src?.startsWith('/')) return src;
  }
  const r = await run('blkid', ['-L', 'COS_LIVE'], { allowFailure: true, timeoutMs: 30_000 }).catch(() => undefined);
  const dev = r?.exitCode === 0 ? r.stdout.trim() : '';
  if (dev) return dev;
  throw new HvError('iso_url is "local" but the boot medium was not found', {
    where: '/run/initramfs/live and the COS_LIVE label',
    hint: 'boot from the ISO (or set install.iso_url to an http(s) URL)',
    exitCode: ExitCode.installFailed,
  });
}

async function tryLoopMount(iso: string, mnt: string, log?: Logger): Promise<boolean> {
  await mkdir(mnt, { recursive: true });
  const r = await run('mount', ['-o', 'loop,ro', '-t', 'iso9660', iso, mnt], { allowFailure: true, timeoutMs: 60_000 }).catch((err: Error) => ({ exitCode: -1, stderr: err.message }));
  if (r.exitCode === 0) return true;
  log?.info('loop-mounting the ISO failed; extracting with xorriso instead', { iso, reason: r.stderr.trim().split('\n').at(-1) });
  return false;
}

/** Opens an ISO's contents; `close` unmounts or deletes the extraction. */
export async function openIsoMedia(iso: string, workDir: string, opts: { paths?: string[]; preferMount?: boolean; log?: Logger } = {}): Promise<IsoMedia> {
  const wanted = opts.paths ?? DEFAULT_ISO_PATHS;
  const st = await stat(iso).catch((err: NodeJS.ErrnoException) => {
    throw new HvError(`ISO ${iso} cannot be read: ${err.code ?? err.message}`, { exitCode: ExitCode.installFailed });
  });
  // xorriso takes a block device that is not an optical drive (a loop device, a USB stick) only as stdio:.
  const indev = st.isBlockDevice() && !/^\/dev\/sr\d+$/.test(iso) ? `stdio:${iso}` : iso;
  const mnt = path.join(workDir, 'iso-mount');
  if (opts.preferMount !== false && (await tryLoopMount(iso, mnt, opts.log))) {
    return {
      root: mnt,
      method: 'loop-mount',
      found: wanted,
      close: async () => {
        await run('umount', [mnt], { timeoutMs: 60_000 });
      },
    };
  }
  const dest = path.join(workDir, 'iso-extract');
  await rm(dest, { recursive: true, force: true });
  await mkdir(dest, { recursive: true });
  const found: string[] = [];
  for (const p of wanted) {
    const target = path.join(dest, p);
    await mkdir(path.dirname(target), { recursive: true });
    const r = await run('xorriso', ['-osirrox', 'on', '-indev', indev, '-extract', p, target], { allowFailure: true, timeoutMs: 30 * 60_000 });
    if (r.exitCode === 0) found.push(p);
    else if (/Cannot find|not found|does not exist|Cannot determine attributes/i.test(r.stderr)) opts.log?.info('not on the ISO', { iso, path: p });
    else {
      throw new HvError(`extracting ${p} from ${iso} failed: ${r.stderr.trim().split('\n').slice(-3).join(' | ')}`, {
        where: r.command,
        hint: 'is the file a complete ISO image? (check its sha256)',
        exitCode: ExitCode.installFailed,
      });
    }
  }
  if (found.length === 0) {
    throw new HvError(`${iso} contains none of ${wanted.join(', ')}; is it a Harvester ISO?`, { exitCode: ExitCode.installFailed });
  }
  return { root: dest, method: 'xorriso', found, close: () => rm(dest, { recursive: true, force: true }) };
}
