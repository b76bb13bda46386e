/**
 * Artifacts near the machines: with --artifacts-origin URL, a rack's hvpxe fetches each declared
 * artifact that is not under its --root from URL/<path> once, verifies it against the sha256 in
 * profiles.yaml, keeps it in a bounded cache on its disk, and serves it from there like a local
 * file (Range, ETag: artifacts.ts). The cache is content-addressed: <cache>/<sha256>, so a file is
 * the declared bytes or it is not there.
 * - atomic: the download goes to <sha256>.part and is renamed only once its sha256 matched;
 * - resumable: a .part left by a cut download or a restart is continued with a Range request;
 * - bounded: before a download, the least recently served files go until the new one fits;
 * - one download however many machines ask at once (they all wait for it);
 * - every wait has a deadline: no byte for ORIGIN.stallMs ends the download (the next request resumes it).
 * Artifacts are public and verified, so the origin may be plain HTTP. This path is taken only when
 * the file is not under --root: a local file never waits for it.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat, utimes } from 'node:fs/promises';
import path from 'node:path';
import { request } from 'undici';
import type { Logger } from '../lib/logger.js';
import type { OpenedFile } from './safe-path.js';

export const ORIGIN_DEFAULT_GIB = 64;

export const ORIGIN = {
  stallMs: 30_000,
  headersMs: 30_000,
} as const;

export interface OriginOptions {
  url: string;
  dir: string;
  maxBytes: number;
  log: Logger;
}

const SHA_RE = /^[0-9a-f]{64}$/;

/** The files of the cache to remove, least recently used first, so that `need` more bytes fit under `max`. Pure. */
export function evictionsFor(files: ReadonlyArray<{ name: string; size: number; usedMs: number }>, need: number, max: number): string[] | undefined {
  let total = files.reduce((n, f) => n + f.size, 0);
  const out: string[] = [];
  for (const f of [...files].sort((a, b) => a.usedMs - b.usedMs || a.name.localeCompare(b.name))) {
    if (total + need <= max) break;
    out.push(f.name);
    total -= f.size;
  }
  return total + need <= max ? out : undefined;
}

export class ArtifactOrigin {
  private readonly inflight = new Map<string, Promise<void>>();
  /** Downloads done and bytes fetched (for the log and the bench). */
  readonly stats = { downloads: 0, bytes: 0, resumed: 0 };

  constructor(private readonly opts: OriginOptions) {}

  get url(): string {
    return this.opts.url;
  }

  private file(sha256: string): string {
    return path.join(this.opts.dir, sha256);
  }

  /** The cached, verified file of a declared artifact (fetched first when missing); undefined when it cannot be had now. */
  async open(rel: string, sha256: string): Promise<OpenedFile | undefined> {
    if (!SHA_RE.test(sha256)) return undefined;
    const cached = await this.openCached(sha256);
    if (cached) return cached;
    try {
      await this.fetchOnce(rel, sha256);
    } catch (err) {
      this.opts.log.error('artifact not fetched from the origin', { path: rel, origin: this.opts.url, error: (err as Error).message });
      return undefined;
    }
    return this.openCached(sha256);
  }

  /** Whether the artifact is in the cache already (no download). */
  async has(sha256: string): Promise<boolean> {
    return !!(await stat(this.file(sha256)).catch(() => undefined))?.isFile();
  }

  /** Fetches every artifact not cached yet, one after the other (at start-up and reload: the first machine then finds them). */
  async prefetch(artifacts: ReadonlyArray<{ path: string; sha256: string }>): Promise<void> {
    for (const a of artifacts) {
      if (await this.has(a.sha256)) continue;
      await this.fetchOnce(a.path, a.sha256).catch((err: Error) => this.opts.log.warn('artifact prefetch failed; the first machine asking fetches it again', { path: a.path, error: err.message }));
    }
  }

