/**
 * The systemd test OS as an Elemental image (a squashfs to `hvinstall install --source`): the
 * cached Debian root (root.ts) plus what makes it an Elemental image and a test subject —
 * /boot/vmlinuz and /boot/initrd (initrd.ts), /etc/cos/grub.cfg and bootargs.cfg, the layout
 * defaults in /system/oem, an os-release with GRUB_ENTRY_NAME, containerd where RKE2 keeps it,
 * SSH host keys made on first boot, NIC names from the kernel line's `ifname=`, and the boot
 * report that prints TAP for the harness.
 * Cached (cache.ts) under the key of the root and of every file put in.
 */
import { createHash } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { BUSYBOX } from '../host-tools.js';
import { FILES_DIR, RKE2_STANDIN, systemdOsFile } from './files.js';
import { buildCosInitrd, type CosInitrd } from './initrd.js';
import { SOURCE_DATE_EPOCH } from './packages.js';
import { MKSQUASHFS_ENV } from '../reproducible.js';
import { publishEntry, readEntry } from './cache.js';
import { ensureBaseRoot, type BaseRoot } from './root.js';
import { KEPT_MODULE_DIRS, KEPT_MODULES, pruneKernelModules } from './modules.js';

/** Bumped when the assembly below changes in a way the inputs' digests do not show. */
export const IMAGE_RECIPE = 3;
export const IMAGE_NAME = 'hvinstall test OS';
/** A file the image carries in a persistent path, so a test sees the mirror at boot replace the node's copy. */
export const MIRROR_PROBE = '/etc/ssh/hvtest-from-image';

/** Files of iso-build/systemd-os/files placed in the image: source, path in the image, mode. */
export const IMAGE_FILES: ReadonlyArray<[source: string, dest: string, mode: number]> = [
  ['grub.cfg', 'etc/cos/grub.cfg', 0o644],
  ['bootargs.cfg', 'etc/cos/bootargs.cfg', 0o644],
  ['00_rootfs.yaml', 'system/oem/00_rootfs.yaml', 0o644],
  ['containerd-config.toml', 'etc/containerd/config.toml', 0o644],
  ['ssh-hostkeys.conf', 'usr/lib/systemd/system/ssh.service.d/hvtest-hostkeys.conf', 0o644],
  ['sshd-hostkey.conf', 'etc/ssh/sshd_config.d/hvtest-hostkey.conf', 0o644],
  ['hvtest-report', 'usr/lib/hvtest/report', 0o755],
  ['hvtest-report.service', 'usr/lib/systemd/system/hvtest-report.service', 0o644],
  ['hvtest-nm-online-x', 'usr/lib/hvtest/nm-online-x', 0o755],
  ['hvtest-nm-online-x.service', 'usr/lib/systemd/system/hvtest-nm-online-x.service', 0o644],
  // RKE2's unit running the rke2 stand-in (not enabled: hvagent starts it on an image without rancherd)
  ['rke2-server.service', 'usr/lib/systemd/system/rke2-server.service', 0o644],
  ['rke2-standin-pre', 'usr/lib/hvtest/rke2-standin-pre', 0o755],
  ['rke2-standin.json', 'usr/lib/hvtest/rke2-standin.json', 0o644],
  // the baseline boot's bootstrap, ordered as rancherd (not enabled: the harness pulls it into that boot)
  ['hvtest-bootstrap-baseline', 'usr/lib/hvtest/bootstrap-baseline', 0o755],
  ['hvtest-bootstrap-baseline.service', 'usr/lib/systemd/system/hvtest-bootstrap-baseline.service', 0o644],
];

/**
 * Units Debian's packages enable that a node in a test never needs, left out of the image (their
 * wants links removed): periodic maintenance of a machine that lives for minutes (apt's downloads
 * and upgrades, dpkg's backup, e2scrub, fstrim) and a login prompt on the VGA console nobody looks
 * at (hvagent-console.service shows the node's status there). Each one costs its start under TCG.
 * None is a unit the boot report or hvagent checks (test/unit/systemd-os/build-inputs.test.ts).
 */
