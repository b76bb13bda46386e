import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import {
  DockerArchiveError,
  NotForApiImportError,
  cleanEntryName,
  hostArchitecture,
  isOciLayoutEntry,
  planDockerImages,
  symlinkTarget,
  type ReadArchive,
  type StoredBlob,
} from '../../../agent/preload/docker-archive.js';

// Expected values are written out here (the manifest bytes as Go's json.Marshal writes them), and
// digests computed with node:crypto: the module is never its own oracle.

const CONFIG = 'sha256:b79606fb3afea5bd1609ed40b622142f1c98125abcfe89a76a661b0e8e343910';
const LAYER1 = 'sha256:77ea7eee3d80b1a38f83906dd3048e2689457eb90e18a7d12f839c5ae37106a2';
const LAYER2 = 'sha256:95cf1a2e1698fe3ca1fcc3f653119146b271d0b62e487ec264441e886a11bd06';
const CONFIG2 = 'sha256:c5c345d44fa1d442c4be8c3549ea421d896d78359060504174b795611ee72d15';
const HEX = 'e'.repeat(64);

const TAR_HEAD = Buffer.from('bin/\0\0\0\0', 'latin1');
const GZIP_HEAD = Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00]);
const ZSTD_HEAD = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x00]);

const LINUX_AMD64 = Buffer.from('{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}');

const blob = (digest: string, size: number, head: Buffer = TAR_HEAD): StoredBlob => ({ digest, size, head });

interface Parts {
  blobs?: [string, StoredBlob][];
  symlinks?: [string, string][];
  smallFiles?: [string, Buffer][];
}

/** An archive holding abc.json (config), l1/layer.tar (plain) and l2/layer.tar (gzip), plus `extra`. */
function archive(manifest: unknown, extra: Parts = {}): ReadArchive {
  const manifestJson = Buffer.isBuffer(manifest) ? manifest : Buffer.from(JSON.stringify(manifest));
  return {
    manifestJson,
    blobs: new Map([
      ['abc.json', blob(CONFIG, 237)],
      ['l1/layer.tar', blob(LAYER1, 101888, TAR_HEAD)],
      ['l2/layer.tar', blob(LAYER2, 2048, GZIP_HEAD)],
      ...(extra.blobs ?? []),
    ]),
    symlinks: new Map(extra.symlinks ?? []),
    smallFiles: new Map([['abc.json', LINUX_AMD64], ...(extra.smallFiles ?? [])]),
  };
}

const image = (RepoTags: string[] | null | undefined, Layers = ['l1/layer.tar', 'l2/layer.tar'], Config = 'abc.json') => ({ Config, RepoTags, Layers });

const sha256 = (s: string): string => `sha256:${createHash('sha256').update(s).digest('hex')}`;

function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    if (err instanceof Error) return err;
    throw err;
  }
  throw new Error('expected an error');
}

const TWO_LAYER_MANIFEST =
  '{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",' +
  '"config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:b79606fb3afea5bd1609ed40b622142f1c98125abcfe89a76a661b0e8e343910","size":237},' +
  '"layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar","digest":"sha256:77ea7eee3d80b1a38f83906dd3048e2689457eb90e18a7d12f839c5ae37106a2","size":101888},' +
  '{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","digest":"sha256:95cf1a2e1698fe3ca1fcc3f653119146b271d0b62e487ec264441e886a11bd06","size":2048}]}';

