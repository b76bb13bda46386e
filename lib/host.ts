import { readFile, readdir, readlink, stat, lstat, realpath, access } from 'node:fs/promises';
import path from 'node:path';

/**
 * Access to the machine's /proc, /sys, /dev and /etc through a sysroot, so that fact gathering
 * runs against captured fixture trees in tests and against `/` in production.
 */
export class Host {
  constructor(readonly sysroot: string = '/') {}

  /** The real path of an absolute machine path under the sysroot. */
  path(p: string): string {
    if (!path.isAbsolute(p)) throw new Error(`Host.path needs an absolute path, got ${p}`);
    return this.sysroot === '/' ? p : path.join(this.sysroot, p);
  }

  /** Maps a real path back to the machine path (for symlinks resolved under the sysroot). */
  unroot(real: string): string {
    if (this.sysroot === '/') return real;
    const rel = path.relative(this.sysroot, real);
    return rel.startsWith('..') ? real : '/' + rel;
  }

  async readText(p: string): Promise<string | undefined> {
    try {
      return await readFile(this.path(p), 'utf8');
    } catch {
      return undefined;
    }
  }

  /** A one-line sysfs attribute, trimmed. */
  async readAttr(p: string): Promise<string | undefined> {
    return (await this.readText(p))?.trim();
  }

  async readInt(p: string): Promise<number | undefined> {
    const v = await this.readAttr(p);
    if (v === undefined || v === '') return undefined;
    const n = Number.parseInt(v, 10);
    return Number.isFinite(n) ? n : undefined;
  }

  async list(p: string): Promise<string[]> {
    try {
      return (await readdir(this.path(p))).sort();
    } catch {
      return [];
    }
  }

  /** Which of `paths` exist (a reader that pays per lookup, an image read with a tool, answers them in one go). */
  async existing(paths: readonly string[]): Promise<Set<string>> {
    const found = new Set<string>();
    for (const p of paths) if (await this.exists(p)) found.add(p);
    return found;
  }

  async exists(p: string): Promise<boolean> {
    try {
      await access(this.path(p));
      return true;
    } catch {
      return lstat(this.path(p)).then(() => true, () => false);
    }
  }

  async isDir(p: string): Promise<boolean> {
    return stat(this.path(p)).then((s) => s.isDirectory(), () => false);
  }

  async readLink(p: string): Promise<string | undefined> {
    return readlink(this.path(p)).catch(() => undefined);
  }

  /** Resolves symlinks within the sysroot and returns the machine path. */
  async resolve(p: string): Promise<string | undefined> {
    if (this.sysroot === '/') return realpath(p).catch(() => undefined);
    // Resolve link by link so absolute targets stay inside the sysroot.
    let cur = p;
    for (let i = 0; i < 40; i++) {
      const parts = cur.split('/').filter(Boolean);
      let acc = '';
      let changed = false;
      for (let j = 0; j < parts.length; j++) {
        const next = `${acc}/${parts[j]}`;
        const target = await readlink(this.path(next)).catch(() => undefined);
        if (target !== undefined) {
          const resolved = path.isAbsolute(target) ? target : path.posix.join(acc || '/', target);
          cur = path.posix.normalize([resolved, ...parts.slice(j + 1)].join('/'));
          changed = true;
          break;
        }
        acc = next;
      }
      if (!changed) return (await this.exists(cur)) ? cur : undefined;
    }
    return undefined;
  }
}
