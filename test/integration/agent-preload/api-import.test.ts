/**
 * The agent's own importer (containerd's API, no ctr) against ctr itself, on a real containerd:
 * the same archive imported by `ctr images import --no-unpack` into one namespace and by the agent
 * into another must give byte-identical image records (timestamps aside), the same manifests with
 * the same garbage-collection labels, and leave no lease or ingest behind. What the importer does
 * not take (an OCI layout) goes to ctr, with a warning.
 */
import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { execa } from 'execa';
import { grpcUnary } from '../../../agent/preload/containerd-api.js';
import { bytesOf, readFields, stringsOf } from '../../../agent/preload/protobuf.js';
import { importArchiveOnce } from '../../../agent/preload/stream-import.js';
import { tarHeader, writeDockerArchive } from '../../fixtures/preload/image-archive.mjs';
import { TestContainerd, containerdPerTest } from './harness.js';

let dir: string;
let containerd: TestContainerd;

containerdPerTest((d, c) => {
  dir = d;
  containerd = c;
});

const ctr = (ns: string, ...args: string[]) => execa('ctr', ['-a', containerd.socket, '-n', ns, ...args]);

/** A tar header of another type than a regular file (directory, symlink), its checksum redone. */
function typedHeader(name: string, type: '2' | '5', linkname = ''): Buffer {
  const h = tarHeader(name, 0);
  h[156] = type.charCodeAt(0);
  h.write(linkname, 157, 100, 'utf8');
  h.fill(' ', 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 'ascii');
  return h;
}

function entry(name: string, body: Buffer): Buffer[] {
  return [tarHeader(name, body.length), body, Buffer.alloc((512 - (body.length % 512)) % 512)];
}

