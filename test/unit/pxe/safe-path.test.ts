/**
 * openInsideRoot: the effectful half of the path check, on a real directory tree. The sibling that
 * shares the root's name as a prefix (`/srv/root-evil` next to `/srv/root`) is the case a plain
 * `startsWith(root)` would let through.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openInsideRoot } from '../../../pxe/safe-path.js';

let base: string;
let root: string;

beforeAll(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'hvpxe-safe-path-')));
  root = path.join(base, 'root');
  await mkdir(path.join(root, 'k'), { recursive: true });
  await mkdir(path.join(base, 'root-evil'));
  await writeFile(path.join(root, 'k', 'vmlinuz'), 'kernel bytes');
  await writeFile(path.join(base, 'root-evil', 'secret'), 'must not be served');
  await writeFile(path.join(base, 'outside'), 'must not be served either');
  await symlink('../root-evil/secret', path.join(root, 'to-sibling'));
  await symlink(path.join(base, 'outside'), path.join(root, 'to-outside'));
  await symlink('k/vmlinuz', path.join(root, 'to-kernel'));
  await symlink(root, path.join(root, 'k', 'loop'));
});
afterAll(() => rm(base, { recursive: true, force: true }));

async function served(rootReal: string, segments: string[]): Promise<string | undefined> {
  const f = await openInsideRoot(rootReal, segments);
  if (!f) return undefined;
  try {
    return (await f.fh.readFile()).toString();
  } finally {
    await f.fh.close();
  }
}

describe('openInsideRoot', () => {
  it('opens a regular file under the root, and a symlink that stays inside it', async () => {
    expect(await served(root, ['k', 'vmlinuz'])).toBe('kernel bytes');
    expect(await served(root, ['to-kernel'])).toBe('kernel bytes');
    expect(await served(root, ['k', 'loop', 'k', 'vmlinuz'])).toBe('kernel bytes');
  });

  it('refuses a sibling directory that shares the root as a prefix (root-evil next to root), by symlink or by segments', async () => {
    expect(await served(root, ['to-sibling'])).toBeUndefined();
    expect(await served(root, ['..', 'root-evil', 'secret'])).toBeUndefined();
    expect(await served(`${root}/`, ['to-sibling'])).toBeUndefined();
  });

  it('refuses a symlink out of the root, a directory, the root itself and a missing file', async () => {
    expect(await served(root, ['to-outside'])).toBeUndefined();
    expect(await served(root, ['k'])).toBeUndefined();
    expect(await served(root, [])).toBeUndefined();
    expect(await served(root, ['k', 'absent'])).toBeUndefined();
  });
});
