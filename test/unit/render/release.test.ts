/** harvester-release.yaml as the media carry it: read as Harvester's build writes it, and bad files refused with their line and key. */
import { describe, expect, it } from 'vitest';
import { mediaRelease, parseReleaseMetadata } from '../../../installer/render/release.js';
import { HvError } from '../../../lib/errors.js';
import { RELEASE_TEXT } from './cases.js';

function errorOf(fn: () => unknown): HvError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(HvError);
    return e as HvError;
  }
  throw new Error('no error');
}

describe('parseReleaseMetadata', () => {
  it("reads every key of Harvester's file as a string, a commit id that looks like a number included", () => {
    const r = parseReleaseMetadata(RELEASE_TEXT, '/iso/harvester-release.yaml');
    expect(r.source).toBe('/iso/harvester-release.yaml');
    expect(r.metadata).toMatchObject({ harvester: 'v1.8.1', harvesterChart: '1.8.1', kubernetes: 'v1.35.6+rke2r1', rancher: 'v2.14.2', minUpgradableVersion: 'v1.7.0', os: 'Harvester v1.8.1' });
    // 8064e123 is a float to a YAML 1.2 core reader; the build means the commit.
    expect(r.metadata.installer).toBe('8064e123');
    // Keys the build adds later (collect-deps.sh) are kept.
    expect(r.metadata.rancherDependencies).toEqual({ fleet: { chart: '108.0.1+up0.14.1', app: '0.14.1' } });
  });

  it('takes an empty value as empty, for the resolver to report as missing', () => {
    expect(parseReleaseMetadata('kubernetes:\nrancher: v2.14.2\n', 'f').metadata).toEqual({ kubernetes: '', rancher: 'v2.14.2' });
  });

  it.each([
    ['not YAML', 'kubernetes: [v1\n', /^f is not a usable harvester-release\.yaml: line 2: Flow sequence/],
    ['a list, not a mapping', '- v1.8.1\n', /it is not a mapping of keys to versions/],
    ['a scalar document', 'v1.8.1\n', /it is not a mapping of keys to versions/],
    ['an empty file', '', /it is not a mapping of keys to versions/],
    ['a version that is a list', 'kubernetes:\n  - v1.35.6+rke2r1\n', /kubernetes: must be string/],
    ['a version with a space', 'rancher: v2.14.2 beta\n', /rancher: a version has no spaces/],
    ['a duplicate key', 'rancher: v2.14.2\nrancher: v2.13.0\n', /line 2: Map keys must be unique/],
  ])('refuses %s', (_what, text, message) => {
    const e = errorOf(() => parseReleaseMetadata(text, 'f'));
    expect(e.message).toMatch(message);
    expect(e.where).toBe('f');
    expect(e.hint).toMatch(/runtime_version, rancher_version, \*_chart_version/);
  });
});

describe('mediaRelease', () => {
  const image = parseReleaseMetadata(RELEASE_TEXT, '/src/etc/harvester-release.yaml');

  it("uses the image's file, the ISO's when the image has none, and accepts both when they agree", () => {
    const iso = parseReleaseMetadata(RELEASE_TEXT, '/iso/harvester-release.yaml');
    expect(mediaRelease(image, undefined)).toBe(image);
    expect(mediaRelease(undefined, iso)).toBe(iso);
    expect(mediaRelease(image, iso)).toBe(image);
    expect(mediaRelease(undefined, undefined)).toBeUndefined();
  });

  it('refuses an ISO whose release differs from the image being installed, naming each difference', () => {
    const iso = parseReleaseMetadata(RELEASE_TEXT.replace('kubernetes: v1.35.6+rke2r1', 'kubernetes: v1.34.1+rke2r1'), '/iso/harvester-release.yaml');
    const e = errorOf(() => mediaRelease(image, iso));
    expect(e.message).toBe('/src/etc/harvester-release.yaml and /iso/harvester-release.yaml describe different releases (kubernetes: v1.35.6+rke2r1 vs v1.34.1+rke2r1)');
    expect(e.hint).toMatch(/same ISO/);
  });
});
