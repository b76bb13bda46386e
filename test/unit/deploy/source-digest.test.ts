import { afterAll, describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { contentManifest, firstDifference, manifestDigest } from '../../../installer/deploy/source-digest.js';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function tree(files: Record<string, string>): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'hv-srcdigest-'));
  dirs.push(root);
  for (const [rel, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, rel)), { recursive: true });
    if (content.startsWith('->')) await symlink(content.slice(2), path.join(root, rel));
    else await writeFile(path.join(root, rel), content, { mode: 0o644 });
  }
  return root;
}

describe('the source content manifest', () => {
  it("holds every entry, each file's sha256 and each link's target", async () => {
    const root = await tree({ 'etc/os-release': 'NAME=x\n', 'bin/sh': '->busybox' });
    const m = await contentManifest(root);
    expect([...m.keys()]).toEqual(['bin', 'bin/sh', 'etc', 'etc/os-release']);
    expect(m.get('etc/os-release')).toMatchObject({ type: 'f', size: 7, sha256: createHash('sha256').update('NAME=x\n').digest('hex') });
    expect(m.get('bin/sh')).toMatchObject({ type: 'l', link: 'busybox' });
    expect(manifestDigest(m)).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('an entry that goes away while the tree is read is an error naming it, not a crash', async () => {
    const root = await tree({ 'd/first': 'x', 'd/second': 'y' });
    // d's names are listed, then d/first is read: reading it removes d/second before the walk gets there.
    const err = await contentManifest(root, { onBytes: () => rmSync(path.join(root, 'd/second'), { force: true }) }).then(() => undefined, (e: unknown) => e as Error);
    expect(err?.message).toBe(`${path.join(root, 'd/second')} went away while the tree under ${root} was read: something is changing it`);
  });

  it('a file of the same size with other bytes changes the digest and is named as the difference', async () => {
    const a = await contentManifest(await tree({ 'etc/x': 'aaaa' }));
    const b = await contentManifest(await tree({ 'etc/x': 'aaab' }));
    expect(manifestDigest(a)).not.toBe(manifestDigest(b));
    expect(firstDifference(a, b)).toEqual({ rel: 'etc/x', text: `/etc/x has sha256 ${b.get('etc/x')!.sha256}, the source's was ${a.get('etc/x')!.sha256}` });
  });

  it('names a truncated, a missing and an extra file', async () => {
    const want = await contentManifest(await tree({ 'a': '12345678', 'b': 'x' }));
    expect(firstDifference(want, await contentManifest(await tree({ 'a': '1234', 'b': 'x' })))?.text).toBe('/a is 4 bytes, the source\'s was 8');
    expect(firstDifference(want, await contentManifest(await tree({ 'a': '12345678' })))?.text).toBe('/b is missing');
    expect(firstDifference(want, await contentManifest(await tree({ 'a': '12345678', 'b': 'x', 'c': '' })))?.text).toBe('/c is not in the source');
    expect(firstDifference(want, want)).toBeUndefined();
  });

  it('files over 4 MiB, several in one tree (hashed in turn on one worker), each get the sha256 of their own bytes', async () => {
    const big = [Buffer.alloc(5 * 1024 * 1024 + 3, 'a'), Buffer.alloc(9 * 1024 * 1024, 'b'), Buffer.alloc(4 * 1024 * 1024 + 1, 'c')];
    const root = await tree({});
    for (const [i, b] of big.entries()) await writeFile(path.join(root, `big${i}`), b);
    await writeFile(path.join(root, 'small'), 'between');
    const m = await contentManifest(root);
    for (const [i, b] of big.entries()) expect(m.get(`big${i}`)?.sha256).toBe(createHash('sha256').update(b).digest('hex'));
    expect(m.get('small')?.sha256).toBe(createHash('sha256').update('between').digest('hex'));
  });

  it('one entry alone, for telling a changed source from a bad disk', async () => {
    const root = await tree({ 'a/b': 'hello' });
    const m = await contentManifest(root, { only: 'a/b' });
    expect([...m.keys()]).toEqual(['a/b']);
    expect((await contentManifest(root, { only: 'gone' })).size).toBe(0);
  });
});