describe('planDockerImages: the manifest', () => {
  it('writes the manifest byte for byte as Go’s json.Marshal does, its digest the sha256 of those bytes', () => {
    const plan = planDockerImages(archive([image(['rancher/x:v1'])]), 'amd64');
    expect(plan.manifests).toHaveLength(1);
    const [m] = plan.manifests;
    expect(m!.json.toString('utf8')).toBe(TWO_LAYER_MANIFEST);
    expect(m!.digest).toBe(sha256(TWO_LAYER_MANIFEST));
  });

  it('labels the manifest with gc references to its config and to each layer in order', () => {
    const plan = planDockerImages(archive([image(['rancher/x:v1'], ['l2/layer.tar', 'l1/layer.tar', 'l2/layer.tar'])]), 'amd64');
    expect(plan.manifests[0]!.labels).toEqual({
      'containerd.io/gc.ref.content.config': CONFIG,
      'containerd.io/gc.ref.content.l.0': LAYER2,
      'containerd.io/gc.ref.content.l.1': LAYER1,
      'containerd.io/gc.ref.content.l.2': LAYER2,
    });
  });

  it('writes an image without layers with an empty list, as Go marshals an empty slice', () => {
    const plan = planDockerImages(archive([image(['busybox'], [])]), 'amd64');
    const want =
      '{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",' +
      '"config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:b79606fb3afea5bd1609ed40b622142f1c98125abcfe89a76a661b0e8e343910","size":237},"layers":[]}';
    expect(plan.manifests.map((m) => [m.json.toString(), m.digest, m.labels])).toEqual([[want, sha256(want), { 'containerd.io/gc.ref.content.config': CONFIG }]]);
  });

  it.each([
    ['gzip', [0x1f, 0x8b, 0x08, 0x00], 'application/vnd.docker.image.rootfs.diff.tar.gzip'],
    ['gzip, exactly its 3 magic bytes', [0x1f, 0x8b, 0x08], 'application/vnd.docker.image.rootfs.diff.tar.gzip'],
    ['zstd', [0x28, 0xb5, 0x2f, 0xfd, 0x04], 'application/vnd.docker.image.rootfs.diff.tar.gzip'],
    ['a zstd skippable frame', [0x5e, 0x2a, 0x4d, 0x18, 0x04], 'application/vnd.docker.image.rootfs.diff.tar.gzip'],
    ['nearly a zstd skippable frame', [0x5e, 0x2a, 0x4d, 0x19, 0x04], 'application/vnd.docker.image.rootfs.diff.tar'],
    ['gzip magic with another method', [0x1f, 0x8b, 0x07, 0x00], 'application/vnd.docker.image.rootfs.diff.tar'],
    ['half a gzip magic', [0x1f, 0x8b], 'application/vnd.docker.image.rootfs.diff.tar'],
    ['three quarters of a zstd magic', [0x28, 0xb5, 0x2f], 'application/vnd.docker.image.rootfs.diff.tar'],
    ['the zstd magic reversed', [0xfd, 0x2f, 0xb5, 0x28], 'application/vnd.docker.image.rootfs.diff.tar'],
    ['a tar', [...Buffer.from('etc/\0\0\0')], 'application/vnd.docker.image.rootfs.diff.tar'],
    ['nothing (an empty layer)', [], 'application/vnd.docker.image.rootfs.diff.tar'],
  ])('types a layer whose head is %s (%j) as %s', (_what, head, mediaType) => {
    const read = archive([image(['busybox'], ['x/layer.tar'])], { blobs: [['x/layer.tar', blob(LAYER1, 10, Buffer.from(head))]] });
    const json = planDockerImages(read, 'amd64').manifests[0]!.json.toString();
    expect(json).toContain(`"layers":[{"mediaType":"${mediaType}","digest":"${LAYER1}","size":10}]`);
  });

  it('types a zstd layer as gzip in the manifest bytes', () => {
    const read = archive([image(['busybox'], ['z/layer.tar'])], { blobs: [['z/layer.tar', blob(LAYER2, 2048, ZSTD_HEAD)]] });
    expect(planDockerImages(read, 'amd64').manifests[0]!.json.toString()).toContain('"layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip"');
  });
});

