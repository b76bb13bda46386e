/**
 * Decisions about the config volume (config/config-volume.ts has the labels and formats): what an
 * automatic install looks for given its command line, which of the labelled filesystems it takes,
 * and what it says when there is none. Pure; installer/remote/config-volume.ts does the probing.
 */
import { CONFIG_VOLUME_KINDS, isVolumeUrl, parseVolumeUrl, volumeKindOf } from '../../config/config-volume.js';
import { hvinstallParam } from '../../config/cmdline.js';
import { parseBlkidExport } from '../disk/block.js';

/** A filesystem blkid saw. */
export interface BlockVolume {
  device: string;
  label?: string;
  fsType?: string;
}

/**
 * What an automatic install does about a config volume:
 * - explicit: config_url=volume:LABEL: that label, waited for up to the deadline, else the install fails;
 * - discover: no config_url: the three labels, for a shorter while; none found is the command line alone;
 * - none: an http(s) config_url (fetched as before);
 * - invalid: a volume: URL that names no label.
 */
export type VolumeSearch =
  | { mode: 'explicit'; labels: string[]; timeoutMs: number }
  | { mode: 'discover'; labels: string[]; timeoutMs: number }
  | { mode: 'none' }
  | { mode: 'invalid'; message: string };

/** How long a named volume is waited for (a BMC's virtual CD can take a while to attach). */
export const EXPLICIT_VOLUME_WAIT_MS = 60_000;
/** How long discovery waits before the command line alone is the config. */
export const DISCOVERY_VOLUME_WAIT_MS = 10_000;

/**
 * The search for an automatic install's config volume, from its config_url (as merged from the
 * command line) and `hvinstall.config_volume_timeout=SECONDS`. Pure.
 */
export function volumeSearchOf(configUrl: string | undefined, cmdlineText: string): VolumeSearch {
  const secs = Number(hvinstallParam(cmdlineText, 'config_volume_timeout'));
  const given = Number.isFinite(secs) && secs > 0 ? secs * 1000 : undefined;
  const url = configUrl?.trim();
  if (!url) return { mode: 'discover', labels: CONFIG_VOLUME_KINDS.map((k) => k.label), timeoutMs: given ?? DISCOVERY_VOLUME_WAIT_MS };
  if (!isVolumeUrl(url)) return { mode: 'none' };
  const v = parseVolumeUrl(url);
  return v.ok ? { mode: 'explicit', labels: [v.label], timeoutMs: given ?? EXPLICIT_VOLUME_WAIT_MS } : { mode: 'invalid', message: v.message };
}

/** `blkid -o export` -> the filesystems with their labels. Pure. */
export function volumesFromBlkid(text: string): BlockVolume[] {
  return parseBlkidExport(text)
    .filter((s) => s.DEVNAME)
    .map((s) => ({ device: s.DEVNAME!, label: s.LABEL, fsType: s.TYPE }));
}

export type VolumePick = { kind: 'found'; volume: BlockVolume & { label: string } } | { kind: 'none' } | { kind: 'ambiguous'; label: string; devices: string[] };

/** /dev/sdb1 or /dev/nvme0n1p1 -> /dev/sdb, /dev/nvme0n1. */
function parentOf(device: string): string | undefined {
  const m = /^(.*\d)p\d+$/.exec(device) ?? /^(.*[a-z])\d+$/.exec(device);
  return m?.[1];
}

/**
 * The config volume among the filesystems: the first label (in the given precedence order) any
 * device carries, compared case-insensitively. Two devices with that label are refused, naming
 * both: the installer cannot know which one the operator meant. A partition whose disk carries the
 * same label (a hybrid image seen twice) counts once, as the disk. Pure.
 */
export function pickConfigVolume(volumes: readonly BlockVolume[], labels: readonly string[]): VolumePick {
  for (const label of labels) {
    const distinct = labelled(volumes, label);
    if (distinct.length === 1) return { kind: 'found', volume: { ...distinct[0]!, label: distinct[0]!.label! } };
    if (distinct.length > 1) {
      return { kind: 'ambiguous', label, devices: distinct.map((v) => `${v.device} (${v.fsType ?? 'unknown'} "${v.label}")`).sort() };
    }
  }
  return { kind: 'none' };
}

/** The devices carrying `label` (case-insensitive), a partition whose disk carries it too counted once, as the disk. */
function labelled(volumes: readonly BlockVolume[], label: string): BlockVolume[] {
  const matching = volumes.filter((v) => v.label !== undefined && v.label.toLowerCase() === label.toLowerCase());
  const devices = new Set(matching.map((v) => v.device));
  return matching.filter((v, i) => !devices.has(parentOf(v.device) ?? '') && matching.findIndex((w) => w.device === v.device) === i);
}

/**
 * Every volume carrying one of `labels`, in the labels' order: what the console offers at start,
 * where the operator chooses (two media are listed, not refused). Pure.
 */
export function configVolumesAmong(volumes: readonly BlockVolume[], labels: readonly string[]): Array<BlockVolume & { label: string }> {
  return labels.flatMap((label) => labelled(volumes, label).map((v) => ({ ...v, label: v.label! })));
}

/** A block device for the missing-volume message: its name, size and what blkid saw on it. */
export interface BlockDeviceSeen {
  name: string;
  sizeBytes: number;
  volume?: BlockVolume;
}

/** "sda 260 GiB, sr0 1.2 GiB iso9660 "COS_LIVE"": what exists, so the operator sees what was attached. Pure. */
export function describeBlockDevices(devices: readonly BlockDeviceSeen[]): string {
  if (devices.length === 0) return 'none';
  const size = (b: number): string => (b >= 2 ** 30 ? `${(b / 2 ** 30).toFixed(1)} GiB` : `${Math.max(1, Math.round(b / 2 ** 20))} MiB`);
  return devices
    .map((d) => [d.name, size(d.sizeBytes), d.volume?.fsType, d.volume?.label !== undefined ? JSON.stringify(d.volume.label) : undefined].filter(Boolean).join(' '))
    .join(', ');
}

/** A file of the config medium: its path inside the volume and its content. */
export interface MediumFile {
  path: string;
  data: string | Uint8Array;
}

/**
 * The files of a config medium with this label: the config (its bytes unchanged) where its format
 * reads it, plus the metadata cloud-init needs to accept a NoCloud seed (meta-data) or a config
 * drive (openstack/latest/meta_data.json), so the same medium also works for them. Another label
 * gets `config.yaml` (volume:LABEL finds it there). Pure.
 */
export function mediumFiles(label: string, config: Uint8Array, instanceId: string): MediumFile[] {
  const kind = volumeKindOf(label);
  if (kind?.format === 'nocloud') return [{ path: kind.file, data: config }, { path: 'meta-data', data: `instance-id: ${instanceId}\n` }];
  if (kind?.format === 'configdrive') {
    return [{ path: kind.file, data: config }, { path: 'openstack/latest/meta_data.json', data: `${JSON.stringify({ uuid: instanceId })}\n` }];
  }
  return [{ path: kind?.file ?? CONFIG_VOLUME_KINDS[0]!.file, data: config }];
}

/** xorriso's arguments for the medium: ISO 9660 with Joliet and Rock Ridge, the label as its volume id. Pure. */
export function mediumIsoArgs(label: string, stagingDir: string, out: string): string[] {
  return ['-no_rc', '-as', 'mkisofs', '-quiet', '-V', label, '-J', '-R', '-o', out, stagingDir];
}
