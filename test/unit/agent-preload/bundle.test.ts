import { describe, expect, it } from 'vitest';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { HvError } from '../../../lib/errors.js';
import { compressionOf, discoverEntries, parseBundleMetadata, parseImageList, parseSha256Sums } from '../../../agent/preload/bundle.js';
import { loadBundle } from '../../../agent/preload/bundle-reader.js';
import { normaliseImageRef } from '../../../agent/preload/image-ref.js';

const HEX = 'a'.repeat(64);

function thrown(fn: () => unknown): HvError {
  try {
    fn();
  } catch (err) {
    if (err instanceof HvError) return err;
    throw err;
  }
  throw new Error('expected an HvError');
}

describe('normaliseImageRef', () => {
  it.each([
    ['busybox', 'docker.io/library/busybox:latest'],
    ['rancher/harvester:v1.5.0', 'docker.io/rancher/harvester:v1.5.0'],
    ['docker.io/rancher/harvester:v1.5.0', 'docker.io/rancher/harvester:v1.5.0'],
    ['quay.io/ns/img', 'quay.io/ns/img:latest'],
    ['localhost/img:1', 'localhost/img:1'],
    ['registry.local:5000/a/b:tag', 'registry.local:5000/a/b:tag'],
    [`ghcr.io/a/b@sha256:${HEX}`, `ghcr.io/a/b@sha256:${HEX}`],
    ['  rancher/x:v1  ', 'docker.io/rancher/x:v1'],
    ['rancher/x:V1-Upper', 'docker.io/rancher/x:V1-Upper'],
  ])('%s → %s', (input, want) => {
    expect(normaliseImageRef(input)).toBe(want);
  });

  it.each(['', 'a b', 'Rancher/x:1', `sha256:${HEX}`, 'a//b'])('rejects %j', (input) => {
    expect(normaliseImageRef(input)).toBeUndefined();
  });
});

describe('parseBundleMetadata', () => {
  const META = `images:
  common:
    - list: harvester/images-lists/harvester-images-v1.5.0.txt
      archive: harvester/images/harvester-images-v1.5.0.tar.zst
    - list: harvester/images-lists/rancher-images-v2.10.txt
      archive: harvester/images/rancher-images-v2.10.tar.zst
      sha256: ${HEX.toUpperCase()}
  rke2:
    - list: harvester/images-lists/rke2-images.linux-amd64-v1.31.txt
      archive: harvester/images/rke2-images.linux-amd64-v1.31.tar.zst
  agent: []
`;

  it('reads every section in order, with optional checksums', () => {
    expect(parseBundleMetadata(META, '/b/metadata.yaml')).toEqual([
      { section: 'common', index: 0, archive: 'harvester/images/harvester-images-v1.5.0.tar.zst', list: 'harvester/images-lists/harvester-images-v1.5.0.txt', sha256: undefined },
      { section: 'common', index: 1, archive: 'harvester/images/rancher-images-v2.10.tar.zst', list: 'harvester/images-lists/rancher-images-v2.10.txt', sha256: HEX },
      { section: 'rke2', index: 0, archive: 'harvester/images/rke2-images.linux-amd64-v1.31.tar.zst', list: 'harvester/images-lists/rke2-images.linux-amd64-v1.31.txt', sha256: undefined },
    ]);
  });

  it('keeps only the sections asked for', () => {
    expect(parseBundleMetadata(META, 'm', ['rke2']).map((e) => e.section)).toEqual(['rke2']);
  });

  it('names the file and position of invalid YAML', () => {
    const e = thrown(() => parseBundleMetadata('images:\n  common: [\n', '/b/metadata.yaml'));
    expect(e.message).toMatch(/^metadata\.yaml is not valid YAML: /);
    expect(e.where).toMatch(/^\/b\/metadata\.yaml:\d+:\d+$/);
  });

  it.each([
    ['a list', '- 1\n', 'metadata.yaml must be a mapping with an "images" key', 'm'],
    ['no images', 'other: 1\n', 'metadata.yaml: "images" must be a mapping of section name to a list of {list, archive}', 'm: images'],
    ['section not a list', 'images:\n  common: 3\n', 'images.common must be a list of {list, archive}', 'm: images.common'],
    ['entry not a mapping', 'images:\n  common: [x]\n', 'each entry must be a mapping {list, archive}', 'm: images.common[0]'],
    ['no archive', 'images:\n  common:\n    - list: a.txt\n', '"archive" must be a non-empty path', 'm: images.common[0]'],
    ['escaping path', 'images:\n  common:\n    - archive: ../../etc/x.tar\n', 'path "../../etc/x.tar" must be relative to the bundle directory and stay inside it', 'm: images.common[0].archive'],
    ['absolute path', 'images:\n  common:\n    - archive: /x.tar\n', 'path "/x.tar" must be relative to the bundle directory and stay inside it', 'm: images.common[0].archive'],
    ['not a tar', 'images:\n  common:\n    - archive: a.zip\n', 'archive a.zip is neither .tar.zst nor .tar', 'm: images.common[0].archive'],
    ['bad checksum', 'images:\n  common:\n    - archive: a.tar\n      sha256: abc\n', '"sha256" must be 64 hex digits, got "abc"', 'm: images.common[0].sha256'],
  ])('rejects %s', (_name, text, message, where) => {
    const e = thrown(() => parseBundleMetadata(text, 'm'));
    expect(e.message).toBe(message);
    expect(e.where).toBe(where);
  });
});

