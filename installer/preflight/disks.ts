/**
 * Block-device facts from /sys/block, /dev/disk/by-{id,path}, mountinfo, /proc/swaps and device
 * signatures, all read through a sysroot Host.
 */
import path from 'node:path';
import type { Host } from '../../lib/host.js';
import type { DiskFacts, PartitionFacts, Transport } from './types.js';
import { parseMountinfo, parseProcMounts, parseSwaps, type MountEntry } from './mounts.js';
import { readSignatures, type Signature, type SignatureSource } from './signatures.js';

/** Labels that mark a live installer medium (Harvester's ISO carries COS_LIVE). */
export const LIVE_MEDIUM_LABELS = ['COS_LIVE'];
/** Where dracut's dmsquash-live mounts the boot medium. */
const LIVE_MOUNTPOINT = '/run/initramfs/live';

// Kernel devices that are never install targets: RAM disks, compressed swap, floppies, and the
// stacked devices (dm/md) that show up as holders of real disks instead.
const IGNORED = /^(ram|zram|fd|dm-|md|nbd|drbd)/;

export interface GatherDisksOptions {
  /** How labels are read: `blkid` probes devices (live machine), `udev` reads the database under the sysroot. */
  signatures: 'blkid' | 'udev';
}

interface RawPartition {
  name: string;
  devno?: string;
  number?: number;
  sizeBytes: number;
  holders: string[];
}

interface RawDisk {
  name: string;
  devno?: string;
  sysLink: string;
  partitions: RawPartition[];
}

