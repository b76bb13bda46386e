/**
 * The kernel modules the test OS keeps of Debian's 4000: what QEMU's q35 machine with an NVMe disk
 * and a virtio NIC needs, and what the node's boot, the guards and the boot report ask for. Under
 * QEMU TCG every module udev's coldplug loads for a device the node never uses costs boot time
 * (the VGA's DRM driver taking the console over, KVM, the SIMD variants of the crypto algorithms
 * with their self-tests, the watchdog, the parallel port, the CD-ROM), and the 390 MiB of modules
 * are half the image every install deploys. The image keeps the selection below and the
 * dependencies modules.dep gives, removes the rest, and runs depmod again.
 */
import { readFile, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import { COS_INITRD_MODULES } from './initrd.js';

/**
 * Kept whole: modules that only load when something asks for them by name (a mount, a socket, a
 * netlink link kind, a crypto algorithm, an I/O scheduler), never for a device. So every filesystem
 * (ext4, overlay, squashfs, vfat, efivarfs, autofs, fuse), the bridge, netfilter and nftables, and
 * the generic crypto algorithms and CRCs the disk and filesystem drivers request are there.
 */
export const KEPT_MODULE_DIRS = ['kernel/fs/', 'kernel/net/', 'kernel/crypto/', 'kernel/lib/', 'kernel/block/', 'kernel/mm/'] as const;

/** Device and link drivers kept by name (with what modules.dep says they need). */
export const KEPT_MODULES = [
  // the disks QEMU gives a node and what the initramfs loads to reach COS_STATE (COS_INITRD_MODULES)
  ...COS_INITRD_MODULES,
  // the virtio NIC; fw_cfg, where the boot report reads what the harness expects of the boot
  'virtio_net',
  'qemu_fw_cfg',
  // NetworkManager's mgmt-bo bond (Harvester's management network; the bridge is in net/), VLANs on it
  'bonding',
  '8021q',
  // virtual links of containers and CNIs
  'veth',
  'tun',
  // device-mapper, which systemd loads at boot (modprobe@dm_mod.service)
  'dm_mod',
] as const;

/** A module's name from its path in modules.dep: basename without .ko[.xz|.zst|.gz], '-' as '_'. Pure. */
export function moduleName(file: string): string {
  return path.posix.basename(file).replace(/\.ko(\.(xz|zst|gz))?$/, '').replace(/-/g, '_');
}

/** modules.dep → each module's path and the paths it depends on. Pure. */
export function parseModulesDep(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    const colon = line.indexOf(':');
    if (colon < 1) continue;
    out.set(line.slice(0, colon).trim(), line.slice(colon + 1).trim().split(/\s+/).filter(Boolean));
  }
  return out;
}

export interface ModuleSelection {
  /** Paths (as in modules.dep) to keep: the directories, the named modules and their dependencies. */
  keep: Set<string>;
  /** Paths to remove. */
  remove: string[];
  /** Named modules that are neither in modules.dep nor built into the kernel. */
  unknown: string[];
}

/** Which modules stay. `builtin`: modules.builtin (paths or names). Pure. */
export function selectModules(
  dep: Map<string, string[]>,
  builtin: Iterable<string>,
  names: readonly string[] = KEPT_MODULES,
  dirs: readonly string[] = KEPT_MODULE_DIRS,
): ModuleSelection {
  const byName = new Map<string, string>();
  for (const p of dep.keys()) byName.set(moduleName(p), p);
  const builtinNames = new Set([...builtin].map(moduleName));
  const keep = new Set<string>();
  const add = (p: string): void => {
    if (keep.has(p)) return;
    keep.add(p);
    for (const d of dep.get(p) ?? []) add(d);
  };
  const unknown: string[] = [];
  for (const n of names) {
    const p = byName.get(n.replace(/-/g, '_'));
    if (p) add(p);
    else if (!builtinNames.has(n.replace(/-/g, '_'))) unknown.push(n);
  }
  for (const p of dep.keys()) if (dirs.some((d) => p.startsWith(d))) add(p);
  return { keep, remove: [...dep.keys()].filter((p) => !keep.has(p)).sort(), unknown };
}

/**
 * Removes from tree/lib/modules/<version> every module the selection drops and runs depmod. The
 * tree may be hard links into a cached root: files are unlinked, and depmod's outputs replaced by
 * copies first so it never writes through a link. Returns how many modules stayed and went.
 */
export async function pruneKernelModules(tree: string, version: string): Promise<{ kept: number; removed: number }> {
  const dir = path.join(tree, 'lib/modules', version);
  const dep = parseModulesDep(await readFile(path.join(dir, 'modules.dep'), 'utf8'));
  const builtin = (await readFile(path.join(dir, 'modules.builtin'), 'utf8').catch(() => '')).split('\n').filter(Boolean);
  const sel = selectModules(dep, builtin);
  if (sel.unknown.length > 0) {
    throw new HvError(`kernel ${version} has no module ${sel.unknown.join(', ')} (neither loadable nor built in)`, {
      where: 'iso-build/systemd-os: kernel modules',
      hint: 'fix KEPT_MODULES in iso-build/systemd-os/modules.ts for this kernel',
      exitCode: ExitCode.usage,
    });
  }
  for (const p of sel.remove) await unlink(path.join(dir, p));
  const { stdout } = await run('find', [dir, '-maxdepth', '1', '-type', 'f', '-name', 'modules.*']);
  for (const f of stdout.split('\n').filter(Boolean)) {
    const data = await readFile(f);
    await unlink(f);
    await writeFile(f, data);
  }
  await run('find', [path.join(dir, 'kernel'), '-mindepth', '1', '-type', 'd', '-empty', '-delete']);
  await run('depmod', ['-b', tree, version]);
  return { kept: sel.keep.size, removed: sel.remove.length };
}