describe('planDockerImages: image records', () => {
  it.each([
    ['busybox', 'docker.io/library/busybox:latest', 'latest'],
    ['rancher/x:v1', 'docker.io/rancher/x:v1', 'v1'],
    ['quay.io/a/b:1', 'quay.io/a/b:1', '1'],
    ['localhost:5000/a', 'localhost:5000/a:latest', 'latest'],
    ['localhost:5000/ns/a:v2.1', 'localhost:5000/ns/a:v2.1', 'v2.1'],
    ['docker.io/library/alpine:3.20', 'docker.io/library/alpine:3.20', '3.20'],
  ])('names the tag %s as %s with ref.name %s', (tag, name, refName) => {
    const plan = planDockerImages(archive([image([tag])]), 'amd64');
    const digest = sha256(TWO_LAYER_MANIFEST);
    expect(plan.images).toEqual([
      {
        name,
        target: {
          mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
          digest,
          size: TWO_LAYER_MANIFEST.length,
          annotations: { 'io.containerd.image.name': name, 'org.opencontainers.image.ref.name': refName },
        },
      },
    ]);
  });

  it('makes one record per tag of an image, all on its one manifest', () => {
    const plan = planDockerImages(archive([image(['rancher/x:v1', 'rancher/x:latest'])]), 'amd64');
    expect(plan.manifests.map((m) => m.digest)).toEqual([sha256(TWO_LAYER_MANIFEST)]);
    expect(plan.images.map((i) => [i.name, i.target.digest, i.target.annotations?.['org.opencontainers.image.ref.name']])).toEqual([
      ['docker.io/rancher/x:v1', sha256(TWO_LAYER_MANIFEST), 'v1'],
      ['docker.io/rancher/x:latest', sha256(TWO_LAYER_MANIFEST), 'latest'],
    ]);
  });

  it('plans each image of a multi-image archive, in order', () => {
    const read = archive([image(['a:1'], ['l1/layer.tar']), image(['b:2'], ['l2/layer.tar'], 'def.json')], {
      blobs: [['def.json', blob(CONFIG2, 100)]],
      smallFiles: [['def.json', LINUX_AMD64]],
    });
    const plan = planDockerImages(read, 'amd64');
    expect(plan.manifests.map((m) => m.labels['containerd.io/gc.ref.content.config'])).toEqual([CONFIG, CONFIG2]);
    expect(plan.images.map((i) => [i.name, i.target.digest])).toEqual([
      ['docker.io/library/a:1', plan.manifests[0]!.digest],
      ['docker.io/library/b:2', plan.manifests[1]!.digest],
    ]);
    expect(plan.manifests[0]!.digest).not.toBe(plan.manifests[1]!.digest);
  });

  it.each([
    ['empty', []],
    ['null', null],
    ['absent', undefined],
  ])('gives an image whose RepoTags are %s no record and no manifest', (_what, tags) => {
    expect(planDockerImages(archive([image(tags as string[] | null | undefined)]), 'amd64')).toEqual({ manifests: [], images: [] });
    const mixed = planDockerImages(archive([image(tags as string[] | null | undefined, ['l2/layer.tar']), image(['busybox'])]), 'amd64');
    expect(mixed.manifests.map((m) => m.digest)).toEqual([sha256(TWO_LAYER_MANIFEST)]);
    expect(mixed.images.map((i) => i.name)).toEqual(['docker.io/library/busybox:latest']);
  });
});

