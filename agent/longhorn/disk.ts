/**
 * The Longhorn default disk: the one filesystem labelled HARV_LH_DEFAULT, ext4, healthy, mounted at
 * /var/lib/harvester/defaultdisk. Facts come from blkid, dumpe2fs, mountinfo and statfs (no udev
 * needed); judgeLonghornDisk decides what to do with them.
 */
import { mkdir, readFile, stat, statfs } from 'node:fs/promises';
import { run } from '../../lib/exec.js';

export const LH_LABEL = 'HARV_LH_DEFAULT';
export const LH_MOUNT = '/var/lib/harvester/defaultdisk';

export interface MountEntry {
  majorMinor: string;
  mountPoint: string;
  fsType: string;
  source: string;
  options: string[];
}

export interface LonghornDiskFacts {
  label: string;
  /** Machine path of the mount point. */
  mountPoint: string;
  devices: string[];
  /** Of the single device, when there is one. */
  fsType?: string;
  /** dumpe2fs `Filesystem state`, e.g. "clean", "not clean", "clean with errors". */
  fsState?: string;
  fsErrorCount?: number;
  deviceMajorMinor?: string;
  /** What is mounted at the mount point now. */
  mounted?: MountEntry;
  capacity?: { totalBytes: number; freeBytes: number };
}

export type LonghornDecision =
  | { action: 'ok'; detail: string }
  | { action: 'mount'; device: string }
  | { action: 'retry'; reason: string }
  | { action: 'fail'; diagnosis: string; hint: string };

function gib(n: number): string {
  return `${(n / 2 ** 30).toFixed(1)} GiB`;
}

export function judgeLonghornDisk(f: LonghornDiskFacts): LonghornDecision {
  if (f.devices.length === 0) {
    return { action: 'retry', reason: `no device labelled ${f.label} (blkid -t LABEL=${f.label} found none)` };
  }
  if (f.devices.length > 1) {
    return {
      action: 'fail',
      diagnosis: `${f.devices.length} devices labelled ${f.label}: ${f.devices.join(', ')}; the Longhorn default disk must be exactly one`,
      hint: `clear the stale label on the device that is not this node's data disk (tune2fs -L '' DEVICE), cf. harvester#8043`,
    };
  }
  const dev = f.devices[0]!;
  if (f.fsType !== 'ext4') {
    return {
      action: 'fail',
      diagnosis: `${dev} (${f.label}) is ${f.fsType ? f.fsType : 'not a recognised filesystem'}, not ext4`,
      hint: `the installer formats the Longhorn default disk ext4: reformat it (mkfs.ext4 -L ${f.label} ${dev}) only if its data is expendable`,
    };
  }
  const errors = (f.fsErrorCount ?? 0) > 0 || /error/i.test(f.fsState ?? '');
  if (errors || (f.fsState !== undefined && !/^clean/.test(f.fsState) && !f.mounted)) {
    return {
      action: 'fail',
      diagnosis: `ext4 on ${dev} (${f.label}) is not healthy: state "${f.fsState ?? 'unknown'}"${f.fsErrorCount ? `, ${f.fsErrorCount} errors recorded` : ''}`,
      hint: `unmount it and run e2fsck -f ${dev}, then start hvagent again`,
    };
  }
  if (!f.mounted) return { action: 'mount', device: dev };
  if (f.deviceMajorMinor && f.mounted.majorMinor !== f.deviceMajorMinor) {
    return {
      action: 'fail',
      diagnosis: `${f.mountPoint} has ${f.mounted.source} (${f.mounted.fsType}) mounted, not ${dev} (${f.label})`,
      hint: `unmount ${f.mountPoint} (umount ${f.mountPoint}) so the ${f.label} disk can be mounted there`,
    };
  }
  if (f.mounted.options.includes('ro')) {
    return {
      action: 'fail',
      diagnosis: `${dev} is mounted read-only at ${f.mountPoint} (ext4 remounts read-only after errors)`,
      hint: `check dmesg for ext4 errors on ${dev}; unmount and run e2fsck -f ${dev}`,
    };
  }
  const cap = f.capacity ? `, ${gib(f.capacity.totalBytes)}, ${gib(f.capacity.freeBytes)} free` : '';
  return { action: 'ok', detail: `${dev} (${f.label}, ext4 ${f.fsState ?? 'clean'}) on ${f.mountPoint}${cap}` };
}

