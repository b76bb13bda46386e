/**
 * The OS source's content, digested once before any disk is touched: every entry's type, mode,
 * owner, size, link target and, for regular files, the sha256 of its bytes (plus the sha256 of a
 * squashfs file itself). Deploy checks what it built against these and not against the source as
 * it is later, so a source that changes under the install (a truncated file, a replaced squashfs)
 * fails the install naming the file instead of being installed as it is.
 */
import { createHash } from 'node:crypto';
import { lstat, opendir, readFile, readlink } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { beforeStall, StallWatchdog } from '../../lib/stall-watchdog.js';
import type { OsSource, SourceDigests, SourceEntry } from '../disk/contracts.js';

export type { SourceDigests, SourceEntry } from '../disk/contracts.js';
import { sha256File } from './checksum.js';
import { WorkerSha256 } from './hash-worker.js';
import { SOURCE_STALL_TIMEOUT_MS } from './image-build.js';
import { prepareSource } from './source.js';

const SMALL_FILE = 4 * 1024 * 1024;

export interface SourceDigestOptions {
  signal?: AbortSignal;
  /** Digest only this entry (a relative path), not the whole tree. */
  only?: string;
  stallTimeoutMs?: number;
  onBytes?: (n: number) => void;
}

/** Digests the source once (mounting it as deploy does). */
export async function takeSourceDigests(source: OsSource, workDir: string, opts: SourceDigestOptions = {}): Promise<SourceDigests> {
  const stall = opts.stallTimeoutMs ?? SOURCE_STALL_TIMEOUT_MS;
  const fileSha256 = source.kind === 'squashfs' ? await sha256File(source.path, { signal: opts.signal, stallTimeoutMs: stall, onBytes: opts.onBytes }) : undefined;
  const prepared = await prepareSource(source, workDir, stall);
  try {
    const entries = await contentManifest(prepared.tree, { ...opts, stallTimeoutMs: stall });
    return { source, digest: manifestDigest(entries), entries, ...(fileSha256 ? { fileSha256 } : {}) };
  } finally {
    await prepared.release();
  }
}

/** Every entry under root with its content digest, sorted by path. */
export async function contentManifest(root: string, opts: SourceDigestOptions = {}): Promise<Map<string, SourceEntry>> {
  const out = new Map<string, SourceEntry>();
  if (opts.only !== undefined) {
    const entry = await digestEntry(path.join(root, opts.only), opts);
    if (entry) out.set(opts.only, entry);
    return out;
  }
  // The large files of the tree are hashed one after another on one worker, started at the first.
  let worker: WorkerSha256 | undefined;
  try {
    await walkTree(root, out, { ...opts, hasher: () => (worker ??= new WorkerSha256()) });
  } finally {
    await worker?.close();
  }
  return out;
}

async function walkTree(root: string, out: Map<string, SourceEntry>, opts: DigestOptions): Promise<void> {
  const walk = async (dir: string, rel: string): Promise<void> => {
    opts.signal?.throwIfAborted();
    const names: string[] = [];
    for await (const e of await opendir(dir)) names.push(e.name);
    for (const name of names.sort()) {
      const full = path.join(dir, name);
      const relPath = rel ? `${rel}/${name}` : name;
      const entry = await digestEntry(full, opts);
      if (!entry) {
        throw new HvError(`${full} went away while the tree under ${root} was read: something is changing it`, {
          where: root,
          hint: 'let nothing change the OS source (or the image) while the install reads it, then run the install again',
          exitCode: ExitCode.installFailed,
        });
      }
      out.set(relPath, entry);
      if (entry.type === 'd') await walk(full, relPath);
    }
  };
  await walk(root, '');
}

type DigestOptions = SourceDigestOptions & { hasher?: () => WorkerSha256 };

async function digestEntry(full: string, opts: DigestOptions): Promise<SourceEntry | undefined> {
  const st = await lstat(full).catch(() => undefined);
  if (!st) return undefined;
  const type = st.isFile() ? 'f' : st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'l' : st.isCharacterDevice() ? 'c' : st.isBlockDevice() ? 'b' : st.isFIFO() ? 'p' : 's';
  const entry: SourceEntry = { type, mode: st.mode & 0o7777, uid: st.uid, gid: st.gid, size: type === 'd' ? 0 : st.size };
  if (type === 'f') entry.sha256 = await fileSha256(full, st.size, opts);
  if (type === 'l') entry.link = await readlink(full);
  return entry;
}

/** Small files are hashed here (a worker per file costs more than the hash); large ones streamed on a worker. */
async function fileSha256(file: string, size: number, opts: DigestOptions): Promise<string> {
  if (size > SMALL_FILE) return sha256File(file, { signal: opts.signal, stallTimeoutMs: opts.stallTimeoutMs, onBytes: opts.onBytes, hasher: opts.hasher?.() });
  const wd = new StallWatchdog(opts.stallTimeoutMs ?? SOURCE_STALL_TIMEOUT_MS);
  const data = await beforeStall(readFile(file), wd, (idle) => `no byte read from ${file} for ${Math.round(idle / 1000)} s`);
  opts.onBytes?.(data.length);
  return createHash('sha256').update(data).digest('hex');
}

export function manifestDigest(entries: ReadonlyMap<string, SourceEntry>): string {
  const h = createHash('sha256');
  for (const [rel, e] of entries) h.update(`${rel}\0${e.type}\0${e.mode.toString(8)}\0${e.uid}:${e.gid}\0${e.size}\0${e.sha256 ?? ''}\0${e.link ?? ''}\n`);
  return `sha256:${h.digest('hex')}`;
}

/** The first difference between a tree's manifest and the source's, as a sentence; undefined when equal. */
export function firstDifference(want: ReadonlyMap<string, SourceEntry>, got: ReadonlyMap<string, SourceEntry>): { rel: string; text: string } | undefined {
  for (const [rel, w] of want) {
    const g = got.get(rel);
    const text = entryDifference(rel, w, g);
    if (text) return { rel, text };
  }
  for (const rel of got.keys()) if (!want.has(rel)) return { rel, text: `/${rel} is not in the source` };
  return undefined;
}

function entryDifference(rel: string, w: SourceEntry, g: SourceEntry | undefined): string | undefined {
  if (!g) return `/${rel} is missing`;
  if (g.type !== w.type) return `/${rel} is of type ${g.type}, the source's is ${w.type}`;
  if (g.size !== w.size) return `/${rel} is ${g.size} bytes, the source's was ${w.size}`;
  if (g.sha256 !== w.sha256) return `/${rel} has sha256 ${g.sha256}, the source's was ${w.sha256}`;
  if (g.link !== w.link) return `/${rel} points to ${g.link}, the source's to ${w.link}`;
  if (g.mode !== w.mode || g.uid !== w.uid || g.gid !== w.gid) return `/${rel} has mode ${g.mode.toString(8)} ${g.uid}:${g.gid}, the source's ${w.mode.toString(8)} ${w.uid}:${w.gid}`;
  return undefined;
}

export function sourceChanged(digests: SourceDigests, what: string): HvError {
  return new HvError(`the OS source ${digests.source.path} changed since the install began: ${what}`, {
    where: digests.source.path,
    hint: 'something modified the source while the install ran (a re-mounted medium, a copy still in progress, another process); keep it unchanged and run the install again',
    exitCode: ExitCode.installFailed,
  });
}
