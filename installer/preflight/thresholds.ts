/**
 * Harvester's hardware thresholds (harvester/harvester-installer pkg/preflight/checks.go), per profile.
 * The disk minimums are the planner's too and live in config/disk-sizes.ts.
 */
import { GiB } from '../../config/disk-sizes.js';
import type { Profile } from './report.js';

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

export function formatGiB(bytes: number): string {
  const g = bytes / GiB;
  return `${g >= 100 ? Math.round(g) : Number(g.toFixed(1))}GiB`;
}