/** Parses /proc/self/mountinfo. */
export function parseMountInfo(text: string): MountEntry[] {
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const [left, right] = line.split(' - ');
    if (!left || !right) continue;
    const l = left.split(' ');
    const r = right.split(' ');
    const unescape = (s: string): string => s.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    out.push({ majorMinor: l[2]!, mountPoint: unescape(l[4]!), options: l[5]!.split(','), fsType: r[0]!, source: unescape(r[1] ?? '') });
  }
  return out;
}

/** Parses `dumpe2fs -h` for the state and the error count. */
export function parseDumpe2fs(text: string): { state?: string; errorCount?: number } {
  const state = /^Filesystem state:\s*(.+)$/m.exec(text)?.[1]?.trim();
  const ec = /^FS Error count:\s*(\d+)/m.exec(text)?.[1];
  return { state, errorCount: ec === undefined ? undefined : Number(ec) };
}

export interface ProbeOptions {
  root: (p: string) => string;
  label: string;
  mountPoint: string;
  /** Limit the blkid scan to these devices (default: every block device). */
  devices?: string[];
}

export async function probeLonghornDisk(o: ProbeOptions): Promise<LonghornDiskFacts> {
  // -c /dev/null: no cache, so a label changed a moment ago is seen; exit 2 means "none found".
  const found = await run('blkid', ['-c', '/dev/null', '-t', `LABEL=${o.label}`, '-o', 'device', ...(o.devices ?? [])], { timeoutMs: 30_000, allowFailure: true });
  if (found.exitCode !== 0 && found.exitCode !== 2) throw new Error(`blkid failed (status ${found.exitCode}): ${found.stderr.trim()}`);
  const devices = [...new Set(found.stdout.split('\n').map((s) => s.trim()).filter(Boolean))].sort();
  const facts: LonghornDiskFacts = { label: o.label, mountPoint: o.mountPoint, devices };
  const realMount = o.root(o.mountPoint);
  const mountinfo = parseMountInfo(await readFile('/proc/self/mountinfo', 'utf8'));
  facts.mounted = mountinfo.filter((m) => m.mountPoint === realMount).pop();
  if (devices.length !== 1) return facts;
  const dev = devices[0]!;
  const probe = await run('blkid', ['-c', '/dev/null', '-p', '-o', 'export', dev], { timeoutMs: 30_000, allowFailure: true });
  facts.fsType = /^TYPE=(.*)$/m.exec(probe.stdout)?.[1];
  const st = await stat(dev);
  facts.deviceMajorMinor = `${Math.floor(st.rdev / 256) & 0xfff}:${(st.rdev & 0xff) | ((st.rdev >> 12) & 0xfff00)}`;
  if (facts.fsType === 'ext4') {
    const d = await run('dumpe2fs', ['-h', dev], { timeoutMs: 30_000 });
    const p = parseDumpe2fs(d.stdout);
    facts.fsState = p.state;
    facts.fsErrorCount = p.errorCount;
  }
  if (facts.mounted) {
    const s = await statfs(realMount);
    facts.capacity = { totalBytes: s.blocks * s.bsize, freeBytes: s.bavail * s.bsize };
  }
  return facts;
}

export async function mountLonghornDisk(o: ProbeOptions, device: string): Promise<void> {
  const target = o.root(o.mountPoint);
  await mkdir(target, { recursive: true, mode: 0o755 });
  await run('mount', ['-t', 'ext4', device, target], { timeoutMs: 60_000 });
}
