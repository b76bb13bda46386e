/**
 * The install ISO without holding it in RAM (iso-placement.ts says when): byte ranges for what the
 * plan needs before any disk is touched, then one ordered read of the whole ISO that checks its
 * sha256 and writes the image bundle straight onto COS_PERSISTENT. Every request has a stall
 * timeout (no byte for that long fails it) and is resumed from where it stopped, with If-Range so a
 * file that changed on the server is never stitched together.
 */
import { createHash, type Hash } from 'node:crypto';
import { chmod, mkdir, open, readFile, rm, symlink, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { EnvHttpProxyAgent, interceptors, request, type Dispatcher } from 'undici';
import { HvError, ExitCode } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import type { Logger } from '../../lib/logger.js';
import { sleep } from '../../lib/wait.js';
import { describeNetworkError } from './net-errors.js';
import { withoutUserinfo } from '../../lib/url-secrets.js';
import { fileRanges, parseLsdl, parseReportLba, type IsoEntry, type IsoFile } from './iso-placement.js';

export interface IsoProbe {
  bytes?: number;
  acceptsRanges: boolean;
  /** ETag (strong) or Last-Modified: what If-Range sends so later ranges come from the same file. */
  validator?: string;
}

export interface StreamOptions {
  caFile?: string;
  stallTimeoutMs?: number;
  attempts?: number;
  retryDelayMs?: number;
  signal?: AbortSignal;
  log?: Logger;
}

async function dispatcherFor(opts: StreamOptions): Promise<EnvHttpProxyAgent> {
  const stall = opts.stallTimeoutMs ?? 60_000;
  const ca = opts.caFile ? await readFile(opts.caFile, 'utf8') : undefined;
  // The proxy environment, as for the download to RAM (iso.ts): a site behind a proxy streams through it too.
  return new EnvHttpProxyAgent({ connect: ca ? { ca } : undefined, requestTls: ca ? { ca } : undefined, headersTimeout: stall, bodyTimeout: stall, connectTimeout: stall });
}

function withRedirects(a: EnvHttpProxyAgent): Dispatcher {
  return a.compose(interceptors.redirect({ maxRedirections: 5 }));
}

/** user:pass@ of the ISO's URL as the request's Basic credentials. */
function credentials(t: { authorization?: string }): Record<string, string> {
  return t.authorization ? { authorization: t.authorization } : {};
}

/** Size, range support and a validator, from a one-byte range request (no body worth reading). */
export async function probeIso(url: string, opts: StreamOptions = {}): Promise<IsoProbe> {
  const agent = await dispatcherFor(opts);
  try {
    const target = withoutUserinfo(url);
    const res = await request(target.url, { method: 'GET', headers: { range: 'bytes=0-0', ...credentials(target) }, dispatcher: withRedirects(agent), signal: opts.signal });
    const etag = typeof res.headers.etag === 'string' && !res.headers.etag.startsWith('W/') ? res.headers.etag : undefined;
    const lastModified = typeof res.headers['last-modified'] === 'string' ? res.headers['last-modified'] : undefined;
    const validator = etag ?? lastModified;
    if (res.statusCode === 206) {
      await res.body.dump();
      const total = Number(/\/(\d+)$/.exec(String(res.headers['content-range'] ?? ''))?.[1]);
      return { bytes: Number.isFinite(total) ? total : undefined, acceptsRanges: Number.isFinite(total), validator };
    }
    // Not a range answer: the whole ISO is coming; its length is all we want from it.
    res.body.destroy();
    if (res.statusCode >= 400) throw new HvError(`${url} answered HTTP ${res.statusCode}`, { where: url, hint: 'check install.iso_url', exitCode: ExitCode.installFailed });
    const length = Number(res.headers['content-length']);
    return { bytes: Number.isFinite(length) ? length : undefined, acceptsRanges: false, validator };
  } finally {
    await agent.close().catch(() => undefined);
  }
}

interface RangeWrite {
  /** ISO bytes [start, end). */
  start: number;
  end: number;
  /** Where the bytes go (none: only hashed). */
  fh?: FileHandle;
  fileOffset: number;
  hash?: Hash;
}

/**
 * Reads ISO bytes [from, to) in order, with resume: `consume` gets each chunk and its ISO offset.
 * A failed request resumes at the first byte not consumed, with If-Range; an answer that is not the
 * range asked for (the file changed) fails.
 */
async function readOrdered(url: string, from: number, to: number, validator: string | undefined, consume: (chunk: Buffer, at: number) => Promise<void>, opts: StreamOptions, dispatcher: Dispatcher): Promise<void> {
  const attempts = opts.attempts ?? 5;
  let pos = from;
  let delay = opts.retryDelayMs ?? 2_000;
  for (let attempt = 1; ; attempt++) {
    try {
      const target = withoutUserinfo(url);
      const headers: Record<string, string> = { range: `bytes=${pos}-${to - 1}`, ...credentials(target) };
      if (validator) headers['if-range'] = validator;
      const res = await request(target.url, { method: 'GET', headers, dispatcher, signal: opts.signal });
      const start = Number(/^bytes (\d+)-/.exec(String(res.headers['content-range'] ?? ''))?.[1]);
      if (res.statusCode !== 206 || start !== pos) {
        await res.body.dump().catch(() => undefined);
        throw new HvError(`${url} answered HTTP ${res.statusCode}${res.statusCode === 206 ? ` from byte ${start}` : ''} to a request for bytes ${pos}-${to - 1}: the ISO changed on the server, or the server stopped serving ranges`, {
          where: url,
          hint: 'keep the ISO unchanged on the server during installs; the install can be run again',
          exitCode: ExitCode.installFailed,
        });
      }
      for await (const chunk of res.body) {
        const b = chunk as Buffer;
        await consume(b, pos);
        pos += b.length;
      }
      if (pos < to) throw new Error(`connection closed at byte ${pos} of ${to}`);
      return;
    } catch (err) {
      if (err instanceof HvError || opts.signal?.aborted) throw err;
      const why = describeNetworkError(err, url, opts.stallTimeoutMs ?? 60_000).message;
      if (attempt >= attempts) {
        throw new HvError(`reading ${url} failed after ${attempts} attempts at byte ${pos}: ${why}`, { where: url, hint: 'check the network and the server; the install can be run again', exitCode: ExitCode.installFailed });
      }
      opts.log?.warn('ISO read interrupted; resuming', { url, at: pos, attempt, error: why });
      await sleep(delay, opts.signal);
      delay = Math.min(delay * 2, 30_000);
    }
  }
}

/** Writes each chunk's overlap with the targets (sorted by start) at the right file offsets. */
function writerFor(targets: RangeWrite[]): (chunk: Buffer, at: number) => Promise<void> {
  const sorted = [...targets].sort((a, b) => a.start - b.start);
  let first = 0;
  return async (chunk, at) => {
    const end = at + chunk.length;
    while (first < sorted.length && sorted[first]!.end <= at) first++;
    for (let i = first; i < sorted.length && sorted[i]!.start < end; i++) {
      const t = sorted[i]!;
      const s = Math.max(at, t.start);
      const e = Math.min(end, t.end);
      if (s >= e) continue;
      const slice = chunk.subarray(s - at, e - at);
      t.hash?.update(slice);
      let off = 0;
      while (t.fh && off < slice.length) off += (await t.fh.write(slice, off, slice.length - off, t.fileOffset + (s - t.start) + off)).bytesWritten;
    }
  };
}

export interface IsoParts {
  url: string;
  isoBytes: number;
  validator?: string;
  /** Every regular file of the ISO with its extents. */
  files: Map<string, IsoFile>;
  /** /rootfs.squashfs, fetched into RAM (the OS source the plan and the deploy use). */
  squashfs: string;
  squashfsSha256: string;
  /** /harvester-release.yaml, when the ISO has one. */
  release?: string;
  /** What is under /bundle (its directories, files and symlinks with their modes), paths relative to it. */
  bundle: IsoEntry[];
  /** hvinstall.ca_file, trusted again when the bundle is streamed. */
  caFile?: string;
  /** The whole ISO's sha256, read before the disk was touched (checked against the published one when there is one). */
  isoSha256: string;
}

const HEAD_SIZES = [4, 16, 64].map((m) => m * 1024 * 1024);

/**
 * The ISO's directory: its first MiBs (4, 16, then 64) into a sparse file until xorriso lists
 * /rootfs.squashfs in it. Returns the files and /bundle's entries; the head file is removed.
 */
async function readIsoDirectory(url: string, dir: string, probe: IsoProbe, opts: StreamOptions, dispatcher: Dispatcher): Promise<{ files: Map<string, IsoFile>; bundle: IsoEntry[] }> {
  const isoBytes = probe.bytes!;
  const head = path.join(dir, 'iso-head.sparse');
  try {
    let have = 0;
    for (const size of HEAD_SIZES) {
      const want = Math.min(size, isoBytes);
      const fh = await open(head, have === 0 ? 'w' : 'r+');
      try {
        await fh.truncate(isoBytes);
        if (want > have) await readOrdered(url, have, want, probe.validator, writerFor([{ start: have, end: want, fh, fileOffset: have }]), opts, dispatcher);
      } finally {
        await fh.close();
      }
      have = want;
      const r = await run('xorriso', ['-indev', head, '-find', '/', '-type', 'f', '-exec', 'report_lba', '--'], { allowFailure: true, timeoutMs: 120_000 });
      const listed = parseReportLba(r.stdout);
      if (listed.has('/rootfs.squashfs')) return { files: listed, bundle: await listBundle(head) };
      if (want >= isoBytes) break;
    }
    throw new HvError(`${url}: no /rootfs.squashfs in the ISO's directory (read from its first ${Math.round(have / 1048576)} MiB)`, { where: 'install.iso_url', hint: 'point iso_url at a Harvester (or hvinstall) ISO', exitCode: ExitCode.checkFailed });
  } finally {
    await rm(head, { force: true });
  }
}

/** Where the parts fetched before the disk is touched go, each with a hash of its bytes. */
async function partTargets(files: Map<string, IsoFile>, dir: string): Promise<{ targets: RangeWrite[]; handles: FileHandle[]; squashfs: string; release?: string; squashfsHash: Hash }> {
  const squashfsHash = createHash('sha256');
  const targets: RangeWrite[] = [];
  const handles: FileHandle[] = [];
  const add = async (isoPath: string, dest: string, hash?: Hash): Promise<void> => {
    const f = files.get(isoPath)!;
    const fh = await open(dest, 'w', 0o600);
    handles.push(fh);
    await fh.truncate(f.size);
    for (const r of fileRanges(f)) targets.push({ start: r.start, end: r.end, fh, fileOffset: r.fileOffset, hash });
  };
  const squashfs = path.join(dir, 'rootfs.squashfs');
  await add('/rootfs.squashfs', squashfs, squashfsHash);
  const release = files.has('/harvester-release.yaml') ? path.join(dir, 'harvester-release.yaml') : undefined;
  if (release) await add('/harvester-release.yaml', release);
  return { targets, handles, squashfs, release, squashfsHash };
}

/**
 * Before the disk is touched: the ISO's directory (read by xorriso from its first MiBs), then one
 * ordered read of the whole ISO through its sha256, keeping /rootfs.squashfs and
 * /harvester-release.yaml in `dir` (RAM). The ISO's sha256 is compared with `sha256` before this
 * returns, so nothing from an ISO that is not the published one reaches the deploy; without
 * `sha256` (the operator's consent to an unverified medium) the digest is only reported.
 */
export async function fetchIsoParts(url: string, dir: string, probe: IsoProbe, opts: StreamOptions & { sha256?: string; beforeParts?: (squashfsBytes: number) => void } = {}): Promise<IsoParts> {
  const isoBytes = probe.bytes!;
  await mkdir(dir, { recursive: true });
  const agent = await dispatcherFor(opts);
  const dispatcher = withRedirects(agent);
  const { files, bundle } = await readIsoDirectory(url, dir, probe, opts, dispatcher).catch(async (err: unknown) => {
    await agent.close().catch(() => undefined);
    throw err;
  });
  opts.beforeParts?.(files.get('/rootfs.squashfs')!.size);
  const parts = await partTargets(files, dir);
  const iso = createHash('sha256');
  let ok = false;
  try {
    const write = writerFor(parts.targets);
    await readOrdered(url, 0, isoBytes, probe.validator, async (chunk, at) => {
      iso.update(chunk);
      await write(chunk, at);
    }, opts, dispatcher);
    for (const fh of parts.handles) await fh.sync();
    const isoSha256 = iso.digest('hex');
    if (opts.sha256 && isoSha256 !== opts.sha256.toLowerCase()) throw isoMismatch(url, opts.sha256.toLowerCase(), isoSha256);
    ok = true;
    return { url, isoBytes, validator: probe.validator, files, squashfs: parts.squashfs, squashfsSha256: parts.squashfsHash.digest('hex'), isoSha256, release: parts.release, bundle, caFile: opts.caFile };
  } finally {
    for (const fh of parts.handles) await fh.close().catch(() => undefined);
    if (!ok) for (const f of [parts.squashfs, parts.release]) if (f) await rm(f, { force: true });
    await agent.close().catch(() => undefined);
  }
}

function isoMismatch(url: string, expected: string, got: string): HvError {
  return new HvError(`checksum mismatch for ${url}: expected sha256 ${expected}, got ${got}`, {
    where: url,
    hint: 'nothing from this ISO was used; check the ISO on the server and its published .sha256',
    exitCode: ExitCode.installFailed,
  });
}

/** /bundle's entries (from the ISO's Rock Ridge tree), relative to /bundle; none when the ISO has no /bundle. */
async function listBundle(isoHead: string): Promise<IsoEntry[]> {
  const r = await run('xorriso', ['-indev', isoHead, '-find', '/bundle', '-exec', 'lsdl', '--'], { allowFailure: true, timeoutMs: 120_000 });
  return parseLsdl(r.stdout)
    .filter((e) => e.path.startsWith('/bundle/'))
    .map((e) => ({ ...e, path: e.path.slice('/bundle/'.length) }));
}

export interface StreamResult {
  sha256: string;
  files: number;
  bytes: number;
}

/** Files first, then directories deepest first, so a read-only parent does not stop its children's chmod. */
async function applyModes(entries: IsoEntry[], root: string): Promise<void> {
  for (const f of entries.filter((e) => e.kind === 'file')) await chmod(path.join(root, f.path), f.mode);
  const dirs = entries.filter((e) => e.kind === 'dir').sort((a, b) => b.path.split('/').length - a.path.split('/').length);
  for (const d of dirs) await chmod(path.join(root, d.path), d.mode);
}

/** The ISO's /bundle/ files, with their paths relative to /bundle. */
export function bundleFiles(files: Map<string, IsoFile>): Array<{ rel: string; file: IsoFile }> {
  return [...files.values()].filter((f) => f.path.startsWith('/bundle/')).map((f) => ({ rel: f.path.slice('/bundle/'.length), file: f })).sort((a, b) => (a.rel < b.rel ? -1 : 1));
}

/**
 * Once COS_PERSISTENT exists: reads the whole ISO once, in order, through a sha256, writing its
 * /bundle/ files under `bundleDir` and checking that /rootfs.squashfs is what was fetched before.
 * Throws HvError on a checksum mismatch (the caller removes bundleDir).
 */
export async function streamIsoBundle(parts: IsoParts, bundleDir: string, opts: StreamOptions & { sha256?: string; onProgress?: (done: number, total: number) => void }): Promise<StreamResult> {
  const agent = await dispatcherFor(opts);
  const dispatcher = withRedirects(agent);
  const targets: RangeWrite[] = [];
  const handles: FileHandle[] = [];
  const iso = createHash('sha256');
  const squashfs = createHash('sha256');
  try {
    const wanted = bundleFiles(parts.files);
    // Writable while filling; the ISO's modes are applied once the files are in.
    await mkdir(bundleDir, { recursive: true, mode: 0o755 });
    for (const d of parts.bundle.filter((e) => e.kind === 'dir')) await mkdir(path.join(bundleDir, d.path), { recursive: true, mode: 0o755 });
    for (const { rel, file } of wanted) {
      const dest = path.join(bundleDir, rel);
      await mkdir(path.dirname(dest), { recursive: true });
      const fh = await open(dest, 'w', 0o600);
      handles.push(fh);
      await fh.truncate(file.size);
      for (const r of fileRanges(file)) targets.push({ start: r.start, end: r.end, fh, fileOffset: r.fileOffset });
    }
    for (const l of parts.bundle.filter((e) => e.kind === 'symlink')) {
      await mkdir(path.dirname(path.join(bundleDir, l.path)), { recursive: true });
      await symlink(l.target!, path.join(bundleDir, l.path));
    }
    const sq = parts.files.get('/rootfs.squashfs')!;
    for (const r of fileRanges(sq)) targets.push({ start: r.start, end: r.end, fileOffset: r.fileOffset, hash: squashfs });
    const write = writerFor(targets);
    let done = 0;
    let lastReport = 0;
    await readOrdered(parts.url, 0, parts.isoBytes, parts.validator, async (chunk, at) => {
      iso.update(chunk);
      await write(chunk, at);
      done = at + chunk.length;
      if (opts.onProgress && (done - lastReport >= 16 * 1024 * 1024 || done === parts.isoBytes)) {
        opts.onProgress(done, parts.isoBytes);
        lastReport = done;
      }
    }, opts, dispatcher);
    for (const fh of handles) await fh.sync();
    const sha256 = iso.digest('hex');
    // The same bytes as the read before the disk was touched, or the ISO changed on the server since.
    const expected = (opts.sha256 ?? parts.isoSha256).toLowerCase();
    if (sha256 !== expected) {
      throw new HvError(`checksum mismatch for ${parts.url}: expected sha256 ${expected}, got ${sha256}`, { where: parts.url, hint: 'the image bundle written from it is removed; keep the ISO unchanged on the server during installs, then run the install again', exitCode: ExitCode.installFailed });
    }
    const sqSha = squashfs.digest('hex');
    if (sqSha !== parts.squashfsSha256) {
      throw new HvError(`the ISO's /rootfs.squashfs (sha256 ${sqSha}) is not the one fetched before the disk was touched (${parts.squashfsSha256}): the ISO changed on the server during the install`, { where: parts.url, hint: 'keep the ISO unchanged during installs, then run the install again', exitCode: ExitCode.installFailed });
    }
    await applyModes(parts.bundle, bundleDir);
    return { sha256, files: wanted.length, bytes: parts.isoBytes };
  } finally {
    for (const fh of handles) await fh.close().catch(() => undefined);
    await agent.close().catch(() => undefined);
  }
}
