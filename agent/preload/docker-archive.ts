/**
 * What a `docker save` archive (docker-archive v1.1/v1.2: manifest.json, configs and layer tars)
 * becomes in containerd, decided from what was read: one Docker schema 2 manifest per image, with
 * the garbage-collection labels that keep its config and layers, and one image record per tag.
 * The same records `ctr images import` makes (containerd/containerd: core/images/archive/importer.go
 * and client/import.go): the manifest's JSON is byte for byte Go's, so its digest is ctr's.
 * Pure: no I/O.
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import { normaliseImageRef } from './image-ref.js';

/** The archive is not one this importer takes (an OCI layout, another platform, …): ctr imports it. */
export class NotForApiImportError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NotForApiImportError';
  }
}

/** The archive contradicts itself (a manifest naming a file it does not hold, unreadable JSON). */
export class DockerArchiveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DockerArchiveError';
  }
}

const MEDIA_TYPE_MANIFEST = 'application/vnd.docker.distribution.manifest.v2+json';
const MEDIA_TYPE_CONFIG = 'application/vnd.docker.container.image.v1+json';
const MEDIA_TYPE_LAYER = 'application/vnd.docker.image.rootfs.diff.tar';
const MEDIA_TYPE_LAYER_GZIP = 'application/vnd.docker.image.rootfs.diff.tar.gzip';
const ANNOTATION_IMAGE_NAME = 'io.containerd.image.name';
const ANNOTATION_REF_NAME = 'org.opencontainers.image.ref.name';

/** A file of the archive as containerd stored it. */
export interface StoredBlob {
  digest: string;
  size: number;
  /** Its first bytes, for the compression magic. */
  head: Buffer;
}

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}

export interface PlannedManifest {
  json: Buffer;
  digest: string;
  /** Keep the config and layers alive as long as the manifest is (containerd's gc.ref labels). */
  labels: Record<string, string>;
}

export interface PlannedImages {
  manifests: PlannedManifest[];
  images: { name: string; target: Descriptor }[];
}

/** What was read of the archive. */
export interface ReadArchive {
  manifestJson: Buffer;
  blobs: ReadonlyMap<string, StoredBlob>;
  /** Symlink entry → the path it points to (cleaned, relative to the archive's root). */
  symlinks: ReadonlyMap<string, string>;
  /** Small files kept whole (the image configs among them). */
  smallFiles: ReadonlyMap<string, Buffer>;
}

/** Go's path.Clean for a tar entry name: `./a//b/` → `a/b`. */
export function cleanEntryName(name: string): string {
  const n = path.posix.normalize(name).replace(/\/+$/, '');
  return n === '' ? '.' : n;
}

/** A symlink's target as a path in the archive (Go's path.Join(path.Dir(name), link)). */
export function symlinkTarget(name: string, linkname: string): string {
  return cleanEntryName(path.posix.join(path.posix.dirname(name), linkname));
}

/** Names that make a tar an OCI image layout, which this importer leaves to ctr. */
export function isOciLayoutEntry(name: string): boolean {
  return name === 'oci-layout' || name === 'index.json' || name.startsWith('blobs/');
}

/**
 * containerd's compression sniffing (pkg/archive/compression): gzip and zstd (a frame, or a
 * skippable frame first) are "compressed", which its importer types as gzip.
 */
function layerMediaType(head: Buffer): string {
  const gzip = head.length >= 3 && head[0] === 0x1f && head[1] === 0x8b && head[2] === 0x08;
  const zstd = head.length >= 4 && (head.readUInt32BE(0) === 0x28b52ffd || (head.readUInt32LE(0) & 0xfffffff0) === 0x184d2a50);
  return gzip || zstd ? MEDIA_TYPE_LAYER_GZIP : MEDIA_TYPE_LAYER;
}

/** Go's GOARCH for this machine, the platform ctr imports for. */
export function hostArchitecture(arch: string = process.arch): string {
  return arch === 'x64' ? 'amd64' : arch === 'ia32' ? '386' : arch;
}

interface ArchiveManifestEntry {
  Config: string;
  RepoTags: string[];
  Layers: string[];
}

function parseManifestList(json: Buffer): ArchiveManifestEntry[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json.toString('utf8'));
  } catch (err) {
    throw new DockerArchiveError(`manifest.json is not JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(parsed)) throw new DockerArchiveError('manifest.json is not a list of images');
  return parsed.map((e: unknown, i) => {
    const m = (e ?? {}) as Record<string, unknown>;
    const strings = (v: unknown): v is string[] => Array.isArray(v) && v.every((s) => typeof s === 'string');
    if (typeof m.Config !== 'string' || !strings(m.Layers) || !(m.RepoTags === undefined || m.RepoTags === null || strings(m.RepoTags))) {
      throw new DockerArchiveError(`manifest.json's image ${i + 1} lacks its Config, Layers or RepoTags`);
    }
    return { Config: m.Config, Layers: m.Layers, RepoTags: (m.RepoTags as string[] | null | undefined) ?? [] };
  });
}

