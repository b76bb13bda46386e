/**
 * The image bundle, as Harvester's ISO carries it (harvester/harvester-installer scripts/build-bundle, package/harvester-os/files/usr/sbin/harv-install do_preload):
 *
 *   bundle/metadata.yaml                         images: {common: [...], rke2: [...], agent: [...]}
 *                                                each entry {list: <path>, archive: <path>} relative
 *                                                to bundle/ (ours may add sha256: <hex>)
 *   bundle/harvester/images/*.tar.zst            `docker image save` + zstd
 *   bundle/harvester/images-lists/*.txt          one normalised image reference a line
 *   bundle/rancherd/images/*.{txt,tar.zst}
 *
 * Checksums are optional: an entry's `sha256`, a sidecar `<archive>.sha256`, or a `SHA256SUMS`
 * file next to the archive or at the bundle root (sha256sum format). Pure parsing lives here; the
 * reading of files is in bundle-reader.ts.
 */
import { parseDocument } from 'yaml';
import { HvError, ExitCode } from '../../lib/errors.js';
import { normaliseImageRef } from './image-ref.js';

export type Compression = 'zstd' | 'none';

export interface MetadataEntry {
  section: string;
  /** Index in its section, for messages. */
  index: number;
  /** Relative to the bundle directory. */
  archive: string;
  list?: string;
  sha256?: string;
}

/** One archive to import, with everything the importer and the final check need. */
export interface BundleArchive {
  /** The archive path relative to the bundle directory: the name used in logs and diagnoses. */
  id: string;
  section: string;
  archivePath: string;
  listPath?: string;
  compression: Compression;
  /** Normalised references from the image list (empty when the bundle has no list for it). */
  images: string[];
  /** Expected sha256 (lowercase hex) of the archive file, when the bundle carries one. */
  sha256?: string;
  sizeBytes?: number;
}

export const METADATA_FILE = 'metadata.yaml';
const SHA256_RE = /^[0-9a-f]{64}$/;

function bundleError(message: string, where: string, hint?: string): HvError {
  return new HvError(message, { where, hint, exitCode: ExitCode.checkFailed });
}

/** `.tar.zst`/`.tzst` are zstd-compressed tars, `.tar` plain; anything else is not an image archive. */
export function compressionOf(file: string): Compression | undefined {
  if (/\.(tar\.zst|tzst)$/.test(file)) return 'zstd';
  if (/\.tar$/.test(file)) return 'none';
  return undefined;
}

