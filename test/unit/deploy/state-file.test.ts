import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseStateYaml, renderStateYaml, sourceUri, type DeployState } from '../../../installer/deploy/state-file.js';

const sha = (c: string): string => c.repeat(64);
const digest = (c: string): string => `sha256-4m:${sha(c)}`;
const state: DeployState = {
  date: '2026-11-30T00:00:00.000Z',
  source: { kind: 'squashfs', path: '/run/initramfs/live/rootfs.squashfs' },
  sourceDigest: sha('d'),
  active: { file: 'cOS/active.img', label: 'COS_ACTIVE', fs: 'ext2', sizeBytes: 3221225472, digest: digest('a') },
  passive: { file: 'cOS/passive.img', label: 'COS_PASSIVE', fs: 'ext2', sizeBytes: 3221225472, digest: digest('b') },
  recovery: { file: 'cOS/recovery.img', label: 'COS_SYSTEM', fs: 'ext2', sizeBytes: 3221225472, digest: digest('c') },
};

describe('state.yaml', () => {
  it("has Elemental v1's shape: date, partitions with label, images with source/label/fs", () => {
    const doc = parse(renderStateYaml(state));
    expect(doc.date).toBe(state.date);
    expect(doc.state.label).toBe('COS_STATE');
    expect(doc.recovery.label).toBe('COS_RECOVERY');
    expect(doc.state.active).toMatchObject({ source: 'file:///run/initramfs/live/rootfs.squashfs', label: 'COS_ACTIVE', fs: 'ext2' });
    expect(doc.state.passive.label).toBe('COS_PASSIVE');
    expect(doc.recovery.recovery).toMatchObject({ label: 'COS_SYSTEM', file: 'cOS/recovery.img', size: 3221225472, digest: digest('c') });
    expect(doc.state.active['source-metadata'].digest).toBe(`sha256:${sha('d')}`);
  });

  it('round-trips', () => {
    expect(parseStateYaml(renderStateYaml(state))).toEqual(state);
  });

  it('writes dir sources as dir:// URIs', () => {
    expect(sourceUri({ kind: 'dir', path: '/' })).toBe('dir:///');
    const dirState = { ...state, source: { kind: 'dir' as const, path: '/run/rootfsbase' } };
    expect(parseStateYaml(renderStateYaml(dirState))?.source).toEqual({ kind: 'dir', path: '/run/rootfsbase' });
  });

  it('rejects files that are not ours or are damaged', () => {
    expect(parseStateYaml('')).toBeUndefined();
    expect(parseStateYaml('date: [unclosed')).toBeUndefined();
    const text = renderStateYaml(state);
    expect(parseStateYaml(text.replace(digest('b'), 'not-a-digest'))).toBeUndefined();
    expect(parseStateYaml(text.replace(digest('b'), sha('b')))).toBeUndefined(); // a plain sha256 is not this digest
    expect(parseStateYaml(text.replace('label: COS_SYSTEM', 'label: COS_ACTIVE'))).toBeUndefined();
    expect(parseStateYaml(text.replace(/recovery:\n {2}label: COS_RECOVERY[\s\S]*$/, ''))).toBeUndefined();
  });
});
