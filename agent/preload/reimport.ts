/**
 * After the preload: kubelet's image garbage collection removes images no pod uses when the disk
 * fills (its high threshold), bundle images included; an air-gapped node then cannot pull them
 * back and pods go ImagePullBackOff (harvester/harvester#3227, #3246, #2668). The watch re-imports
 * what went missing from the bundle still on disk, at a bounded rate: under lasting disk pressure
 * kubelet would remove them again at once, and re-importing in a loop would only churn the disk.
 * Pure.
 */
import type { MissingImage } from './plan.js';

export interface ReimportLimits {
  minIntervalMs: number;
  perDay: number;
}

export type ReimportDecision =
  | { action: 'none' }
  | { action: 'reimport'; archives: string[]; images: string[] }
  | { action: 'deferred'; images: string[]; until: number; reason: string };

const DAY_MS = 86_400_000;

function span(ms: number): string {
  return ms < 120_000 ? `${Math.round(ms / 1000)} s` : `${Math.round(ms / 60_000)} min`;
}

/** `past`: when earlier re-imports ran (ms). */
export function planReimport(missing: readonly MissingImage[], past: readonly number[], now: number, limits: ReimportLimits): ReimportDecision {
  if (missing.length === 0) return { action: 'none' };
  const images = missing.map((m) => m.image);
  const last = past.length ? Math.max(...past) : undefined;
  if (last !== undefined && now - last < limits.minIntervalMs) {
    return { action: 'deferred', images, until: last + limits.minIntervalMs, reason: `the last re-import was ${span(now - last)} ago (at most one every ${span(limits.minIntervalMs)})` };
  }
  const today = past.filter((t) => now - t < DAY_MS).sort((a, b) => a - b);
  if (today.length >= limits.perDay) {
    return {
      action: 'deferred',
      images,
      until: today[today.length - limits.perDay]! + DAY_MS,
      reason: `${today.length} re-imports in the last 24 h (at most ${limits.perDay}): kubelet keeps removing them, so the disk under /var/lib/rancher is probably too full for kubelet's image GC threshold`,
    };
  }
  return { action: 'reimport', archives: [...new Set(missing.map((m) => m.archive))], images };
}