/** A bundle-relative path must stay inside the bundle. */
function checkRelative(p: string, where: string): string {
  const clean = p.replace(/^\.\//, '');
  if (clean.startsWith('/') || clean.split('/').includes('..') || clean === '') {
    throw bundleError(`path ${JSON.stringify(p)} must be relative to the bundle directory and stay inside it`, where);
  }
  return clean;
}

/** Parses metadata.yaml into entries, in file order. Throws HvError naming the file and key path. */
export function parseBundleMetadata(text: string, source: string, sections?: string[]): MetadataEntry[] {
  const doc = parseDocument(text);
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!;
    const pos = e.linePos?.[0];
    throw bundleError(`${METADATA_FILE} is not valid YAML: ${e.message.split('\n')[0]}`, pos ? `${source}:${pos.line}:${pos.col}` : source);
  }
  const raw = doc.toJS() as unknown;
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
    throw bundleError(`${METADATA_FILE} must be a mapping with an "images" key`, source);
  }
  const images = (raw as Record<string, unknown>).images;
  if (!images || typeof images !== 'object' || Array.isArray(images)) {
    throw bundleError(`${METADATA_FILE}: "images" must be a mapping of section name to a list of {list, archive}`, `${source}: images`);
  }
  const entries: MetadataEntry[] = [];
  for (const [section, list] of Object.entries(images as Record<string, unknown>)) {
    if (sections && !sections.includes(section)) continue;
    if (list === null || list === undefined) continue;
    if (!Array.isArray(list)) throw bundleError(`images.${section} must be a list of {list, archive}`, `${source}: images.${section}`);
    list.forEach((item: unknown, index) => {
      const where = `${source}: images.${section}[${index}]`;
      if (!item || typeof item !== 'object' || Array.isArray(item)) throw bundleError('each entry must be a mapping {list, archive}', where);
      const e = item as Record<string, unknown>;
      if (typeof e.archive !== 'string' || e.archive.trim() === '') throw bundleError('"archive" must be a non-empty path', where);
      const archive = checkRelative(e.archive.trim(), `${where}.archive`);
      if (!compressionOf(archive)) {
        throw bundleError(`archive ${archive} is neither .tar.zst nor .tar`, `${where}.archive`, 'image archives are `docker save` tars, optionally zstd-compressed');
      }
      let listPath: string | undefined;
      if (e.list !== undefined && e.list !== null) {
        if (typeof e.list !== 'string' || e.list.trim() === '') throw bundleError('"list" must be a path', where);
        listPath = checkRelative(e.list.trim(), `${where}.list`);
      }
      let sha256: string | undefined;
      if (e.sha256 !== undefined && e.sha256 !== null) {
        const v = String(e.sha256).trim().toLowerCase().replace(/^sha256:/, '');
        if (!SHA256_RE.test(v)) throw bundleError(`"sha256" must be 64 hex digits, got ${JSON.stringify(e.sha256)}`, `${where}.sha256`);
        sha256 = v;
      }
      entries.push({ section, index, archive, list: listPath, sha256 });
    });
  }
  return entries;
}

/** Image list: one reference a line; blank lines and `#` comments ignored; normalised, de-duplicated. */
export function parseImageList(text: string, source: string): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  text.split('\n').forEach((line, i) => {
    const t = line.replace(/#.*$/, '').trim();
    if (t === '') return;
    const ref = normaliseImageRef(t);
    if (!ref) throw bundleError(`not an image reference: ${JSON.stringify(t)}`, `${source}:${i + 1}`);
    if (!seen.has(ref)) {
      seen.add(ref);
      out.push(ref);
    }
  });
  return out;
}

/** sha256sum output (`<hex>  <name>` or `<hex> *<name>`) → basename/path → hex. */
export function parseSha256Sums(text: string, source: string): Map<string, string> {
  const sums = new Map<string, string>();
  text.split('\n').forEach((line, i) => {
    const t = line.trim();
    if (t === '' || t.startsWith('#')) return;
    const m = /^([0-9a-fA-F]{64})\s+\*?(.+)$/.exec(t);
    if (!m) throw bundleError('not a sha256sum line ("<64 hex digits>  <file>")', `${source}:${i + 1}`);
    sums.set(m[2]!.trim().replace(/^\.\//, ''), m[1]!.toLowerCase());
  });
  return sums;
}

/**
 * Without metadata.yaml: every *.tar.zst / *.tar under the bundle, paired with a list found at
 * `<dir>/../images-lists/<name>.txt` (Harvester's layout) or `<dir>/<name>.txt` (rancherd's).
 * `files` are bundle-relative paths.
 */
export function discoverEntries(files: string[]): MetadataEntry[] {
  const set = new Set(files);
  const entries: MetadataEntry[] = [];
  for (const f of [...files].sort()) {
    const c = compressionOf(f);
    if (!c) continue;
    const base = f.slice(f.lastIndexOf('/') + 1).replace(/\.(tar\.zst|tzst|tar)$/, '');
    const dir = f.includes('/') ? f.slice(0, f.lastIndexOf('/')) : '';
    const parent = dir.includes('/') ? dir.slice(0, dir.lastIndexOf('/')) : '';
    const candidates = [
      `${parent ? parent + '/' : ''}images-lists/${base}.txt`,
      `${dir ? dir + '/' : ''}${base}.txt`,
    ];
    const list = candidates.find((p) => set.has(p));
    entries.push({ section: 'discovered', index: entries.length, archive: f, list });
  }
  return entries;
}
