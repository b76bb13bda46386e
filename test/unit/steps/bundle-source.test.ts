import { describe, expect, it } from 'vitest';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode } from '../../../lib/errors.js';
import { LIVE_BUNDLE_DIR, resolveBundleSource, type PathKind } from '../../../installer/steps/bundle-source.js';
import { testTempDir } from '../temp-dir.js';

const kinds = (m: Record<string, PathKind>) => async (p: string): Promise<PathKind> => m[p] ?? 'missing';

describe('resolveBundleSource', () => {
  it('--bundle DIR wins over the ISO and the live ISO', async () => {
    const kind = kinds({ '/b': 'dir', '/iso/bundle': 'dir', [LIVE_BUNDLE_DIR]: 'dir' });
    expect(await resolveBundleSource('/b', { isoBundle: '/iso/bundle', kind })).toEqual({ kind: 'dir', path: '/b', origin: '--bundle' });
  });

  it('--bundle none installs without one, even when the ISO has one', async () => {
    const kind = kinds({ '/iso/bundle': 'dir', [LIVE_BUNDLE_DIR]: 'dir' });
    expect(await resolveBundleSource('none', { isoBundle: '/iso/bundle', kind })).toEqual({ kind: 'none', why: '--bundle none' });
  });

  it('a --bundle that is missing or not a directory is a usage error', async () => {
    for (const [k, words] of [['missing', 'does not exist'], ['other', 'is not a directory']] as const) {
      const err = await resolveBundleSource('/x', { kind: kinds({ '/x': k }) }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(HvError);
      expect((err as HvError).message).toBe(`--bundle /x ${words}`);
      expect((err as HvError).exitCode).toBe(ExitCode.usage);
    }
  });

  it('automatic mode: the ISO bundle/, else the live ISO, else none with why', async () => {
    expect(await resolveBundleSource(undefined, { isoBundle: '/iso/bundle', kind: kinds({ '/iso/bundle': 'dir', [LIVE_BUNDLE_DIR]: 'dir' }) })).toEqual({
      kind: 'dir',
      path: '/iso/bundle',
      origin: 'the install ISO',
    });
    expect(await resolveBundleSource(undefined, { isoBundle: '/iso/bundle', kind: kinds({ [LIVE_BUNDLE_DIR]: 'dir' }) })).toEqual({ kind: 'dir', path: LIVE_BUNDLE_DIR, origin: 'the live ISO' });
    expect(await resolveBundleSource(undefined, { isoBundle: '/iso/bundle', kind: kinds({}) })).toEqual({
      kind: 'none',
      why: `the install ISO has no bundle/ and ${LIVE_BUNDLE_DIR} does not exist`,
    });
  });

  it('a manual install: the live ISO bundle when it exists, else none', async () => {
    expect(await resolveBundleSource(undefined, { kind: kinds({ [LIVE_BUNDLE_DIR]: 'dir' }) })).toEqual({ kind: 'dir', path: LIVE_BUNDLE_DIR, origin: 'the live ISO' });
    expect(await resolveBundleSource(undefined, { kind: kinds({ [LIVE_BUNDLE_DIR]: 'other' }) })).toEqual({ kind: 'none', why: `no --bundle given and ${LIVE_BUNDLE_DIR} does not exist` });
  });

  it('checks the real filesystem by default', async () => {
    const t = testTempDir('hv-bsrc-');
    await mkdir(path.join(t, 'b'));
    await writeFile(path.join(t, 'f'), 'x');
    expect(await resolveBundleSource(path.join(t, 'b'))).toMatchObject({ kind: 'dir' });
    await expect(resolveBundleSource(path.join(t, 'f'))).rejects.toThrow('is not a directory');
    expect(await resolveBundleSource(undefined, { liveDir: path.join(t, 'nope') })).toMatchObject({ kind: 'none' });
  });
});