describe('parseImageList / parseSha256Sums / compressionOf / discoverEntries', () => {
  it('normalises, drops comments, blank lines and duplicates', () => {
    expect(parseImageList('# images\nrancher/a:v1\n\ndocker.io/rancher/a:v1\nbusybox # base\n', 'l')).toEqual([
      'docker.io/rancher/a:v1',
      'docker.io/library/busybox:latest',
    ]);
  });

  it('names the line of a bad reference', () => {
    const e = thrown(() => parseImageList('rancher/a:v1\nNot An Image\n', '/b/list.txt'));
    expect(e.message).toBe('not an image reference: "Not An Image"');
    expect(e.where).toBe('/b/list.txt:2');
  });

  it('parses sha256sum text and binary mode lines', () => {
    const sums = parseSha256Sums(`${HEX}  a.tar.zst\n${'B'.repeat(64)} *./dir/b.tar\n`, 's');
    expect([...sums]).toEqual([['a.tar.zst', HEX], ['dir/b.tar', 'b'.repeat(64)]]);
    expect(thrown(() => parseSha256Sums('xyz a.tar\n', 'S')).where).toBe('S:1');
  });

  it('knows zstd and plain tars', () => {
    expect([compressionOf('a.tar.zst'), compressionOf('a.tzst'), compressionOf('a.tar'), compressionOf('a.tar.gz')]).toEqual(['zstd', 'zstd', 'none', undefined]);
  });

  it('pairs archives found by scanning with Harvester- and rancherd-style lists', () => {
    expect(
      discoverEntries([
        'harvester/images/harvester-images.tar.zst',
        'harvester/images-lists/harvester-images.txt',
        'rancherd/images/rancherd-bootstrap-images.tar.zst',
        'rancherd/images/rancherd-bootstrap-images.txt',
        'loose.tar',
        'README',
      ]),
    ).toEqual([
      { section: 'discovered', index: 0, archive: 'harvester/images/harvester-images.tar.zst', list: 'harvester/images-lists/harvester-images.txt' },
      { section: 'discovered', index: 1, archive: 'loose.tar', list: undefined },
      { section: 'discovered', index: 2, archive: 'rancherd/images/rancherd-bootstrap-images.tar.zst', list: 'rancherd/images/rancherd-bootstrap-images.txt' },
    ]);
  });
});

