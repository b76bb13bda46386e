/**
 * The effects of the config volume (decisions in config-volume-plan.ts, labels and formats in
 * config/config-volume.ts): find the labelled filesystem with a bounded wait (blkid, which needs no
 * udev, so it works in the live system), mount it read-only (an ISO 9660 volume on a kernel without
 * iso9660 is read with xorriso instead), hand the config file to the caller, unmount always.
 */
import { mkdir, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import { DeadlineError, waitUntil } from '../../lib/wait.js';
import type { Logger } from '../../lib/logger.js';
import { CONFIG_VOLUME_KINDS, configFilesFor, pickConfigFile } from '../../config/config-volume.js';
import { configVolumesAmong, describeBlockDevices, pickConfigVolume, volumesFromBlkid, type BlockDeviceSeen, type BlockVolume, type VolumePick } from './config-volume-plan.js';
import { openIsoMedia } from './media.js';

export interface VolumeSearchOptions {
  timeoutMs: number;
  intervalMs?: number;
  /** Probe only these devices (tests: their own loop devices); default every device blkid sees. */
  among?: readonly string[];
  log?: Logger;
  signal?: AbortSignal;
}

export type FoundVolume = BlockVolume & { label: string };

/** Every filesystem blkid sees now (a fresh probe, no cache). */
export async function listVolumes(among?: readonly string[], timeoutMs = 60_000): Promise<BlockVolume[]> {
  // blkid without devices probes them all: an empty list means none.
  if (among?.length === 0) return [];
  const r = await run('blkid', ['-c', '/dev/null', '-o', 'export', ...(among ?? [])], { allowFailure: true, timeoutMs });
  // blkid exits 2 when it finds no signature at all: that is an answer, not a failure.
  if (r.exitCode !== 0 && r.exitCode !== 2) {
    throw new HvError(`blkid failed while looking for the config volume (exit ${r.exitCode})`, { where: r.command, hint: r.stderr.trim() || 'check that util-linux is installed', exitCode: ExitCode.installFailed });
  }
  return volumesFromBlkid(r.stdout);
}

/**
 * The config volumes attached now, of the three known labels (the console's offer at start): one
 * probe, no polling, since the medium is attached before the machine boots.
 */
export async function listConfigVolumes(opts: { among?: readonly string[]; timeoutMs: number }): Promise<FoundVolume[]> {
  return configVolumesAmong(await listVolumes(opts.among, opts.timeoutMs), CONFIG_VOLUME_KINDS.map((k) => k.label));
}

/**
 * The volume carrying the first of `labels` present, polled until the deadline; undefined when
 * none appeared. Two devices with the winning label fail at once (waiting would not change that).
 */
export async function findConfigVolume(labels: readonly string[], opts: VolumeSearchOptions): Promise<FoundVolume | undefined> {
  let pick: VolumePick;
  try {
    pick = await waitUntil(
      async () => {
        const p = pickConfigVolume(await listVolumes(opts.among), labels);
        return p.kind === 'none' ? { done: false, reason: `no filesystem labelled ${labels.join(', ')}` } : { done: true, value: p };
      },
      { what: 'config volume', timeoutMs: opts.timeoutMs, intervalMs: opts.intervalMs ?? 1000, signal: opts.signal },
    );
  } catch (err) {
    if (err instanceof DeadlineError) return undefined;
    throw err;
  }
  if (pick.kind === 'found') return pick.volume;
  throw new HvError(`more than one filesystem is labelled ${pick.label}: ${pick.devices.join(', ')}`, {
    where: 'config volume (blkid)',
    hint: 'detach all but one, or give the one to use a label of its own and name it: harvester.install.config_url=volume:LABEL',
    exitCode: ExitCode.checkFailed,
  });
}

/** As findConfigVolume, but a volume that did not appear is an error naming the labels and the block devices there are. */
export async function requireConfigVolume(labels: readonly string[], opts: VolumeSearchOptions): Promise<FoundVolume> {
  const found = await findConfigVolume(labels, opts);
  if (found) return found;
  const seen = await blockDevicesSeen(opts.among).catch(() => []);
  throw new HvError(`no filesystem labelled ${labels.join(' or ')} appeared within ${Math.round(opts.timeoutMs / 1000)} s; block devices: ${describeBlockDevices(seen)}`, {
    where: 'config volume (blkid)',
    hint: `attach the config medium (hvinstall config-volume --config config.yaml --out config.iso makes one labelled ${labels[0]}), or give harvester.install.config_url=<http(s) URL>`,
    exitCode: ExitCode.installFailed,
  });
}

/** The block devices of /sys/class/block with what blkid sees on them (ram disks and empty loop devices left out). */
async function blockDevicesSeen(among?: readonly string[]): Promise<BlockDeviceSeen[]> {
  const volumes = await listVolumes(among).catch(() => []);
  const names = among ? among.map((d) => path.basename(d)) : await readdir('/sys/class/block');
  const out: BlockDeviceSeen[] = [];
  for (const name of names.sort()) {
    const sectors = Number((await readFile(`/sys/class/block/${name}/size`, 'utf8').catch(() => '0')).trim());
    if (/^ram\d/.test(name) || (/^loop\d/.test(name) && sectors === 0)) continue;
    out.push({ name, sizeBytes: sectors * 512, volume: volumes.find((v) => path.basename(v.device) === name) });
  }
  return out;
}

/** The config file on a volume: its path now, and the name findings give it (`LABEL(/dev/sr1):config.yaml`). */
export interface VolumeFile {
  path: string;
  name: string;
}

/**
 * Mounts the volume read-only (or extracts its candidate files with xorriso when the kernel cannot
 * mount its ISO 9660), finds its config file by its format and runs `use` on it; the volume is
 * unmounted and the scratch directory removed whatever happens.
 */
export async function withConfigVolume<T>(volume: FoundVolume, use: (file: VolumeFile) => Promise<T>, opts: { log?: Logger } = {}): Promise<T> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'hvinstall-config-volume-'));
  const candidates = configFilesFor(volume.label);
  try {
    const opened = await openVolume(volume, work, candidates, opts.log);
    try {
      const present = new Set<string>();
      for (const c of candidates) if (await stat(path.join(opened.root, c)).then((s) => s.isFile(), () => false)) present.add(c);
      const file = pickConfigFile(candidates, present);
      if (!file) {
        const top = await readdir(opened.root).catch(() => [] as string[]);
        throw new HvError(`the config volume ${volume.label} on ${volume.device} has no ${candidates.join(' or ')} (it holds: ${top.sort().join(', ') || 'nothing'})`, {
          where: volume.device,
          hint: `put the config at /${candidates[0]} of the volume (hvinstall config-volume makes it)`,
          exitCode: ExitCode.installFailed,
        });
      }
      opts.log?.info('config volume', { label: volume.label, device: volume.device, fsType: volume.fsType, file, method: opened.method });
      return await use({ path: path.join(opened.root, file), name: `${volume.label}(${volume.device}):${file}` });
    } finally {
      await opened.close();
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

interface OpenedVolume {
  root: string;
  method: 'mount' | 'xorriso';
  close(): Promise<void>;
}

async function openVolume(volume: FoundVolume, work: string, candidates: readonly string[], log?: Logger): Promise<OpenedVolume> {
  const mnt = path.join(work, 'mnt');
  await mkdir(mnt, { recursive: true });
  const typeArgs = volume.fsType ? ['-t', volume.fsType] : [];
  const r = await run('mount', ['-o', 'ro,nodev,nosuid,noexec', ...typeArgs, volume.device, mnt], { allowFailure: true, timeoutMs: 60_000 });
  if (r.exitCode === 0) {
    return { root: mnt, method: 'mount', close: () => unmount(mnt, log) };
  }
  if (volume.fsType !== 'iso9660') {
    throw new HvError(`cannot mount the config volume ${volume.label} (${volume.device}, ${volume.fsType ?? 'unknown filesystem'}) read-only: ${r.stderr.trim() || `exit ${r.exitCode}`}`, {
      where: r.command,
      hint: 'the live system mounts ext4, vfat and iso9660; write the config medium as one of those (hvinstall config-volume makes an ISO)',
      exitCode: ExitCode.installFailed,
    });
  }
  log?.info('mounting the config volume failed; reading it with xorriso', { device: volume.device, reason: r.stderr.trim().split('\n').at(-1) });
  const iso = await openIsoMedia(volume.device, work, { paths: candidates.map((c) => `/${c}`), preferMount: false, log }).catch((err: unknown) => {
    // openIsoMedia refuses an ISO holding none of the paths; an empty extraction says the same below.
    if (err instanceof HvError && /contains none of/.test(err.message)) return undefined;
    throw err;
  });
  return iso ? { root: iso.root, method: 'xorriso', close: () => iso.close() } : { root: path.join(work, 'iso-extract'), method: 'xorriso', close: async () => undefined };
}

/** umount, then a lazy one when something still holds it: the install must not keep the medium mounted. */
async function unmount(mnt: string, log?: Logger): Promise<void> {
  const r = await run('umount', [mnt], { allowFailure: true, timeoutMs: 60_000 });
  if (r.exitCode === 0) return;
  log?.warn('unmounting the config volume failed; detaching it lazily', { mountpoint: mnt, stderr: r.stderr.trim() });
  await run('umount', ['-l', mnt], { allowFailure: true, timeoutMs: 60_000 });
}

/**
 * The config text on the volume labelled `label` (the console's "volume:LABEL"), as readConfigText
 * reads a file: its name for findings, the text, or why the bytes are not a config. Not validated.
 */
export async function readVolumeConfigText(label: string, opts: VolumeSearchOptions): Promise<ConfigText> {
  return readConfigTextOn(await requireConfigVolume([label], opts), opts.log);
}

export type ConfigText = { name: string; text?: string; error?: import('../../config/index.js').Finding };

/** The config text on a volume already found (one the console listed at start). Not validated. */
export async function readConfigTextOn(volume: FoundVolume, log?: Logger): Promise<ConfigText> {
  const { readConfigText } = await import('../../config/index.js');
  return withConfigVolume(volume, (file) => readConfigText(file.path, { sourceName: file.name }), { log });
}