describe('planDockerImages: finding the files', () => {
  it('resolves a layer reached through a symlink to its target’s blob', () => {
    const read = archive([image(['busybox'], ['l1/layer.tar', 'b/layer.tar'])], { symlinks: [['b/layer.tar', 'l1/layer.tar']] });
    const [m] = planDockerImages(read, 'amd64').manifests;
    expect(m!.labels).toEqual({
      'containerd.io/gc.ref.content.config': CONFIG,
      'containerd.io/gc.ref.content.l.0': LAYER1,
      'containerd.io/gc.ref.content.l.1': LAYER1,
    });
    expect(m!.json.toString()).toContain(`"layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar","digest":"${LAYER1}","size":101888},{"mediaType":"application/vnd.docker.image.rootfs.diff.tar","digest":"${LAYER1}","size":101888}]`);
  });

  // containerd looks manifest.json's paths up as written, among names path.Clean made: `./x` names no file.
  it.each([
    ['a config written with ./', ['l1/layer.tar'], './abc.json', './abc.json'],
    ['a layer written with //', ['l1//layer.tar'], 'abc.json', 'l1//layer.tar'],
    ['a layer written with /./', ['l1/layer.tar', 'l2/./layer.tar'], 'abc.json', 'l2/./layer.tar'],
  ])('looks names up as written, as containerd does: refuses %s, naming it', (_what, layers, config, named) => {
    const err = thrown(() => planDockerImages(archive([image(['rancher/x:v1'], layers, config)]), 'amd64'));
    expect(err).toBeInstanceOf(DockerArchiveError);
    expect(err.message).toContain(named);
  });

  it.each([
    ['a layer', ['b/layer.tar']],
    ['no image (containerd refuses the archive all the same)', ['l1/layer.tar']],
  ])('leaves to ctr a symlink whose target the archive does not hold, naming it, where it stands for %s', (_what, layers) => {
    const read = archive([image(['busybox'], layers)], { symlinks: [['b/layer.tar', 'gone/layer.tar']] });
    expect(notForApi(read, 'amd64').message).toBe('the symlink b/layer.tar points at gone/layer.tar, which the archive does not hold');
  });

  it('refuses a config the archive does not hold, naming it', () => {
    const err = thrown(() => planDockerImages(archive([image(['busybox'], ['l1/layer.tar'], 'missing.json')]), 'amd64'));
    expect(err).toBeInstanceOf(DockerArchiveError);
    expect(err.message).toContain('missing.json');
  });

  it('refuses a layer the archive does not hold, naming it', () => {
    const err = thrown(() => planDockerImages(archive([image(['busybox'], ['l1/layer.tar', 'gone/layer.tar'])]), 'amd64'));
    expect(err).toBeInstanceOf(DockerArchiveError);
    expect(err.message).toContain('gone/layer.tar');
  });
});

describe('planDockerImages: a manifest.json that contradicts itself', () => {
  it.each([
    ['not JSON', Buffer.from('[{"Config":')],
    ['not a list', { Config: 'abc.json', RepoTags: ['a'], Layers: [] }],
    ['an entry that is null', [null]],
    ['an entry without Config', [{ RepoTags: ['a'], Layers: ['l1/layer.tar'] }]],
    ['an entry without Layers', [{ Config: 'abc.json', RepoTags: ['a'] }]],
    ['Layers that are not names', [{ Config: 'abc.json', RepoTags: ['a'], Layers: [1] }]],
    ['RepoTags that are not a list', [{ Config: 'abc.json', RepoTags: 'a', Layers: [] }]],
    ['a Config that is not a name', [{ Config: 7, RepoTags: ['a'], Layers: [] }]],
  ])('refuses a manifest.json that is %s as a DockerArchiveError', (_what, manifest) => {
    const err = thrown(() => planDockerImages(archive(manifest), 'amd64'));
    expect(err).toBeInstanceOf(DockerArchiveError);
    expect(err).not.toBeInstanceOf(NotForApiImportError);
    expect(err.message).toMatch(/manifest\.json/);
  });
});

function notForApi(read: ReadArchive, arch: string): Error {
  const err = thrown(() => planDockerImages(read, arch));
  expect(err).toBeInstanceOf(NotForApiImportError);
  expect(err).not.toBeInstanceOf(DockerArchiveError);
  return err;
}

