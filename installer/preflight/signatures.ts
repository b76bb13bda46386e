/**
 * Filesystem and partition-table signatures (labels, fs types, GPT partition names) of block devices.
 * Two sources with one shape:
 *  - `blkid -p -o export` (low-level probe, reads the superblocks now: right on a live machine, and the
 *    only source where there is no udev, like a build box or an early initramfs);
 *  - the udev database `/run/udev/data/b<major>:<minor>` (what udev recorded; readable under a sysroot,
 *    so fixture trees carry their labels there in the real udev format).
 */
import type { Host } from '../../lib/host.js';

export interface Signature {
  fsType?: string;
  label?: string;
  uuid?: string;
  partLabel?: string;
  /** Partition-table type on a whole disk (gpt, dos). */
  ptType?: string;
  /** Extra identity udev knows (sd disks carry serial/WWN/model only there). */
  serial?: string;
  wwn?: string;
  model?: string;
  vendor?: string;
  bus?: string;
}

/** Parses `blkid -p -o export` output for several devices (blocks separated by blank lines). */
export function parseBlkidExport(text: string): Map<string, Signature> {
  const out = new Map<string, Signature>();
  for (const block of text.split(/\n\s*\n/)) {
    const kv = new Map<string, string>();
    for (const line of block.split('\n')) {
      const i = line.indexOf('=');
      if (i > 0) kv.set(line.slice(0, i).trim(), line.slice(i + 1).trim());
    }
    const dev = kv.get('DEVNAME');
    if (!dev) continue;
    const sig: Signature = {};
    // blkid reports TYPE only for filesystems/raid members; a bare partition table comes as PTTYPE.
    if (kv.get('TYPE')) sig.fsType = kv.get('TYPE');
    if (kv.get('LABEL')) sig.label = kv.get('LABEL');
    if (kv.get('UUID')) sig.uuid = kv.get('UUID');
    if (kv.get('PART_ENTRY_NAME')) sig.partLabel = kv.get('PART_ENTRY_NAME');
    if (kv.get('PTTYPE')) sig.ptType = kv.get('PTTYPE');
    out.set(dev, sig);
  }
  return out;
}

/** Parses one udev database file (`E:KEY=value` property lines). */
export function parseUdevDb(text: string): Signature {
  const kv = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('E:')) continue;
    const i = line.indexOf('=');
    if (i > 2) kv.set(line.slice(2, i), line.slice(i + 1));
  }
  const sig: Signature = {};
  const set = (k: keyof Signature, key: string) => {
    const v = kv.get(key);
    if (v) sig[k] = v;
  };
  set('fsType', 'ID_FS_TYPE');
  set('label', 'ID_FS_LABEL');
  set('uuid', 'ID_FS_UUID');
  set('partLabel', 'ID_PART_ENTRY_NAME');
  set('ptType', 'ID_PART_TABLE_TYPE');
  set('serial', 'ID_SERIAL_SHORT');
  set('wwn', 'ID_WWN');
  set('model', 'ID_MODEL');
  set('vendor', 'ID_VENDOR');
  set('bus', 'ID_BUS');
  return sig;
}

export interface ProbeTarget {
  /** Machine path, /dev/sda1. */
  path: string;
  /** major:minor from sysfs `dev`. */
  devno?: string;
}

export type SignatureSource = 'blkid' | 'udev' | 'none';

/**
 * Reads signatures for every target. `blkid` probes the real devices (live machine only), `udev` reads
 * the database under the sysroot. Identity fields from udev are merged under blkid's answer either way.
 */
export async function readSignatures(
  host: Host,
  targets: ProbeTarget[],
  mode: 'blkid' | 'udev',
): Promise<{ source: SignatureSource; byPath: Map<string, Signature> }> {
  const byPath = new Map<string, Signature>();
  let udevSeen = false;
  for (const t of targets) {
    if (!t.devno) continue;
    const text = await host.readText(`/run/udev/data/b${t.devno}`);
    if (text === undefined) continue;
    udevSeen = true;
    byPath.set(t.path, parseUdevDb(text));
  }
  if (mode === 'udev' || targets.length === 0) return { source: udevSeen ? 'udev' : 'none', byPath };

  // Lazy import: fixture runs (and the <1 s preflight budget) do not pay for execa.
  const { run, hasCommand } = await import('../../lib/exec.js');
  // Without blkid (util-linux missing) the udev database is all there is.
  if (!(await hasCommand('blkid'))) return { source: udevSeen ? 'udev' : 'none', byPath };
  // One blkid for all devices, in order. In low-level probe mode blkid stops at the first device that
  // has no signature (status 2) or cannot be opened (an empty optical drive): that is the device after
  // the last one it printed. Probe again from the one after it until every device has been tried.
  const probed = new Map<string, Signature>();
  let remaining = targets.map((t) => t.path);
  while (remaining.length > 0) {
    const r = await run('blkid', ['-p', '-o', 'export', ...remaining], { allowFailure: true, timeoutMs: 60_000 });
    const found = parseBlkidExport(r.stdout);
    for (const [dev, sig] of found) probed.set(dev, sig);
    if (r.exitCode === 0) break;
    const last = Math.max(-1, ...[...found.keys()].map((d) => remaining.indexOf(d)));
    remaining = remaining.slice(last + 2);
  }
  for (const t of targets) {
    const fromUdev = byPath.get(t.path) ?? {};
    const p = probed.get(t.path) ?? {};
    // The probe is authoritative for what is on disk now; udev only adds identity (serial, WWN, model).
    byPath.set(t.path, {
      fsType: p.fsType,
      label: p.label,
      uuid: p.uuid,
      partLabel: p.partLabel,
      ptType: p.ptType,
      serial: fromUdev.serial,
      wwn: fromUdev.wwn,
      model: fromUdev.model,
      vendor: fromUdev.vendor,
      bus: fromUdev.bus,
    });
  }
  return { source: 'blkid', byPath };
}
