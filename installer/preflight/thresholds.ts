/** Harvester's hardware and disk thresholds (harvester/harvester-installer pkg/config/config.go, pkg/preflight/checks.go), per profile. */
import type { Profile } from './report.js';

export const GiB = 2 ** 30;

export interface ProfileThresholds {
  cpuCores: number;
  memoryGiB: number;
  nicMbps: number;
}

export const THRESHOLDS: Record<Profile, ProfileThresholds> = {
  testing: { cpuCores: 8, memoryGiB: 32, nicMbps: 1000 },
  production: { cpuCores: 16, memoryGiB: 64, nicMbps: 10_000 },
};

/** MemTotal is below the installed RAM (kernel and firmware reservations): Harvester allows 10 %. */
export const MEMINFO_ALLOWANCE = 0.9;

/** Install disk alone (OS + Longhorn default disk on one disk). */
export const SINGLE_DISK_MIN_GIB = 250;
/** Install disk when a separate data disk is given, and for the witness role. */
export const MULTI_DISK_MIN_GIB = 180;
/** A separate Longhorn data disk. */
export const DATA_DISK_MIN_GIB = 50;

/** Whole GiB, rounded down, as Harvester computes them (bytes >> 30). */
export function wholeGiB(bytes: number): number {
  return Math.floor(bytes / GiB);
}

export function formatGiB(bytes: number): string {
  const g = bytes / GiB;
  return `${g >= 100 ? Math.round(g) : Number(g.toFixed(1))}GiB`;
}
