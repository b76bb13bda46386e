/** The re-import decision after kubelet's image GC removed bundle images: what, and how often. */
import { describe, expect, it } from 'vitest';
import { planReimport } from '../../../agent/preload/reimport.js';

const LIMITS = { minIntervalMs: 15 * 60_000, perDay: 3 };
const missing = [
  { image: 'docker.io/rancher/a:v1', archive: 'harvester/images/rancher-images.tar.zst' },
  { image: 'docker.io/rancher/b:v1', archive: 'harvester/images/rancher-images.tar.zst' },
  { image: 'docker.io/rancher/rke2-runtime:v1.31', archive: 'harvester/images/rke2-images.tar.zst' },
];
const H = 3_600_000;
const NOW = 100 * H;

describe('planReimport', () => {
  it('does nothing when nothing is missing', () => {
    expect(planReimport([], [NOW - 60_000], NOW, LIMITS)).toEqual({ action: 'none' });
  });

  it('re-imports each archive that lost an image, once', () => {
    expect(planReimport(missing, [], NOW, LIMITS)).toEqual({
      action: 'reimport',
      archives: ['harvester/images/rancher-images.tar.zst', 'harvester/images/rke2-images.tar.zst'],
      images: ['docker.io/rancher/a:v1', 'docker.io/rancher/b:v1', 'docker.io/rancher/rke2-runtime:v1.31'],
    });
  });

  it('defers within the minimum interval, saying until when', () => {
    const d = planReimport(missing, [NOW - 5 * 60_000], NOW, LIMITS);
    expect(d).toEqual({ action: 'deferred', images: missing.map((m) => m.image), until: NOW + 10 * 60_000, reason: 'the last re-import was 5 min ago (at most one every 15 min)' });
  });

  it('stops after the daily budget and blames the disk, resuming when the oldest of the day ages out', () => {
    const past = [NOW - 20 * H, NOW - 10 * H, NOW - 1 * H];
    const d = planReimport(missing, past, NOW, LIMITS);
    expect(d.action).toBe('deferred');
    expect(d.action === 'deferred' && d.until).toBe(NOW - 20 * H + 24 * H);
    expect(d.action === 'deferred' && d.reason).toContain('3 re-imports in the last 24 h (at most 3): kubelet keeps removing them');
    // A re-import older than a day no longer counts.
    expect(planReimport(missing, [NOW - 30 * H, NOW - 10 * H, NOW - 1 * H], NOW, LIMITS).action).toBe('reimport');
  });
});
