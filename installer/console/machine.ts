/**
 * The machine as the console lists it: every disk with its by-id name, size, model, serial and, when
 * it cannot take the install, why (preflight's own checks for that disk, not a second set of
 * rules); every NIC with its link state, MAC and speed. Pure.
 */
import type { Option } from '../../lib/tui/form.js';
import type { HarvesterConfig } from '../../config/types.js';
import { formatBytes } from '../../config/disk-sizes.js';
import { isInstallCandidate, runPreflightChecks, stableNameOf, type PreflightCheck } from '../preflight/index.js';
import type { DiskFacts, MachineFacts, NicFacts } from '../preflight/types.js';

/** The name the config records for a disk (preflight's stableNameOf: a by-id link, else its /dev path). */
export const diskName = stableNameOf;

/** Disks the console offers: not optical drives (they cannot take an install and only add noise). */
export function listedDisks(facts: MachineFacts): DiskFacts[] {
  return facts.disks.filter((d) => !/^sr\d/.test(d.name));
}

export function describeDisk(d: DiskFacts): string[] {
  const what = [formatBytes(d.sizeBytes), d.transport, d.model, d.serial ? `serial ${d.serial}` : undefined].filter(Boolean).join(', ');
  return [d.path === diskName(d) ? what : `${d.path}: ${what}`];
}

/**
 * Why a disk cannot take the install in this role: preflight's failed checks for it with the config
 * pointing at it. Size is left to the page's own check (it depends on the data disk choice).
 */
export function diskProblems(facts: MachineFacts, d: DiskFacts, role: 'device' | 'data-disk'): PreflightCheck[] {
  const config: HarvesterConfig = role === 'device' ? { install: { device: d.path } } : { install: { device: '/nonexistent', dataDisk: d.path } };
  const report = runPreflightChecks(facts, { config, profile: 'testing' });
  return report.checks.filter((c) => c.result === 'fail' && c.id.startsWith(`${role}.`) && c.id !== `${role}.size` && c.id !== `${role}.exists`);
}

export function diskOptions(facts: MachineFacts, role: 'device' | 'data-disk'): Option[] {
  return listedDisks(facts).map((d) => {
    const problems = diskProblems(facts, d, role);
    return {
      value: diskName(d),
      label: diskName(d),
      detail: describeDisk(d),
      disabled: problems.length ? problems.map((p) => p.message).join(' ') : undefined,
    };
  });
}

/**
 * The disk the console starts on: the first usable one of the list, as Harvester's disk page starts
 * at its first entry (pkg/console/install_panels.go); never a bigger disk further down, which would
 * be a guess at which disk to wipe.
 */
export function defaultDisk(facts: MachineFacts): string | undefined {
  const s = listedDisks(facts).find((d) => isInstallCandidate(d) || diskProblems(facts, d, 'device').length === 0);
  return s ? diskName(s) : undefined;
}

export function findListedDisk(facts: MachineFacts, name: string | undefined): DiskFacts | undefined {
  if (!name) return undefined;
  return facts.disks.find((d) => d.path === name || d.links.includes(name));
}

/** Harvester's console default for the persistent partition: 30 % of the disk, at least 150Gi. */
export function defaultPersistentSize(d: DiskFacts | undefined): string {
  const gib = d ? Math.floor((d.sizeBytes * 0.3) / 2 ** 30) : 0;
  return `${Math.max(150, gib)}Gi`;
}

/** Other disks that carry an earlier install (Harvester offers them under "Wipe Disks"). */
export function staleInstallDisks(facts: MachineFacts, exclude: string[]): DiskFacts[] {
  const skip = new Set(exclude.map((n) => findListedDisk(facts, n)?.path).filter(Boolean));
  return listedDisks(facts).filter(
    (d) => !skip.has(d.path) && !d.inUse.bootMedium && d.partitions.some((p) => p.label === 'COS_OEM' || p.partLabel === 'COS_OEM' || p.label === 'COS_STATE'),
  );
}

export function linkUp(n: NicFacts): boolean {
  return n.operState === 'up' || n.carrier === true;
}

export function listedNics(facts: MachineFacts): NicFacts[] {
  return facts.nics.filter((n) => !n.loopback).sort((a, b) => Number(a.virtual) - Number(b.virtual) || a.name.localeCompare(b.name));
}

export function nicOptions(facts: MachineFacts): Option[] {
  return listedNics(facts).map((n) => {
    const link = linkUp(n) ? 'link up' : n.carrier === false ? 'no link (cable not plugged in?)' : `link ${n.operState ?? 'unknown'}`;
    const speed = n.speedMbps ? (n.speedMbps >= 1000 ? `${n.speedMbps / 1000} Gb/s` : `${n.speedMbps} Mb/s`) : 'speed not reported';
    return { value: n.name, label: `${n.name} (${n.mac ?? 'no MAC'}, ${link}, ${speed})` };
  });
}
