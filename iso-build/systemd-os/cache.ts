/**
 * Entries of the test OS cache ($HV_E2E_CACHE/systemd-os/<prefix><key>/): built in a temp
 * directory beside their place and renamed there whole, so a reader never sees half an entry and
 * two builds racing both finish, the first rename winning; a manifest.json inside marks an entry
 * complete. Entries unused for three days go when a new one of their kind lands.
 */
import { readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ExitCode, HvError } from '../../lib/errors.js';

const UNUSED_MS = 3 * 24 * 3600_000;

/** The entry's manifest, or undefined when the entry is missing or incomplete (also: marks it used). */
export async function readEntry<T>(dir: string, required: readonly string[] = []): Promise<T | undefined> {
  const manifest = await readFile(path.join(dir, 'manifest.json'), 'utf8').then((t) => JSON.parse(t) as T, () => undefined);
  if (!manifest) return undefined;
  for (const f of required) if (!(await stat(path.join(dir, f)).catch(() => undefined))) return undefined;
  const now = new Date();
  await utimes(dir, now, now).catch(() => undefined);
  return manifest;
}

/** Writes work/manifest.json, renames work to final unless a complete entry is there already, prunes its kind. */
export async function publishEntry<T>(work: string, final: string, manifest: T, required: readonly string[] = []): Promise<T> {
  await writeFile(path.join(work, 'manifest.json'), JSON.stringify(manifest, null, 1) + '\n');
  if (!(await readEntry<T>(final, required))) {
    await rm(final, { recursive: true, force: true });
    await rename(work, final).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
    });
  }
  const name = path.basename(final);
  await pruneUnused(path.dirname(final), name.slice(0, name.indexOf('-') + 1), name);
  const published = await readEntry<T>(final, required);
  if (!published) throw new HvError(`the built cache entry did not land at ${final}`, { where: 'iso-build/systemd-os', hint: 'check the free space and permissions of the cache directory', exitCode: ExitCode.usage });
  return published;
}

async function pruneUnused(dir: string, prefix: string, keep: string): Promise<void> {
  const limit = Date.now() - UNUSED_MS;
  for (const name of await readdir(dir)) {
    if (!name.startsWith(prefix) || name === keep) continue;
    const s = await stat(path.join(dir, name)).catch(() => undefined);
    if (s && s.mtimeMs < limit) await rm(path.join(dir, name), { recursive: true, force: true });
  }
}
