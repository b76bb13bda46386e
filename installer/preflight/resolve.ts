/** Finding the disk a config names: a /dev path, a by-id/by-path link, or any symlink under the sysroot. */
import type { Host } from '../../lib/host.js';
import type { DiskFacts, MachineFacts, PartitionFacts } from './types.js';

export interface LocatedDevice {
  disk: DiskFacts;
  /** Set when the name points at a partition of `disk`, not the whole disk. */
  partition?: PartitionFacts;
}

/** Pure lookup by machine path or a known by-id/by-path link (links were resolved when facts were gathered). */
export function locateDevice(facts: MachineFacts, name: string): LocatedDevice | undefined {
  for (const disk of facts.disks) {
    if (disk.path === name || disk.links.includes(name)) return { disk };
    for (const partition of disk.partitions) {
      if (partition.path === name || (partition.links ?? []).includes(name)) return { disk, partition };
    }
  }
  return undefined;
}

/**
 * The whole disk a path or symlink names, resolving links under the host's sysroot
 * (/dev/disk/by-label, by-uuid, or any other link) when the pure lookup misses.
 * A partition is not a disk: it returns undefined (use locateDevice to tell the two apart).
 */
export async function resolveDevice(facts: MachineFacts, pathOrLink: string, host: Host): Promise<DiskFacts | undefined> {
  const located = await resolveLocated(facts, pathOrLink, host);
  return located && !located.partition ? located.disk : undefined;
}

export async function resolveLocated(facts: MachineFacts, pathOrLink: string, host: Host): Promise<LocatedDevice | undefined> {
  const direct = locateDevice(facts, pathOrLink);
  if (direct) return direct;
  if (!pathOrLink.startsWith('/')) return undefined;
  const real = await host.resolve(pathOrLink);
  return real ? locateDevice(facts, real) : undefined;
}

/**
 * Resolves every disk name the config uses (device, data_disk, wipe_disks_list) through symlinks under
 * the sysroot, so the pure checks can match /dev/disk/by-label/... and other links.
 */
export async function resolveConfigAliases(
  facts: MachineFacts,
  config: { install?: { device?: string; dataDisk?: string; wipeDisksList?: string[] } } | undefined,
  host: Host,
): Promise<Record<string, string>> {
  const names = [config?.install?.device, config?.install?.dataDisk, ...(config?.install?.wipeDisksList ?? [])]
    .map((n) => n?.trim())
    .filter((n): n is string => !!n && n.startsWith('/'));
  const out: Record<string, string> = {};
  for (const n of names) {
    if (locateDevice(facts, n)) continue;
    const real = await host.resolve(n);
    if (real) out[n] = real;
  }
  return out;
}
