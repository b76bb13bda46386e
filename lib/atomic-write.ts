import { open, rename, mkdir, unlink, chmod, chown } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

export interface AtomicWriteOptions {
  /** File mode; default 0644. Secrets must be written 0600. */
  mode?: number;
  uid?: number;
  gid?: number;
  /** Create parent directories (mode 0755). Default true. */
  mkdirs?: boolean;
}

/**
 * Writes a file so that readers see the old content or the new, never a mix, even across a
 * power cut: temp file in the same directory (created with the final mode, so a secret is never
 * briefly world-readable), fsync, rename, fsync the directory.
 */
export async function writeFileAtomic(file: string, data: string | Uint8Array, opts: AtomicWriteOptions = {}): Promise<void> {
  const dir = path.dirname(file);
  const mode = opts.mode ?? 0o644;
  if (opts.mkdirs !== false) await mkdir(dir, { recursive: true, mode: 0o755 });
  const tmp = path.join(dir, `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  const fh = await open(tmp, 'wx', mode);
  try {
    await fh.writeFile(data);
    await fh.chmod(mode); // umask may have narrowed the create mode
    if (opts.uid !== undefined || opts.gid !== undefined) await fh.chown(opts.uid ?? -1, opts.gid ?? -1);
    await fh.sync();
  } catch (err) {
    await fh.close().catch(() => undefined);
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  await fh.close();
  try {
    await rename(tmp, file);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  await fsyncDir(dir);
}

export async function fsyncDir(dir: string): Promise<void> {
  const dh = await open(dir, 'r');
  try {
    await dh.sync().catch(() => undefined); // some filesystems refuse fsync on directories
  } finally {
    await dh.close();
  }
}

export { chmod, chown };