export const IMAGE_UNITS_OFF = [
  'etc/systemd/system/timers.target.wants/apt-daily.timer',
  'etc/systemd/system/timers.target.wants/apt-daily-upgrade.timer',
  'etc/systemd/system/timers.target.wants/dpkg-db-backup.timer',
  'etc/systemd/system/timers.target.wants/e2scrub_all.timer',
  'etc/systemd/system/timers.target.wants/fstrim.timer',
  'etc/systemd/system/multi-user.target.wants/e2scrub_reap.service',
  'etc/systemd/system/getty.target.wants/getty@tty1.service',
] as const;

/** Where the image carries the rke2 stand-in (test/fixtures/rke2-standin), which its rke2-server.service runs. */
export const RKE2_STANDIN_PATH = 'usr/lib/hvtest/rke2-standin.mjs';

/** Mount points the layout needs on the read-only image (those under an RW path are made at boot). */
export const IMAGE_MOUNT_POINTS = ['oem', 'usr/local', 'usr/libexec', 'lib/firmware', 'home', 'opt', 'root', 'system/oem'] as const;

export interface SystemdOsImage {
  key: string;
  rootKey: string;
  squashfs: string;
  kernelVersion: string;
  /** Apparent bytes of the tree in the image, and of the squashfs file. */
  treeBytes: number;
  squashfsBytes: number;
  initrd: Omit<CosInitrd, 'file'>;
  /** Kernel modules the image keeps and those it leaves out (modules.ts). */
  kernelModules: { kept: number; removed: number };
  packages: number;
  /** Seconds each part took to build in this call; undefined when it came from the cache. */
  built: { rootSec?: number; imageSec?: number };
}

interface ImageManifest extends Omit<SystemdOsImage, 'squashfs' | 'built'> {
  builtAt: string;
}

/** The os-release of the image: Debian's, plus the name Elemental gives the boot entry. Pure. */
export function imageOsRelease(debian: string, key: string): string {
  const kept = debian.split('\n').filter((l) => l.trim() && !/^(VARIANT|VARIANT_ID|IMAGE_ID|IMAGE_VERSION|GRUB_ENTRY_NAME)=/.test(l));
  return [...kept, `VARIANT="${IMAGE_NAME}"`, 'VARIANT_ID=hvtest', 'IMAGE_ID=hvtest-systemd', `IMAGE_VERSION=${key}`, `GRUB_ENTRY_NAME="${IMAGE_NAME}"`].join('\n') + '\n';
}

async function inputsDigest(root: BaseRoot): Promise<string> {
  const h = createHash('sha256').update(JSON.stringify({ recipe: IMAGE_RECIPE, root: root.key, kernel: root.manifest.kernelVersion, modules: [KEPT_MODULE_DIRS, KEPT_MODULES], unitsOff: IMAGE_UNITS_OFF }));
  for (const name of (await readdir(FILES_DIR)).sort()) h.update(`${name}\0`).update(await readFile(path.join(FILES_DIR, name))).update('\0');
  h.update(await readFile(BUSYBOX));
  h.update(await readFile(RKE2_STANDIN));
  return h.digest('hex').slice(0, 24);
}