/** The platform an image's config declares, refused unless it is this machine's (ctr would filter it). */
function checkPlatform(config: Buffer | undefined, name: string, arch: string): void {
  if (!config) throw new NotForApiImportError(`the image config ${name} is too large to read here`);
  let c: Record<string, unknown>;
  try {
    c = JSON.parse(config.toString('utf8')) as Record<string, unknown>;
  } catch {
    throw new NotForApiImportError(`the image config ${name} is not JSON`);
  }
  const variant = typeof c.variant === 'string' ? c.variant : '';
  if (c.os !== 'linux' || c.architecture !== arch || (variant !== '' && !(arch === 'arm64' && variant === 'v8'))) {
    throw new NotForApiImportError(`the image config ${name} is for ${String(c.os)}/${String(c.architecture)}${variant ? `/${variant}` : ''}, not linux/${arch}`);
  }
}

/** containerd's OCI ref name for an image name: its tag, or the whole name when it is by digest. */
function ociReferenceName(name: string): string {
  const slash = name.lastIndexOf('/');
  const at = name.indexOf('@', slash);
  if (at !== -1) return name;
  const colon = name.indexOf(':', slash);
  return colon === -1 ? name : name.slice(colon + 1);
}

// Docker's reference grammar (distribution/reference: regexp.go), for a normalised name.
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const REFERENCE = new RegExp(
  `^${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*(?::[0-9]+)?(?:/${PATH_COMPONENT})+` +
    '(?::[\\w][\\w.-]{0,127}|@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})$',
);

/** A name docker's grammar accepts (ctr refuses the import of any other; it is left to ctr to say so). */
function isDockerReference(name: string): boolean {
  const at = name.indexOf('@');
  const repoEnd = at !== -1 ? at : name.lastIndexOf(':') > name.lastIndexOf('/') ? name.lastIndexOf(':') : name.length;
  return name.slice(0, repoEnd).length <= 255 && REFERENCE.test(name);
}

/** `repo:tag@sha256:…`: containerd keeps only the digest of such a name; left to ctr. */
function hasTagAndDigest(name: string): boolean {
  const at = name.indexOf('@');
  if (at === -1) return false;
  const repo = name.slice(0, at);
  return repo.indexOf(':', repo.lastIndexOf('/')) !== -1;
}

function sha256(b: Buffer): string {
  return `sha256:${createHash('sha256').update(b).digest('hex')}`;
}

/** The manifests and image records of a docker archive, as ctr would make them. */
export function planDockerImages(read: ReadArchive, arch: string = hostArchitecture()): PlannedImages {
  const entries = parseManifestList(read.manifestJson);
  // containerd refuses the whole archive for a symlink that points at no file.
  for (const [link, to] of read.symlinks) {
    if (!read.blobs.has(to)) throw new NotForApiImportError(`the symlink ${link} points at ${to}, which the archive does not hold`);
  }
  // manifest.json's paths are looked up as written, as containerd does: `./x.json` names no file.
  const blob = (name: string, what: string): StoredBlob => {
    const b = read.blobs.get(name) ?? read.blobs.get(read.symlinks.get(name) ?? '');
    if (!b) throw new DockerArchiveError(`manifest.json names ${what} ${name}, which the archive does not hold`);
    return b;
  };
  const manifests = new Map<string, PlannedManifest>();
  const images: PlannedImages['images'] = [];
  for (const entry of entries) {
    // An image without a tag gets no record: nothing would keep its manifest.
    if (entry.RepoTags.length === 0) continue;
    const config = blob(entry.Config, 'the config');
    checkPlatform(read.smallFiles.get(entry.Config), entry.Config, arch);
    const layers = entry.Layers.map((l) => {
      const b = blob(l, 'the layer');
      return { mediaType: layerMediaType(b.head), digest: b.digest, size: b.size };
    });
    // Key order is Go's struct order: the JSON (and so the digest) is the one ctr writes.
    const json = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: MEDIA_TYPE_MANIFEST,
        config: { mediaType: MEDIA_TYPE_CONFIG, digest: config.digest, size: config.size },
        layers,
      }),
    );
    const digest = sha256(json);
    const labels: Record<string, string> = { 'containerd.io/gc.ref.content.config': config.digest };
    layers.forEach((l, i) => (labels[`containerd.io/gc.ref.content.l.${i}`] = l.digest));
    manifests.set(digest, { json, digest, labels });
    for (const tag of entry.RepoTags) {
      const name = normaliseImageRef(tag);
      if (!name || hasTagAndDigest(name) || !isDockerReference(name)) {
        throw new NotForApiImportError(`the tag ${JSON.stringify(tag)} is not one this importer names the way ctr does`);
      }
      images.push({ name, target: { mediaType: MEDIA_TYPE_MANIFEST, digest, size: json.length, annotations: { [ANNOTATION_IMAGE_NAME]: name, [ANNOTATION_REF_NAME]: ociReferenceName(name) } } });
    }
  }
  return { manifests: [...manifests.values()], images };
}