export function transportOf(name: string, sysLink: string, udevBus?: string): Transport {
  if (name.startsWith('nvme')) return 'nvme';
  if (name.startsWith('vd')) return 'virtio';
  if (name.startsWith('loop')) return 'loop';
  if (name.startsWith('mmcblk')) return 'mmc';
  if (/\/usb\d*\//.test(sysLink) || udevBus === 'usb') return 'usb';
  if (/\/ata\d+\//.test(sysLink) || udevBus === 'ata') return 'sata';
  if (/\/(end_device-|sas_|expander-)/.test(sysLink)) return 'sas';
  if (/^(sd|sr)/.test(name)) return 'scsi';
  return 'unknown';
}

async function readPartitions(host: Host, disk: string): Promise<RawPartition[]> {
  const parts: RawPartition[] = [];
  for (const entry of await host.list(`/sys/block/${disk}`)) {
    if (!entry.startsWith(disk)) continue;
    const base = `/sys/block/${disk}/${entry}`;
    const number = await host.readInt(`${base}/partition`);
    if (number === undefined) continue;
    parts.push({
      name: entry,
      devno: await host.readAttr(`${base}/dev`),
      number,
      sizeBytes: ((await host.readInt(`${base}/size`)) ?? 0) * 512,
      holders: await host.list(`${base}/holders`),
    });
  }
  return parts.sort((a, b) => (a.number ?? 0) - (b.number ?? 0));
}

/** Maps every /dev/disk/by-id and by-path link to the machine path it resolves to. */
async function readDiskLinks(host: Host): Promise<Map<string, string[]>> {
  const byTarget = new Map<string, string[]>();
  for (const dir of ['/dev/disk/by-id', '/dev/disk/by-path']) {
    for (const name of await host.list(dir)) {
      const link = `${dir}/${name}`;
      const target = await host.readLink(link);
      if (target === undefined) continue;
      const machine = path.posix.normalize(path.posix.isAbsolute(target) ? target : path.posix.join(dir, target));
      const list = byTarget.get(machine) ?? [];
      list.push(link);
      byTarget.set(machine, list);
    }
  }
  return byTarget;
}

async function readMounts(host: Host): Promise<MountEntry[]> {
  const mi = await host.readText('/proc/self/mountinfo');
  if (mi !== undefined) return parseMountinfo(mi);
  const m = await host.readText('/proc/mounts');
  return m === undefined ? [] : parseProcMounts(m);
}

function mountsOf(mounts: MountEntry[], devPath: string, devno?: string): string[] {
  return mounts
    .filter((m) => (devno && m.devno === devno) || m.source === devPath)
    .map((m) => m.mountpoint)
    .filter((mp, i, all) => all.indexOf(mp) === i);
}

export async function gatherDisks(
  host: Host,
  opts: GatherDisksOptions,
): Promise<{ disks: DiskFacts[]; signatureSource: SignatureSource }> {
  const raw = await listRawDisks(host);
  const targets = raw.flatMap((d) => [
    { path: `/dev/${d.name}`, devno: d.devno },
    ...d.partitions.map((p) => ({ path: `/dev/${p.name}`, devno: p.devno })),
  ]);
  const { source, byPath: sigs } = await readSignatures(host, targets, opts.signatures);
  const around = await machineAround(host, sigs);
  const disks: DiskFacts[] = [];
  for (const d of raw) disks.push(await diskFacts(host, d, around));
  return { disks, signatureSource: source };
}

/** The block devices worth a look: not RAM, dm, md or nbd devices, not empty, not hidden NVMe paths. */
async function listRawDisks(host: Host): Promise<RawDisk[]> {
  const raw: RawDisk[] = [];
  for (const name of await host.list('/sys/block')) {
    if (IGNORED.test(name)) continue;
    const base = `/sys/block/${name}`;
    const size = (await host.readInt(`${base}/size`)) ?? 0;
    // Size 0: a detached loop device, an empty card reader or optical drive.
    if (size === 0) continue;
    // NVMe multipath exposes per-path block devices marked hidden; the visible head is the disk.
    if ((await host.readAttr(`${base}/hidden`)) === '1') continue;
    raw.push({ name, devno: await host.readAttr(`${base}/dev`), sysLink: (await host.readLink(base)) ?? '', partitions: await readPartitions(host, name) });
  }
  return raw;
}

/** What the disks are judged against: their signatures, links, mounts, swaps, and what the live system booted from. */
interface Around {
  sigs: Map<string, Signature>;
  links: Map<string, string[]>;
  mounts: MountEntry[];
  swaps: Set<string>;
  liveDevnos: Set<string | undefined>;
  liveSources: Set<string>;
  rootDevnos: Set<string | undefined>;
}

async function machineAround(host: Host, sigs: Map<string, Signature>): Promise<Around> {
  const mounts = await readMounts(host);
  const live = mounts.filter((m) => m.mountpoint === LIVE_MOUNTPOINT);
  return {
    sigs,
    links: await readDiskLinks(host),
    mounts,
    swaps: new Set(parseSwaps((await host.readText('/proc/swaps')) ?? '')),
    liveDevnos: new Set(live.map((m) => m.devno)),
    liveSources: new Set(live.map((m) => m.source)),
    rootDevnos: new Set(mounts.filter((m) => m.mountpoint === '/').map((m) => m.devno)),
  };
}

function partitionFacts(d: RawDisk, a: Around): PartitionFacts[] {
  return d.partitions.map((p) => {
    const pPath = `/dev/${p.name}`;
    const ps = a.sigs.get(pPath) ?? {};
    return {
      path: pPath,
      number: p.number,
      sizeBytes: p.sizeBytes,
      label: ps.label,
      partLabel: ps.partLabel,
      fsType: ps.fsType,
      uuid: ps.uuid,
      mountpoints: mountsOf(a.mounts, pPath, p.devno),
      links: a.links.get(pPath) ?? [],
      holders: p.holders,
    };
  });
}

/** The disk holds the live medium, or the root the live system runs on. */
function isBootMedium(d: RawDisk, partitions: PartitionFacts[], sig: Signature, a: Around): boolean {
  const allDevnos = [d.devno, ...d.partitions.map((p) => p.devno)].filter((x): x is string => !!x);
  const allPaths = [`/dev/${d.name}`, ...partitions.map((p) => p.path)];
  const labels = [sig.label, ...partitions.map((p) => p.label)];
  return (
    allDevnos.some((n) => a.liveDevnos.has(n) || a.rootDevnos.has(n)) ||
    allPaths.some((p) => a.liveSources.has(p)) ||
    labels.some((l) => l !== undefined && LIVE_MEDIUM_LABELS.includes(l))
  );
}

/** Model, vendor, serial and WWN: sysfs first, then what udev or blkid knew. */
async function identityOf(host: Host, base: string, sig: Signature): Promise<Pick<DiskFacts, 'model' | 'vendor' | 'serial' | 'wwn'>> {
  const model = (await host.readAttr(`${base}/device/model`)) || sig.model?.replace(/_/g, ' ') || undefined;
  const vendor = (await host.readAttr(`${base}/device/vendor`)) || sig.vendor || undefined;
  const serial = (await host.readAttr(`${base}/device/serial`)) || (await host.readAttr(`${base}/serial`)) || sig.serial || undefined;
  const wwn = (await host.readAttr(`${base}/wwid`)) || (await host.readAttr(`${base}/device/wwid`)) || sig.wwn || undefined;
  return { model: model?.trim() || undefined, vendor: vendor?.trim() || undefined, serial: serial?.trim() || undefined, wwn: wwn?.trim() || undefined };
}

async function diskFacts(host: Host, d: RawDisk, a: Around): Promise<DiskFacts> {
  const base = `/sys/block/${d.name}`;
  const devPath = `/dev/${d.name}`;
  const sig: Signature = a.sigs.get(devPath) ?? {};
  const transport = transportOf(d.name, d.sysLink, sig.bus);
  const partitions = partitionFacts(d, a);
  const allPaths = [devPath, ...partitions.map((p) => p.path)];
  return {
    name: d.name,
    path: devPath,
    links: a.links.get(devPath) ?? [],
    sizeBytes: ((await host.readInt(`${base}/size`)) ?? 0) * 512,
    logicalSectorSize: (await host.readInt(`${base}/queue/logical_block_size`)) ?? 512,
    physicalSectorSize: (await host.readInt(`${base}/queue/physical_block_size`)) ?? 512,
    transport,
    rotational: (await host.readAttr(`${base}/queue/rotational`)) === '1',
    removable: (await host.readAttr(`${base}/removable`)) === '1',
    readOnly: (await host.readAttr(`${base}/ro`)) === '1',
    ...(await identityOf(host, base, sig)),
    nvme: transport === 'nvme' ? await readNvme(host, d.name) : undefined,
    partitions,
    wholeDiskFs: sig.fsType || sig.label ? { fsType: sig.fsType, label: sig.label, uuid: sig.uuid } : undefined,
    inUse: {
      mountpoints: [...mountsOf(a.mounts, devPath, d.devno), ...partitions.flatMap((p) => p.mountpoints)],
      swap: allPaths.some((p) => a.swaps.has(p)),
      holders: [...(await host.list(`${base}/holders`)), ...partitions.flatMap((p) => p.holders ?? [])].filter((h, i, all) => all.indexOf(h) === i),
      bootMedium: isBootMedium(d, partitions, sig, a),
    },
  };
}

async function readNvme(host: Host, name: string): Promise<DiskFacts['nvme']> {
  const base = `/sys/block/${name}`;
  // The device link is relative to the real block dir (…/nvme/nvme0/nvme0n1), e.g. ../../nvme0.
  const blockLink = await host.readLink(base);
  const ctrlLink = await host.readLink(`${base}/device`);
  const ctrl = ctrlLink && path.posix.basename(path.posix.join('/sys/block', blockLink ?? name, ctrlLink));
  const nsid = (await host.readInt(`${base}/nsid`)) ?? Number.parseInt(/n(\d+)$/.exec(name)?.[1] ?? '', 10);
  return {
    controller: ctrl || undefined,
    namespaceId: Number.isFinite(nsid) ? nsid : undefined,
    firmware: (await host.readAttr(`${base}/device/firmware_rev`))?.trim() || undefined,
  };
}
