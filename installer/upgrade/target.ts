/**
 * Where an upgrade writes: COS_STATE (the images, state.yaml, the boot assessment), COS_OEM (the
 * upgrade's record) and COS_RECOVERY (its copy of state.yaml, when the disk has that partition). On a booted node COS_STATE is the read-only mount the initramfs made
 * (remounted read-write for the upgrade and back afterwards, as `elemental upgrade` does);
 * with `--device` (a disk that is not running, e.g. a loop-attached image) the labels are looked
 * for on that disk only and mounted under the run directory.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ExitCode, HvError } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import { devicesWithLabels } from '../bootloader/index.js';
import { mount, unmount } from '../steps/mounts.js';

export interface UpgradeTarget {
  stateDevice: string;
  oemDevice: string;
  /** Where COS_STATE and COS_OEM are mounted read-write for the upgrade. */
  stateDir: string;
  oemDir: string;
  /** COS_RECOVERY, mounted read-write (the initramfs does not mount it on a normal boot); undefined when the disk has none. */
  recovery?: { device: string; dir: string };
  /** Puts the mounts back as they were. */
  release(): Promise<void>;
}

/** The one device with each label on `disk` (or anywhere); refuses none or several (COS_RECOVERY: none is fine). */
export async function findTargetDevices(disk?: string): Promise<{ state: string; oem: string; recovery?: string }> {
  const among = disk ? (await run('lsblk', ['-lnpo', 'NAME', disk])).stdout.split('\n').map((l) => l.trim()).filter(Boolean) : undefined;
  const found = await devicesWithLabels(['COS_STATE', 'COS_OEM', 'COS_RECOVERY'], among);
  const one = (label: string, optional = false): string | undefined => {
    const devs = found[label] ?? [];
    if (devs.length === 1) return devs[0]!;
    if (devs.length === 0 && optional) return undefined;
    throw new HvError(devs.length === 0 ? `no filesystem labelled ${label}${disk ? ` on ${disk}` : ''}: this is not an installed node` : `the label ${label} is on more than one device: ${devs.join(', ')}`, {
      where: 'upgrade: finding COS_STATE and COS_OEM (blkid)',
      hint: devs.length === 0 ? 'run hvinstall upgrade on an installed node, or name its disk with --device' : 'name the node\'s disk with --device, or detach the other disk',
      exitCode: ExitCode.checkFailed,
    });
  };
  const recovery = one('COS_RECOVERY', true);
  return { state: one('COS_STATE')!, oem: one('COS_OEM')!, ...(recovery ? { recovery } : {}) };
}

/** The mount points of a device and whether the first is read-only (from /proc/self/mountinfo). */
export function mountsOf(mountinfo: string, majorMinor: string): Array<{ dir: string; readOnly: boolean }> {
  const out: Array<{ dir: string; readOnly: boolean }> = [];
  for (const line of mountinfo.split('\n')) {
    const f = line.split(' ');
    if (f[2] !== majorMinor || f[3] !== '/') continue;
    const sep = f.indexOf('-');
    const superOpts = (f[sep + 3] ?? '').split(',');
    out.push({ dir: f[4]!.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8))), readOnly: f[5]!.split(',').includes('ro') || superOpts.includes('ro') });
  }
  return out;
}

async function majorMinor(device: string): Promise<string> {
  return (await run('lsblk', ['-dno', 'MAJ:MIN', device])).stdout.trim();
}

/** Mounts (or reuses and remounts read-write) one filesystem; returns its dir and how to undo it. */
async function writable(device: string, runDir: string, name: string, readOnly: boolean): Promise<{ dir: string; undo: () => Promise<void> }> {
  const existing = mountsOf(await readFile('/proc/self/mountinfo', 'utf8'), await majorMinor(device))[0];
  if (!existing) {
    const dir = path.join(runDir, name);
    await mount(device, dir, readOnly ? ['ro'] : []);
    return { dir, undo: () => unmount(dir) };
  }
  if (!existing.readOnly || readOnly) return { dir: existing.dir, undo: async () => { await run('sync', ['-f', existing.dir], { allowFailure: true }); } };
  await run('mount', ['-o', 'remount,rw', existing.dir]);
  return {
    dir: existing.dir,
    undo: async () => {
      await run('sync', ['-f', existing.dir], { allowFailure: true });
      await run('mount', ['-o', 'remount,ro', existing.dir]);
    },
  };
}

/** COS_STATE, COS_OEM and COS_RECOVERY (when there is one) mounted for the upgrade (read-only for a dry run). */
export async function openTarget(disk: string | undefined, runDir: string, readOnly = false): Promise<UpgradeTarget> {
  const devs = await findTargetDevices(disk);
  const opened: Array<{ dir: string; undo: () => Promise<void> }> = [];
  const release = async (): Promise<void> => {
    let failed: unknown;
    for (const m of [...opened].reverse()) await m.undo().catch((err: unknown) => void (failed ??= err));
    if (failed) throw failed;
  };
  try {
    opened.push(await writable(devs.state, runDir, 'cos_state', readOnly));
    opened.push(await writable(devs.oem, runDir, 'cos_oem', readOnly));
    if (devs.recovery) opened.push(await writable(devs.recovery, runDir, 'cos_recovery', readOnly));
  } catch (err) {
    await release().catch(() => undefined);
    throw err;
  }
  return {
    stateDevice: devs.state,
    oemDevice: devs.oem,
    stateDir: opened[0]!.dir,
    oemDir: opened[1]!.dir,
    ...(devs.recovery ? { recovery: { device: devs.recovery, dir: opened[2]!.dir } } : {}),
    release,
  };
}