/** Returns the cached image for the current root and files, building what is missing. */
export async function buildSystemdOs(cacheDir: string, log: (s: string) => void = () => undefined): Promise<SystemdOsImage> {
  const root = await ensureBaseRoot(cacheDir, log);
  const key = await inputsDigest(root);
  const dir = path.join(cacheDir, 'systemd-os');
  const final = path.join(dir, `image-${key}`);
  const built = { rootSec: root.builtInSec } as SystemdOsImage['built'];
  const cached = await readEntry<ImageManifest>(final, ['os.squashfs']);
  if (cached) {
    return { ...cached, squashfs: path.join(final, 'os.squashfs'), built };
  }
  const t0 = Date.now();
  const work = await mkdtemp(path.join(dir, `.image-${key}.`));
  try {
    const tree = path.join(work, 'tree');
    log(`assembling the image ${key} on the root ${root.key}`);
    // Hard links: instant, and the root is never written through them (every file put in is
    // unlinked first, writeFresh).
    await run('cp', ['-al', root.tree, tree], { timeoutMs: 10 * 60_000 });
    const kver = root.manifest.kernelVersion;
    for (const d of IMAGE_MOUNT_POINTS) await mkdir(path.join(tree, d), { recursive: true });
    for (const [src, dest, mode] of IMAGE_FILES) await writeFresh(path.join(tree, dest), await readFile(systemdOsFile(src)), mode);
    await writeFresh(path.join(tree, RKE2_STANDIN_PATH), await readFile(RKE2_STANDIN), 0o755);
    await enableUnit(tree, 'hvtest-report.service', 'multi-user.target');
    await enableUnit(tree, 'hvtest-nm-online-x.service', 'multi-user.target');
    // The install pins the management NIC's name with `ifname=<name>:<MAC>` on the kernel line
    // (installer/render/nic-names.ts). systemd-network-generator turns it into a .link file in
    // /run/systemd/network before udev starts, and udev names the NIC by it. Upstream systemd's
    // preset enables the unit (90-systemd.preset); Debian's package ships it off. The image's
    // initramfs starts no udev and loads no NIC driver, so the real root's udev names the NIC.
    await enableUnit(tree, 'systemd-network-generator.service', 'sysinit.target');
    // The root is read-only and systemd's sandboxing (PrivateTmp, PrivateDevices) makes its
    // directories under /tmp: a tmpfs there, as on Harvester's OS (Debian ships the unit, off).
    await writeFresh(path.join(tree, 'usr/lib/systemd/system/tmp.mount'), await readFile(path.join(tree, 'usr/share/systemd/tmp.mount')), 0o644);
    await enableUnit(tree, 'tmp.mount', 'local-fs.target');
    for (const link of IMAGE_UNITS_OFF) await unlink(path.join(tree, link));
    const osRelease = path.join(tree, 'usr/lib/os-release');
    await writeFresh(osRelease, imageOsRelease(await readFile(osRelease, 'utf8'), key), 0o644);
    await writeFresh(path.join(tree, MIRROR_PROBE.slice(1)), `the image's copy (${IMAGE_NAME} ${key}): mirrored into the persistent /etc/ssh at every boot\n`, 0o644);
    await symlink(`vmlinuz-${kver}`, path.join(tree, 'boot/vmlinuz'));
    const mods = await pruneKernelModules(tree, kver);
    log(`kernel modules: ${mods.kept} kept, ${mods.removed} removed (iso-build/systemd-os/modules.ts)`);
    const initrd = await buildCosInitrd({ programsRoot: tree, modulesRoot: tree, kernelVersion: kver, out: path.join(work, 'initrd'), epoch: SOURCE_DATE_EPOCH });
    await writeFresh(path.join(tree, 'boot/initrd'), await readFile(initrd.file), 0o644);
    const treeBytes = Number.parseInt((await run('du', ['-s', '--bytes', '--apparent-size', tree])).stdout, 10);
    log(`mksquashfs of ${Math.round(treeBytes / 2 ** 20)} MiB`);
    const out = path.join(work, 'os.squashfs');
    await run('mksquashfs', [tree, out, '-noappend', '-quiet', '-no-progress', '-comp', 'zstd', '-Xcompression-level', '3', '-all-time', String(SOURCE_DATE_EPOCH), '-mkfs-time', String(SOURCE_DATE_EPOCH)], { env: MKSQUASHFS_ENV, timeoutMs: 30 * 60_000 });
    await rm(tree, { recursive: true, force: true });
    await rm(initrd.file, { force: true });
    const manifest: ImageManifest = {
      key,
      rootKey: root.key,
      kernelVersion: kver,
      treeBytes,
      squashfsBytes: (await stat(out)).size,
      initrd: { bytes: initrd.bytes, sha256: initrd.sha256, modules: initrd.modules },
      kernelModules: mods,
      packages: Object.keys(root.manifest.installed).length,
      builtAt: new Date().toISOString(),
    };
    const published = await publishEntry(work, final, manifest, ['os.squashfs']);
    built.imageSec = Math.round((Date.now() - t0) / 1000);
    return { ...published, squashfs: path.join(final, 'os.squashfs'), built };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** The wants link of an image-owned unit (in /usr/lib: /etc/systemd is a persistent path on the node). */
async function enableUnit(tree: string, unit: string, target: string): Promise<void> {
  const dir = path.join(tree, 'usr/lib/systemd/system', `${target}.wants`);
  await mkdir(dir, { recursive: true });
  await symlink(`../${unit}`, path.join(dir, unit));
}

/** Writes a new file at p, unlinking what was there first: p may be a hard link into the cached root. */
async function writeFresh(p: string, data: string | Buffer, mode: number): Promise<void> {
  await mkdir(path.dirname(p), { recursive: true });
  await unlink(p).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
  });
  await writeFile(p, data, { mode });
  await chmod(p, mode);
}