describe('planDockerImages: archives left to ctr', () => {
  const withConfig = (config: string, tags = ['busybox']): ReadArchive => archive([image(tags)], { smallFiles: [['abc.json', Buffer.from(config)]] });

  it.each([
    ['arm64 on amd64', '{"architecture":"arm64","os":"linux"}', 'amd64'],
    ['windows/amd64 on amd64', '{"architecture":"amd64","os":"windows"}', 'amd64'],
    ['amd64 on arm64', '{"architecture":"amd64","os":"linux"}', 'arm64'],
    ['arm/v7 on arm64', '{"architecture":"arm","os":"linux","variant":"v7"}', 'arm64'],
    ['amd64 without an os', '{"architecture":"amd64"}', 'amd64'],
  ])('refuses an image for another platform (%s)', (_what, config, arch) => {
    expect(notForApi(withConfig(config), arch).message).toContain(`linux/${arch}`);
  });

  it.each([
    ['linux/arm64', '{"architecture":"arm64","os":"linux"}'],
    ['linux/arm64/v8', '{"architecture":"arm64","os":"linux","variant":"v8"}'],
  ])('takes a %s image on arm64', (_what, config) => {
    expect(planDockerImages(withConfig(config), 'arm64').images.map((i) => i.name)).toEqual(['docker.io/library/busybox:latest']);
  });

  it('refuses an image whose config was not kept whole (too large to read)', () => {
    const read = archive([image(['busybox'], ['l1/layer.tar'], 'big.json')], { blobs: [['big.json', blob(CONFIG2, 50_000_000)]] });
    expect(notForApi(read, 'amd64').message).toContain('big.json');
  });

  it('refuses an image whose config is not JSON', () => {
    notForApi(withConfig('{"architecture":'), 'amd64');
  });

  it.each([
    ['an uppercase repository', 'Foo/Bar:1'],
    ['a tag and a digest', `rancher/x:v1@sha256:${HEX}`],
    ['a tag and a digest, with a registry port', `localhost:5000/x:v1@sha256:${HEX}`],
    ['an empty path component', 'a//b:1'],
    ['an empty tag', 'a/b:'],
    ['a tag starting with a dash', 'busybox:-bad'],
    ['a tag of 129 characters', `busybox:${'t'.repeat(129)}`],
    ['a path component starting with a dash', '-a/b:1'],
    ['two dots in a path component', 'a/b..c:1'],
    ['two tags', 'a/b:t:u'],
    ['a digest too short', 'a/b@sha256:abc'],
  ])('refuses a tag with %s, naming it', (_what, tag) => {
    expect(notForApi(withConfig(LINUX_AMD64.toString(), ['busybox', tag]), 'amd64').message).toContain(JSON.stringify(tag));
  });
});

describe('archive entry names', () => {
  it.each([
    ['./a//b/', 'a/b'],
    ['a/./b', 'a/b'],
    ['a/../b', 'b'],
    ['manifest.json', 'manifest.json'],
    ['./manifest.json', 'manifest.json'],
    ['', '.'],
    ['./', '.'],
  ])('cleanEntryName(%j) = %j', (name, want) => {
    expect(cleanEntryName(name)).toBe(want);
  });

  it.each([
    ['b/layer.tar', '../a/layer.tar', 'a/layer.tar'],
    ['a/b/layer.tar', '../../c/layer.tar', 'c/layer.tar'],
    ['b/layer.tar', './same.tar', 'b/same.tar'],
    ['layer.tar', 'x//layer.tar', 'x/layer.tar'],
  ])('symlinkTarget(%j, %j) = %j', (name, link, want) => {
    expect(symlinkTarget(name, link)).toBe(want);
  });

  it.each([
    ['oci-layout', true],
    ['index.json', true],
    [`blobs/sha256/${HEX}`, true],
    ['manifest.json', false],
    ['abc/layer.tar', false],
    ['repositories', false],
    [`${HEX}.json`, false],
  ])('isOciLayoutEntry(%j) is %s', (name, want) => {
    expect(isOciLayoutEntry(name)).toBe(want);
  });

  it.each([
    ['x64', 'amd64'],
    ['arm64', 'arm64'],
    ['ia32', '386'],
  ])('hostArchitecture(%j) = %j', (arch, want) => {
    expect(hostArchitecture(arch)).toBe(want);
  });
});