describe('loadBundle', () => {
  async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
    const dir = await mkdtemp(path.join(tmpdir(), 'hvpl-unit-'));
    try {
      await fn(dir);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  it('reads archives, lists, sizes and checksums from sidecars and SHA256SUMS', async () => {
    await withDir(async (dir) => {
      await mkdir(path.join(dir, 'harvester/images'), { recursive: true });
      await mkdir(path.join(dir, 'harvester/images-lists'), { recursive: true });
      await writeFile(path.join(dir, 'harvester/images/a.tar.zst'), 'AAAA');
      await writeFile(path.join(dir, 'harvester/images/b.tar'), 'BB');
      await writeFile(path.join(dir, 'harvester/images/a.tar.zst.sha256'), `${HEX}  a.tar.zst\n`);
      await writeFile(path.join(dir, 'SHA256SUMS'), `${'c'.repeat(64)}  harvester/images/b.tar\n`);
      await writeFile(path.join(dir, 'harvester/images-lists/a.txt'), 'rancher/a:1\nrancher/a2:1\n');
      await writeFile(
        path.join(dir, 'metadata.yaml'),
        'images:\n  common:\n    - {list: harvester/images-lists/a.txt, archive: harvester/images/a.tar.zst}\n    - {archive: harvester/images/b.tar}\n',
      );
      const b = await loadBundle(dir);
      expect(b.fromMetadata).toBe(true);
      expect(b.archives).toEqual([
        { id: 'harvester/images/a.tar.zst', section: 'common', archivePath: path.join(dir, 'harvester/images/a.tar.zst'), listPath: path.join(dir, 'harvester/images-lists/a.txt'), compression: 'zstd', images: ['docker.io/rancher/a:1', 'docker.io/rancher/a2:1'], sha256: HEX, sizeBytes: 4 },
        { id: 'harvester/images/b.tar', section: 'common', archivePath: path.join(dir, 'harvester/images/b.tar'), listPath: undefined, compression: 'none', images: [], sha256: 'c'.repeat(64), sizeBytes: 2 },
      ]);
    });
  });

  it('names a missing archive and the metadata entry that lists it', async () => {
    await withDir(async (dir) => {
      await writeFile(path.join(dir, 'metadata.yaml'), 'images:\n  rke2:\n    - {archive: harvester/images/gone.tar.zst}\n');
      const err = await loadBundle(dir).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(HvError);
      expect((err as HvError).message).toBe('image archive harvester/images/gone.tar.zst is missing');
      expect((err as HvError).where).toBe(path.join(dir, 'harvester/images/gone.tar.zst'));
      expect((err as HvError).hint).toBe('metadata.yaml names it (images.rke2[0]); the bundle copy is incomplete');
    });
  });

  it('names a missing image list', async () => {
    await withDir(async (dir) => {
      await writeFile(path.join(dir, 'a.tar'), 'x');
      await writeFile(path.join(dir, 'metadata.yaml'), 'images:\n  common:\n    - {archive: a.tar, list: lists/a.txt}\n');
      const err = (await loadBundle(dir).catch((e: unknown) => e)) as HvError;
      expect(err.message).toBe('cannot read the image list: no such file');
      expect(err.where).toBe(path.join(dir, 'lists/a.txt'));
    });
  });

  it('scans the directory when there is no metadata.yaml', async () => {
    await withDir(async (dir) => {
      await mkdir(path.join(dir, 'images'), { recursive: true });
      await writeFile(path.join(dir, 'images/x.tar.zst'), 'x');
      await writeFile(path.join(dir, 'images/x.txt'), 'rancher/x:1\n');
      const b = await loadBundle(dir);
      expect(b.fromMetadata).toBe(false);
      expect(b.archives.map((a) => [a.id, a.images])).toEqual([['images/x.tar.zst', ['docker.io/rancher/x:1']]]);
    });
  });
});