/** A one-file layer tar. */
function layerTar(file: string, body: Buffer): Buffer {
  return Buffer.concat([...entry(file, body), Buffer.alloc(1024)]);
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/**
 * A docker archive as old and new `docker save` write them: directories, a legacy `repositories`
 * file, one plain and one gzip layer, a layer shared through a symlink (docker v1.1), one image
 * with two tags in short form and one under a registry with a port.
 */
function awkwardArchive(): Buffer {
  const plain = layerTar('a.bin', Buffer.alloc(70_000, 'plain layer '));
  const gz = gzipSync(layerTar('b.bin', Buffer.alloc(50_000, 'gzip layer ')));
  const config = (layers: Buffer[], cmd: string) =>
    Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', config: { Cmd: [cmd] }, rootfs: { type: 'layers', diff_ids: layers.map((l) => `sha256:${sha(l)}`) } }));
  const c1 = config([plain, gz], 'one');
  const c2 = config([plain], 'two');
  const manifest = Buffer.from(
    JSON.stringify([
      { Config: `${sha(c1)}.json`, RepoTags: ['busybox', 'rancher/tool:v1'], Layers: ['aaa/layer.tar', 'bbb/layer.tar'] },
      { Config: `${sha(c2)}.json`, RepoTags: ['localhost:5000/hv/two:2'], Layers: ['ccc/layer.tar'] },
      { Config: `${sha(c2)}.json`, RepoTags: null, Layers: ['ccc/layer.tar'] },
    ]),
  );
  return Buffer.concat([
    typedHeader('aaa/', '5'),
    ...entry('aaa/VERSION', Buffer.from('1.0')),
    // An empty file: its second import is refused as existing with no write to say its digest.
    ...entry('aaa/json', Buffer.alloc(0)),
    // Entry names are cleaned as they are stored (`./aaa/layer.tar` is `aaa/layer.tar`).
    ...entry('./aaa/layer.tar', plain),
    typedHeader('bbb/', '5'),
    ...entry('bbb/layer.tar', gz),
    typedHeader('ccc/', '5'),
    typedHeader('ccc/layer.tar', '2', '../aaa/layer.tar'),
    ...entry(`${sha(c1)}.json`, c1),
    ...entry(`${sha(c2)}.json`, c2),
    ...entry('manifest.json', manifest),
    ...entry('repositories', Buffer.from('{"busybox":{"latest":"aaa"}}')),
    Buffer.alloc(1024),
    // The record padding tar writes after its end blocks.
    Buffer.alloc(8192),
  ]);
}

/** The last varint of `field` (proto3: the last one wins). */
function numberOf(buf: Buffer, field: number): number | undefined {
  return readFields(buf).filter((f) => f.field === field && typeof f.value === 'number').pop()?.value as number | undefined;
}

/** A map<string, string> field (entries with key 1, value 2), in key order. */
function readMap(buf: Buffer, field: number): Record<string, string> {
  const entries = bytesOf(buf, field).map((e) => [stringsOf(e, 1)[0] ?? '', stringsOf(e, 2)[0] ?? ''] as const);
  return Object.fromEntries(entries.sort(([a], [b]) => a.localeCompare(b)));
}

/**
 * Every image record of a namespace over the API, field by field as containerd returns them
 * (api/services/images/v1/images.proto, api/types/descriptor.proto); maps in key order (Go writes
 * them in random order), timestamps left out.
 */
async function records(ns: string): Promise<Map<string, unknown>> {
  const reply = await grpcUnary(containerd.socket, '/containerd.services.images.v1.Images/List', Buffer.alloc(0), { namespace: ns, connectTimeoutMs: 5000, timeoutMs: 10_000 });
  const out = new Map<string, unknown>();
  for (const image of bytesOf(reply, 1)) {
    const known = new Set([1, 2, 3, 7, 8]);
    expect(readFields(image).filter((f) => !known.has(f.field))).toEqual([]);
    const target = bytesOf(image, 3)[0]!;
    expect(readFields(target).filter((f) => ![1, 2, 3, 5].includes(f.field))).toEqual([]);
    out.set(stringsOf(image, 1)[0]!, {
      labels: readMap(image, 2),
      target: { mediaType: stringsOf(target, 1)[0], digest: stringsOf(target, 2)[0], size: numberOf(target, 3), annotations: readMap(target, 5) },
    });
  }
  return out;
}

/** `ctr content ls`: digest → labels (sorted), the age column left out. */
async function content(ns: string): Promise<Map<string, string>> {
  const lines = (await ctr(ns, 'content', 'ls')).stdout.split('\n').slice(1).filter(Boolean);
  return new Map(lines.map((l) => {
    const [digest, , ...rest] = l.split('\t');
    return [digest!, (rest.pop() ?? '').split(',').sort().join(',')];
  }));
}

/** One import attempt with the API importer; returns why it fell back to ctr, if it did. */
async function importViaApi(file: string, ns: string, sha256?: string): Promise<string[]> {
  const fallbacks: string[] = [];
  await importArchiveOnce({
    archive: { id: path.basename(file), section: 'common', archivePath: file, compression: file.endsWith('.zst') ? 'zstd' : 'none', images: [], sha256, sizeBytes: (await stat(file)).size },
    target: { ctr: 'ctr', socket: containerd.socket, namespace: ns, onApiFallback: (why) => fallbacks.push(why) },
    zstd: 'zstd',
    unpack: false,
    importer: 'api',
    stallTimeoutMs: 30_000,
    finishTimeoutMs: 60_000,
    signal: new AbortController().signal,
  });
  return fallbacks;
}

describe('the API importer against ctr', () => {
  it('makes the records, manifests and labels ctr makes, for an archive with every docker-save quirk', async () => {
    const file = path.join(dir, 'awkward.tar');
    await writeFile(file, awkwardArchive());
    await ctr('by-ctr', 'images', 'import', '--no-unpack', file);
    expect(await importViaApi(file, 'by-api', sha(await readFile(file)))).toEqual([]);

    const [viaCtr, viaApi] = [await records('by-ctr'), await records('by-api')];
    expect([...viaApi.keys()].sort()).toEqual(['docker.io/library/busybox:latest', 'docker.io/rancher/tool:v1', 'localhost:5000/hv/two:2']);
    expect(viaApi).toEqual(viaCtr);
    // The gzip layer is typed as gzip, the plain one as a plain tar (seen in the manifest ctr wrote).
    const manifestOf = async (ns: string, image: string) => JSON.parse((await ctr(ns, 'content', 'get', (await ctr(ns, 'images', 'ls')).stdout.split('\n').find((l) => l.startsWith(`${image} `))!.split(/\s+/)[2]!)).stdout);
    const m = await manifestOf('by-api', 'docker.io/library/busybox:latest');
    expect(m.layers.map((l: { mediaType: string }) => l.mediaType)).toEqual(['application/vnd.docker.image.rootfs.diff.tar', 'application/vnd.docker.image.rootfs.diff.tar.gzip']);

    // Each manifest the records point at carries ctr's labels, and every blob they keep is there.
    // (Files nothing keeps, such as the legacy `repositories` and ctr's index, are left to the
    // garbage collector in both namespaces, which may or may not have run yet.)
    const [ctrContent, apiContent] = [await content('by-ctr'), await content('by-api')];
    const manifests = new Set([...viaApi.values()].map((r) => (r as { target: { digest: string } }).target.digest));
    expect(manifests.size).toBe(2);
    for (const digest of manifests) {
      expect(apiContent.get(digest)).toBe(ctrContent.get(digest));
      const kept = apiContent.get(digest)!.split(',').map((l) => l.split('=')[1]!);
      expect(kept.length).toBeGreaterThanOrEqual(2);
      for (const child of kept) expect([apiContent.has(child), ctrContent.has(child)]).toEqual([true, true]);
    }
    // Again, over everything already there: the same records.
    expect(await importViaApi(file, 'by-api')).toEqual([]);
    expect(await records('by-api')).toEqual(viaCtr);
    // Nothing left held or half-written.
    expect((await ctr('by-api', 'leases', 'ls', '-q')).stdout).toBe('');
    expect((await ctr('by-api', 'content', 'active')).stdout.split('\n').slice(1).filter(Boolean)).toEqual([]);
  });

  it('imports the same archive again over what is there (content, manifests and records already present) to the same records', async () => {
    const file = path.join(dir, 'twice.tar.zst');
    const plain = file.slice(0, -4);
    const out = createWriteStream(plain);
    await writeDockerArchive(out, [{ ref: 'docker.io/hv/a:1', size: 3 << 20 }, { ref: 'docker.io/hv/b:1', size: 0, kind: 'text' }]);
    out.end();
    await once(out, 'finish');
    await execa('zstd', ['-q', '-f', '--rm', plain, '-o', file]);
    expect(await importViaApi(file, 'k8s.io')).toEqual([]);
    const first = await records('k8s.io');
    const firstContent = await content('k8s.io');
    expect(await importViaApi(file, 'k8s.io')).toEqual([]);
    expect(await records('k8s.io')).toEqual(first);
    expect(await content('k8s.io')).toEqual(firstContent);
    await execa('zstd', ['-q', '-d', '-f', file, '-o', plain]);
    await ctr('by-ctr', 'images', 'import', '--no-unpack', plain);
    expect(await records('k8s.io')).toEqual(await records('by-ctr'));
    expect((await ctr('k8s.io', 'leases', 'ls', '-q')).stdout).toBe('');
  });

  it('leaves an OCI image layout to ctr, saying so, and the images still arrive', async () => {
    const source = path.join(dir, 'source.tar');
    const out = createWriteStream(source);
    await writeDockerArchive(out, [{ ref: 'docker.io/hv/oci:1', size: 1 << 20 }]);
    out.end();
    await once(out, 'finish');
    await ctr('source', 'images', 'import', '--no-unpack', source);
    const oci = path.join(dir, 'oci.tar');
    await ctr('source', 'images', 'export', oci, 'docker.io/hv/oci:1');
    expect(await importViaApi(oci, 'k8s.io')).toEqual([expect.stringMatching(/^oci\.tar: the archive is an OCI image layout \(/)]);
    expect((await ctr('k8s.io', 'images', 'ls', '-q')).stdout.split('\n')).toContain('docker.io/hv/oci:1');
    // The API attempt's lease went with it.
    expect((await ctr('k8s.io', 'leases', 'ls', '-q')).stdout).toBe('');
  });
});
