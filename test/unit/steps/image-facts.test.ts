/**
 * The image facts the install renders with, read from real source trees: a directory and the same
 * tree as a squashfs (mksquashfs, read back with unsquashfs), with and without rancherd and release
 * metadata, and with the ISO root's release beside the image's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { imageFactsOf } from '../../../installer/steps/image-facts.js';
import { HvError } from '../../../lib/errors.js';
import { RELEASE_TEXT } from '../render/cases.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'hv-image-facts-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A source tree with the given files (paths relative to its root). */
function tree(name: string, files: Record<string, string>): string {
  const root = path.join(dir, name);
  for (const [p, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, p)), { recursive: true });
    writeFileSync(path.join(root, p), content);
  }
  mkdirSync(root, { recursive: true });
  return root;
}

function squashfs(root: string): string {
  const file = `${root}.squashfs`;
  execFileSync('mksquashfs', [root, file, '-quiet', '-noappend', '-no-progress']);
  return file;
}

const RANCHERD = { 'usr/bin/rancherd': '#!/bin/sh\n', 'usr/lib/systemd/system/rancherd.service': '[Service]\n' };

describe('imageFactsOf', () => {
  it('a Harvester-like tree: rancherd, with its release metadata, from a directory and from the same tree as squashfs', async () => {
    const root = tree('harvester', { ...RANCHERD, 'etc/harvester-release.yaml': RELEASE_TEXT });
    const fromDir = await imageFactsOf({ kind: 'dir', path: root });
    expect(fromDir.bootstrapper).toBe('rancherd');
    expect(fromDir.why).toMatch(/\/usr\/bin\/rancherd, \/usr\/lib\/systemd\/system\/rancherd\.service/);
    expect(fromDir.release).toMatchObject({ source: path.join(root, 'etc/harvester-release.yaml'), metadata: { kubernetes: 'v1.35.6+rke2r1', installer: '8064e123' } });
    const sq = squashfs(root);
    const fromSquashfs = await imageFactsOf({ kind: 'squashfs', path: sq });
    expect({ ...fromSquashfs, release: fromSquashfs.release?.metadata }).toEqual({ ...fromDir, release: fromDir.release?.metadata });
    expect(fromSquashfs.release!.source).toBe(`${sq}:/etc/harvester-release.yaml`);
  });

  it('a tree without rancherd: hvagent, whatever release it carries', async () => {
    const root = tree('plain', { 'etc/os-release': 'ID=debian\n' });
    for (const source of [{ kind: 'dir' as const, path: root }, { kind: 'squashfs' as const, path: squashfs(root) }]) {
      const f = await imageFactsOf(source);
      expect(f).toEqual({ bootstrapper: 'hvagent', why: 'the image carries no rancherd: hvagent drives RKE2 itself' });
    }
  });

  it("takes the ISO root's release when the image has none, and refuses one that disagrees with the image's", async () => {
    const bare = tree('bare', RANCHERD);
    const iso = path.join(dir, 'iso-release.yaml');
    writeFileSync(iso, RELEASE_TEXT);
    expect((await imageFactsOf({ kind: 'dir', path: bare }, { isoRelease: iso })).release?.source).toBe(iso);
    // An ISO without the file: as if there were none.
    expect((await imageFactsOf({ kind: 'dir', path: bare }, { isoRelease: path.join(dir, 'absent.yaml') })).release).toBeUndefined();
    const withOwn = tree('own', { ...RANCHERD, 'etc/harvester-release.yaml': RELEASE_TEXT.replace('rancher: v2.14.2', 'rancher: v2.14.1') });
    const err = await imageFactsOf({ kind: 'dir', path: withOwn }, { isoRelease: iso }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HvError);
    expect((err as HvError).message).toMatch(/describe different releases \(rancher: v2\.14\.1 vs v2\.14\.2\)$/);
  });

  it('an unreadable release in the image is an error naming the file inside the squashfs', async () => {
    const root = tree('broken', { ...RANCHERD, 'etc/harvester-release.yaml': 'kubernetes: [oops\n' });
    const sq = squashfs(root);
    const err = await imageFactsOf({ kind: 'squashfs', path: sq }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HvError);
    expect((err as HvError).message).toMatch(new RegExp(`^${sq.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:/etc/harvester-release\\.yaml is not a usable harvester-release\\.yaml`));
  });

  it('a required ISO release that is missing is an error, not silence', async () => {
    const err = await imageFactsOf({ kind: 'dir', path: tree('req', RANCHERD) }, { isoRelease: path.join(dir, 'nope.yaml'), isoReleaseRequired: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HvError);
    expect((err as HvError).message).toBe(`cannot read ${path.join(dir, 'nope.yaml')}: ENOENT`);
  });
});