  private async openCached(sha256: string): Promise<OpenedFile | undefined> {
    const file = this.file(sha256);
    const fh = await open(file, 'r').catch(() => undefined);
    if (!fh) return undefined;
    const st = await fh.stat();
    const now = new Date();
    await utimes(file, now, st.mtime).catch(() => undefined); // atime: when it was last served (LRU)
    return { fh, stat: st, real: file };
  }

  private fetchOnce(rel: string, sha256: string): Promise<void> {
    let p = this.inflight.get(sha256);
    if (!p) {
      p = this.download(rel, sha256).finally(() => this.inflight.delete(sha256));
      this.inflight.set(sha256, p);
    }
    return p;
  }

  private async download(rel: string, sha256: string): Promise<void> {
    await mkdir(this.opts.dir, { recursive: true, mode: 0o700 });
    const part = `${this.file(sha256)}.part`;
    const have = (await stat(part).catch(() => undefined))?.size ?? 0;
    const url = `${this.opts.url}/${rel.split('/').map(encodeURIComponent).join('/')}`;
    const res = await request(url, { method: 'GET', headers: have > 0 ? { range: `bytes=${have}-` } : {}, headersTimeout: ORIGIN.headersMs, bodyTimeout: ORIGIN.stallMs });
    if (res.statusCode !== 200 && res.statusCode !== 206) {
      await res.body.dump();
      throw new Error(`${url}: HTTP ${res.statusCode}`);
    }
    const resume = res.statusCode === 206 && new RegExp(`^bytes ${have}-`).test(String(res.headers['content-range'] ?? ''));
    const start = resume ? have : 0;
    const total = start + Number(res.headers['content-length'] ?? NaN);
    if (Number.isFinite(total)) await this.makeRoom(total, sha256);
    const hash = createHash('sha256');
    if (resume) for await (const chunk of createReadStream(part)) hash.update(chunk as Buffer);
    const fh = await open(part, resume ? 'a' : 'w', 0o600);
    let bytes = 0;
    try {
      for await (const chunk of res.body) {
        hash.update(chunk as Buffer);
        await fh.write(chunk as Buffer);
        bytes += (chunk as Buffer).length;
      }
      await fh.sync();
    } finally {
      await fh.close();
    }
    const got = hash.digest('hex');
    if (got !== sha256) {
      await rm(part, { force: true });
      throw new Error(`${url}: sha256 ${got}, profiles.yaml says ${sha256}: not cached (the origin serves other bytes)`);
    }
    // A whole second: the ETag (mtime-size-inode) must survive the LRU's atime updates, whose
    // utimes also writes the mtime back, rounded to the millisecond.
    const whole = new Date(Math.floor(Date.now() / 1000) * 1000);
    await utimes(part, whole, whole);
    await rename(part, this.file(sha256));
    this.stats.downloads++;
    this.stats.bytes += bytes;
    if (resume) this.stats.resumed++;
    this.opts.log.info('artifact fetched from the origin', { path: rel, origin: this.opts.url, bytes, resumedAt: resume ? have : undefined });
  }

  /** Removes the least recently served files until `need` more bytes fit in the bound; throws when they cannot. */
  private async makeRoom(need: number, keep: string): Promise<void> {
    const files: Array<{ name: string; size: number; usedMs: number }> = [];
    for (const name of await readdir(this.opts.dir)) {
      if (name.startsWith(keep)) continue;
      const st = await stat(path.join(this.opts.dir, name)).catch(() => undefined);
      if (st?.isFile()) files.push({ name, size: st.size, usedMs: name.endsWith('.part') ? st.mtimeMs : st.atimeMs });
    }
    const out = evictionsFor(files, need, this.opts.maxBytes);
    if (!out) throw new Error(`${need} bytes do not fit in the artifacts cache (${this.opts.maxBytes} bytes, --artifacts-cache-gib)`);
    for (const name of out) {
      await rm(path.join(this.opts.dir, name), { force: true });
      this.opts.log.info('artifact evicted from the cache', { file: name });
    }
  }
}
