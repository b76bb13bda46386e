/** Reads a bundle directory into BundleArchive records (the thin effect layer over bundle.ts). */
import { readFile, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import {
  METADATA_FILE,
  compressionOf,
  discoverEntries,
  parseBundleMetadata,
  parseImageList,
  parseSha256Sums,
  type BundleArchive,
  type MetadataEntry,
} from './bundle.js';

export interface LoadedBundle {
  dir: string;
  /** True when the archives came from metadata.yaml, false when found by scanning. */
  fromMetadata: boolean;
  archives: BundleArchive[];
}

async function exists(p: string): Promise<boolean> {
  return stat(p).then(() => true, () => false);
}

async function readText(file: string, what: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new HvError(`cannot read the ${what}: ${code === 'ENOENT' ? 'no such file' : (err as Error).message}`, {
      where: file,
      hint: 'the image bundle is incomplete: copy the whole bundle/ directory of the ISO again',
      exitCode: ExitCode.checkFailed,
    });
  }
}

/** Bundle-relative paths of every file under dir, at most `depth` directories deep. */
async function listFiles(dir: string, depth = 4, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  const entries = await readdir(path.join(dir, prefix), { withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory() && depth > 0) out.push(...(await listFiles(dir, depth - 1, rel)));
    else if (e.isFile() || e.isFIFO() || e.isSymbolicLink()) out.push(rel);
  }
  return out;
}

async function sumsIn(file: string, cache: Map<string, Map<string, string> | null>): Promise<Map<string, string> | null> {
  if (!cache.has(file)) cache.set(file, (await exists(file)) ? parseSha256Sums(await readText(file, 'checksum file'), file) : null);
  return cache.get(file)!;
}

/** The expected sha256 of an archive: the metadata entry's, a sidecar file's, or a SHA256SUMS line. */
async function findChecksum(dir: string, entry: MetadataEntry, cache: Map<string, Map<string, string> | null>): Promise<string | undefined> {
  if (entry.sha256) return entry.sha256;
  const archivePath = path.join(dir, entry.archive);
  const sidecar = `${archivePath}.sha256`;
  if (await exists(sidecar)) {
    const sums = parseSha256Sums(await readText(sidecar, 'checksum file'), sidecar);
    const base = path.basename(entry.archive);
    const hex = sums.get(base) ?? sums.get(entry.archive) ?? (sums.size === 1 ? [...sums.values()][0] : undefined);
    if (!hex) throw new HvError(`${sidecar} has no line for ${base}`, { where: sidecar, exitCode: ExitCode.checkFailed });
    return hex;
  }
  const local = await sumsIn(path.join(path.dirname(archivePath), 'SHA256SUMS'), cache);
  const fromLocal = local?.get(path.basename(entry.archive));
  if (fromLocal) return fromLocal;
  const top = await sumsIn(path.join(dir, 'SHA256SUMS'), cache);
  return top?.get(entry.archive) ?? undefined;
}

/** Loads the bundle at dir. Throws HvError (exit code checkFailed) naming the bad file. */
export async function loadBundle(dir: string, sections?: string[]): Promise<LoadedBundle> {
  const metadataFile = path.join(dir, METADATA_FILE);
  const fromMetadata = await exists(metadataFile);
  const entries = fromMetadata
    ? parseBundleMetadata(await readText(metadataFile, 'bundle metadata'), metadataFile, sections)
    : discoverEntries(await listFiles(dir));
  const cache = new Map<string, Map<string, string> | null>();
  const archives: BundleArchive[] = [];
  const seen = new Set<string>();
  for (const entry of entries) {
    if (seen.has(entry.archive)) continue;
    seen.add(entry.archive);
    const archivePath = path.join(dir, entry.archive);
    let sizeBytes: number | undefined;
    try {
      const st = await stat(archivePath);
      sizeBytes = st.isFile() ? st.size : undefined;
    } catch {
      throw new HvError(`image archive ${entry.archive} is missing`, {
        where: archivePath,
        hint: `${METADATA_FILE} names it (images.${entry.section}[${entry.index}]); the bundle copy is incomplete`,
        exitCode: ExitCode.checkFailed,
      });
    }
    const listPath = entry.list ? path.join(dir, entry.list) : undefined;
    const images = listPath ? parseImageList(await readText(listPath, 'image list'), listPath) : [];
    archives.push({
      id: entry.archive,
      section: entry.section,
      archivePath,
      listPath,
      compression: compressionOf(entry.archive)!,
      images,
      sha256: await findChecksum(dir, entry, cache),
      sizeBytes,
    });
  }
  return { dir, fromMetadata, archives };
}
