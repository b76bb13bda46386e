import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { activeDigestOf, committedFallbackStateYaml, upgradedStateYaml } from '../../../node/state-yaml.js';

const installed = `date: 2026-01-01T00:00:00.000Z
state:
  label: COS_STATE
  active: {source: dir:///v1, source-metadata: {digest: "sha256:s1"}, label: COS_ACTIVE, fs: ext2, file: cOS/active.img, size: 100, digest: "sha256-4m:a1"}
  passive: {source: dir:///v1, label: COS_PASSIVE, fs: ext2, file: cOS/passive.img, size: 100, digest: "sha256-4m:p1"}
  harvester-extra: kept
recovery:
  label: COS_RECOVERY
`;
const v2 = { source: 'file:///v2.squashfs', sourceDigest: 's2', sizeBytes: 200, digest: 'sha256-4m:a2' };

describe('state.yaml A/B moves', () => {
  it('an upgrade: the new image active, the old active passive with its new digest, other keys kept', () => {
    const doc = parse(upgradedStateYaml(installed, v2, 'sha256-4m:a1-relabelled', 'D'));
    expect(doc.date).toBe('D');
    expect(doc.state.active).toMatchObject({ source: 'file:///v2.squashfs', 'source-metadata': { digest: 'sha256:s2' }, label: 'COS_ACTIVE', file: 'cOS/active.img', size: 200, digest: 'sha256-4m:a2' });
    expect(doc.state.passive).toMatchObject({ source: 'dir:///v1', label: 'COS_PASSIVE', file: 'cOS/passive.img', size: 100, digest: 'sha256-4m:a1-relabelled' });
    expect(doc.state['harvester-extra']).toBe('kept');
    expect(doc.recovery.label).toBe('COS_RECOVERY');
    expect(activeDigestOf(upgradedStateYaml(installed, v2, undefined, 'D'))).toBe('sha256-4m:a2');
  });

  it('a committed fallback: the previous image active again, the failed one recorded aside, no passive; twice is once', () => {
    const upgraded = upgradedStateYaml(installed, v2, 'sha256-4m:a1r', 'D');
    const once = committedFallbackStateYaml(upgraded, 'sha256-4m:a1-active-again', 'E');
    const doc = parse(once);
    expect(doc.state.active).toMatchObject({ source: 'dir:///v1', label: 'COS_ACTIVE', file: 'cOS/active.img', digest: 'sha256-4m:a1-active-again' });
    expect(doc.state.passive).toBeUndefined();
    expect(doc.state.failed).toMatchObject({ source: 'file:///v2.squashfs', file: 'cOS/failed.img', digest: 'sha256-4m:a2' });
    expect(committedFallbackStateYaml(once, 'x', 'F')).toBe(once);
  });

  it('the next upgrade after a fallback: the previous image passive, the failed record gone', () => {
    const fallback = committedFallbackStateYaml(upgradedStateYaml(installed, v2, 'r', 'D'), 'sha256-4m:v1a', 'E');
    const doc = parse(upgradedStateYaml(fallback, { ...v2, digest: 'sha256-4m:a4', source: 'file:///v4' }, 'sha256-4m:v1p', 'G'));
    expect(doc.state.passive).toMatchObject({ source: 'dir:///v1', label: 'COS_PASSIVE', digest: 'sha256-4m:v1p' });
    expect(doc.state.failed).toBeUndefined();
  });
});
