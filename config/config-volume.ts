/**
 * The config volume: an unattended install without PXE or a web server takes its config from a
 * filesystem found by its label (a second virtual CD from the BMC, a USB stick, a config drive).
 * `harvester.install.config_url=volume:LABEL` names the label; in automatic mode without any
 * config_url the installer looks for the three labels below, in this order. The formats:
 *  - HARVESTER_CONFIG: hvinstall's own, `config.yaml` at the root (`hvinstall config-volume` makes it);
 *  - cidata: cloud-init's NoCloud seed, the config as `user-data` (canonical/cloud-init
 *    doc/rtd/reference/datasources/nocloud.rst);
 *  - config-2: an OpenStack config drive, as Ironic/Metal3 write it, the config as
 *    `openstack/latest/user_data` (canonical/cloud-init doc/rtd/reference/datasources/configdrive.rst).
 * Labels compare case-insensitively (a FAT label is upper case: CIDATA, CONFIG-2). Pure.
 */

export const CONFIG_VOLUME_LABEL = 'HARVESTER_CONFIG';

export type VolumeFormat = 'hvinstall' | 'nocloud' | 'configdrive';

export interface VolumeKind {
  label: string;
  format: VolumeFormat;
  /** The config's path inside the filesystem. */
  file: string;
}

/** The labels discovery looks for, in precedence order: the first label present wins. */
export const CONFIG_VOLUME_KINDS: readonly VolumeKind[] = [
  { label: CONFIG_VOLUME_LABEL, format: 'hvinstall', file: 'config.yaml' },
  { label: 'cidata', format: 'nocloud', file: 'user-data' },
  { label: 'config-2', format: 'configdrive', file: 'openstack/latest/user_data' },
];

/** What `volume:` accepts as a label: what blkid reports for ext4 (16), FAT (11) and ISO 9660 (32). */
const LABEL_RE = /^[A-Za-z0-9_.-]{1,32}$/;

export type VolumeUrl = { ok: true; label: string } | { ok: false; message: string };

/** True for a `volume:…` config_url (well formed or not): the installer reads it, nobody fetches it. */
export function isVolumeUrl(url: string): boolean {
  return /^volume:/i.test(url.trim());
}

/** `volume:LABEL` -> the label, or why it is not one. Pure. */
export function parseVolumeUrl(url: string): VolumeUrl {
  const m = /^volume:(.*)$/i.exec(url.trim());
  if (!m) return { ok: false, message: `not a volume: URL (got ${JSON.stringify(url)})` };
  const label = m[1]!;
  if (!LABEL_RE.test(label)) {
    return { ok: false, message: `volume:${label} does not name a filesystem label (1 to 32 of A-Z a-z 0-9 _ . -; e.g. volume:${CONFIG_VOLUME_LABEL})` };
  }
  return { ok: true, label };
}

/** The known kind of a label (case-insensitive), if it is one of the three. */
export function volumeKindOf(label: string): VolumeKind | undefined {
  return CONFIG_VOLUME_KINDS.find((k) => k.label.toLowerCase() === label.toLowerCase());
}

/**
 * Where the config may be on a volume with this label: the known format's one file, or for another
 * label (volume:MYLABEL) each format's file in precedence order, the first present wins.
 */
export function configFilesFor(label: string): string[] {
  const kind = volumeKindOf(label);
  return kind ? [kind.file] : CONFIG_VOLUME_KINDS.map((k) => k.file);
}

/** The first of `candidates` that is among the files present (paths relative to the volume's root). Pure. */
export function pickConfigFile(candidates: readonly string[], present: ReadonlySet<string>): string | undefined {
  return candidates.find((c) => present.has(c));
}
