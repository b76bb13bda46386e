import { describe, expect, it } from 'vitest';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { persistentStep } from '../../../installer/steps/content-steps.js';
import type { BundleSource } from '../../../installer/steps/bundle-source.js';
import type { InstallContext } from '../../../installer/steps/context.js';
import { testTempDir } from '../temp-dir.js';

/** The check reads only the bundle of this run (it mounts nothing), so a bare context is enough. */
const ctxWith = (bundle: BundleSource) => ({ bundle }) as unknown as InstallContext;

describe('persistent step check (resume)', () => {
  it('keeps the step when the same bundle, unchanged, was copied; redoes it when the bundle differs', async () => {
    const b = testTempDir('hv-pcheck-');
    await mkdir(path.join(b, 'images'));
    await writeFile(path.join(b, 'metadata.yaml'), 'images: {}\n');
    await writeFile(path.join(b, 'images/a.tar.zst'), Buffer.alloc(100));
    const bundle: BundleSource = { kind: 'dir', path: b, origin: '--bundle' };
    const detail = { bindDirs: 3, bundle: { source: b, files: 2, bytes: 111 } };
    const check = persistentStep.check!;
    expect(await check(ctxWith(bundle), detail)).toBeUndefined();
    expect(await check(ctxWith({ kind: 'none', why: '--bundle none' }), detail)).toBe(`the image bundle was ${b}, now none`);
    expect(await check(ctxWith(bundle), { bindDirs: 3, bundle: { source: 'none', why: '--bundle none' } })).toBe(`the image bundle was none, now ${b}`);
    expect(await check(ctxWith({ kind: 'none', why: 'x' }), { bindDirs: 3, bundle: { source: 'none' } })).toBeUndefined();
    await writeFile(path.join(b, 'images/b.tar.zst'), Buffer.alloc(5));
    expect(await check(ctxWith(bundle), detail)).toBe(`the image bundle ${b} now holds 3 files (116 bytes), 2 (111 bytes) were copied`);
  });
});
