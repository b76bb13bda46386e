/**
 * install.iso_url: download with resume (Range + If-Range), progress, bounded retries and stall
 * timeouts, then sha256 verification — all before any disk is touched. `local` means the medium we
 * booted from. Harvester: 5 curl attempts 2 s apart into COS_PERSISTENT; here the defaults are the
 * same attempts with backoff, and a partial download is resumed rather than restarted.
 */
import { createHash } from 'node:crypto';
import { constants, createReadStream } from 'node:fs';
import { lstat, open, readFile, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { EnvHttpProxyAgent, interceptors, request, type Dispatcher } from 'undici';
import { HvError, ExitCode } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import { sleep } from '../../lib/wait.js';
import { describeNetworkError } from './net-errors.js';
import { withoutUserinfo } from '../../lib/url-secrets.js';

export interface DownloadProgress {
  bytes: number;
  total?: number;
  /** Bytes per second over the last interval. */
  rate: number;
}

export interface DownloadOptions {
  /** Expected sha256 (hex). Without it the file is downloaded but not verified (logged as such). */
  sha256?: string;
  attempts?: number;
  retryDelayMs?: number;
  maxRetryDelayMs?: number;
  /** No byte for this long (connect, headers or between body chunks) counts as a failure. */
  stallTimeoutMs?: number;
  /** Extra CA bundle (PEM file) for https. */
  caFile?: string;
  onProgress?: (p: DownloadProgress) => void;
  /** Minimum ms between progress callbacks. */
  progressIntervalMs?: number;
  log?: Logger;
  signal?: AbortSignal;
}

export interface DownloadResult {
  path: string;
  bytes: number;
  sha256: string;
  resumed: boolean;
  attempts: number;
}

class FatalDownload extends HvError {}

interface PartMeta {
  url: string;
  validator?: string;
}

async function sha256Of(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const c of createReadStream(file, { highWaterMark: 1 << 20 })) h.update(c as Buffer);
  return h.digest('hex');
}

async function sizeOf(file: string): Promise<number> {
  return stat(file).then((s) => s.size, () => 0);
}

/**
 * The partial download as found: its size when it is a regular file of ours with one link, else it
 * is removed (a symlink or hard link another user planted in a shared directory would make root
 * write through it) and the download starts from zero.
 */
async function ownPartSize(part: string): Promise<number> {
  const st = await lstat(part).catch(() => undefined);
  if (!st) return 0;
  if (st.isFile() && st.nlink === 1 && st.uid === (process.getuid?.() ?? st.uid)) return st.size;
  await rm(part, { force: true });
  return 0;
}

/** Opens the partial download without following a symlink (O_NOFOLLOW), created 0600. */
async function openPart(part: string, append: boolean): Promise<FileHandle> {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | (append ? constants.O_APPEND : constants.O_TRUNC);
  return open(part, flags, 0o600).catch((err: NodeJS.ErrnoException) => {
    throw new FatalDownload(`cannot write ${part}: ${err.code === 'ELOOP' ? 'it is a symlink (someone else put it there): remove it' : (err.code ?? err.message)}`, { where: part, exitCode: ExitCode.installFailed });
  });
}

/** What an earlier run recorded about the partial download; anything unreadable or not ours counts as nothing. */
async function readPartMeta(metaFile: string): Promise<PartMeta | undefined> {
  const st = await lstat(metaFile).catch(() => undefined);
  if (!st?.isFile()) return undefined;
  try {
    const meta = JSON.parse(await readFile(metaFile, 'utf8')) as unknown;
    return meta && typeof meta === 'object' && typeof (meta as PartMeta).url === 'string' ? (meta as PartMeta) : undefined;
  } catch {
    return undefined;
  }
}

/** Downloads `url` to `dest` (atomically: dest.part, then rename). Throws HvError; never leaves a bad `dest`. */
export async function downloadFile(url: string, dest: string, opts: DownloadOptions = {}): Promise<DownloadResult> {
  const attempts = opts.attempts ?? 5;
  const stall = opts.stallTimeoutMs ?? 60_000;
  const part = `${dest}.part`;
  const metaFile = `${dest}.part.json`;
  const ca = opts.caFile ? await readFile(opts.caFile, 'utf8').catch((err: Error) => {
    throw new HvError(`cannot read CA bundle ${opts.caFile}: ${err.message}`, { exitCode: ExitCode.usage });
  }) : undefined;
  // connect: a direct https connection; requestTls: the one inside a proxy's CONNECT tunnel.
  const agent = new EnvHttpProxyAgent({ connect: ca ? { ca } : undefined, requestTls: ca ? { ca } : undefined, headersTimeout: stall, bodyTimeout: stall, connectTimeout: stall });
  const dispatcher: Dispatcher = agent.compose(interceptors.redirect({ maxRedirections: 5 }));
  const expected = opts.sha256?.toLowerCase();
  if (expected !== undefined && !/^[0-9a-f]{64}$/.test(expected)) throw new HvError(`expected sha256 '${opts.sha256}' is not 64 hex digits`, { exitCode: ExitCode.usage });

  let meta = await readPartMeta(metaFile);
  if (meta?.url !== url || (await ownPartSize(part)) === 0) {
    await rm(part, { force: true });
    meta = undefined;
  }
  let resumed = false;
  let used = 0;
  let delay = opts.retryDelayMs ?? 2_000;
  try {
    for (let attempt = 1; ; attempt++) {
      used = attempt;
      try {
        const r = await fetchOnce(url, part, metaFile, meta, dispatcher, opts);
        resumed ||= r.resumed;
        break;
      } catch (err) {
        if (err instanceof FatalDownload || opts.signal?.aborted) throw err;
        const described = err instanceof HvError ? { message: err.message, retryable: true } : describeNetworkError(err, url, stall);
        const why = described.message;
        if (!described.retryable) throw new HvError(`downloading ${url} failed: ${why}`, { where: url, exitCode: ExitCode.installFailed });
        if (attempt >= attempts) {
          throw new HvError(`downloading ${url} failed after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${why}`, {
            where: url,
            hint: `a partial download is kept in ${part} and resumed next time`,
            exitCode: ExitCode.installFailed,
          });
        }
        opts.log?.warn('download attempt failed; retrying', { url, attempt, retryInMs: delay, error: why, have: await sizeOf(part) });
        await sleep(delay, opts.signal);
        delay = Math.min(delay * 2, opts.maxRetryDelayMs ?? 30_000);
        meta = await readPartMeta(metaFile);
      }
    }
  } finally {
    await agent.close().catch(() => undefined);
  }
  const actual = await sha256Of(part);
  if (expected && actual !== expected) {
    await rm(part, { force: true });
    await rm(metaFile, { force: true });
    throw new HvError(`checksum mismatch for ${url}: expected sha256 ${expected}, got ${actual}`, {
      where: url,
      hint: 'the download was deleted and no disk was touched; check the ISO and the sha256 you gave',
      exitCode: ExitCode.installFailed,
    });
  }
  if (!expected) opts.log?.warn('downloaded without a sha256 to verify against', { url, sha256: actual });
  await rename(part, dest);
  await rm(metaFile, { force: true });
  return { path: dest, bytes: await sizeOf(dest), sha256: actual, resumed, attempts: used };
}

async function fetchOnce(
  url: string,
  part: string,
  metaFile: string,
  meta: PartMeta | undefined,
  dispatcher: Dispatcher,
  opts: DownloadOptions,
): Promise<{ resumed: boolean }> {
  const have = await ownPartSize(part);
  const headers: Record<string, string> = {};
  if (have > 0) {
    headers.range = `bytes=${have}-`;
    if (meta?.validator) headers['if-range'] = meta.validator;
  }
  // user:pass@ is sent as Basic credentials, never as part of the URL (or a message).
  const target = withoutUserinfo(url);
  if (target.authorization) headers.authorization = target.authorization;
  const res = await request(target.url, { method: 'GET', headers, dispatcher, signal: opts.signal });
  const status = res.statusCode;
  if (status === 416 && have > 0) {
    // Everything is already here when the server's total equals what we have.
    const total = Number(/\/(\d+)$/.exec(String(res.headers['content-range'] ?? ''))?.[1]);
    await res.body.dump();
    if (total === have) return { resumed: true };
    await rm(part, { force: true });
    throw new HvError(`server refused to resume at byte ${have} (416); starting over`);
  }
  if (status >= 400) {
    await res.body.dump().catch(() => undefined);
    const msg = `${url} answered HTTP ${status}`;
    if (status >= 500 || status === 408 || status === 429) throw new HvError(msg);
    throw new FatalDownload(`${msg}; check the URL`, { where: url, exitCode: ExitCode.installFailed });
  }
  if (status !== 200 && status !== 206) {
    await res.body.dump().catch(() => undefined);
    throw new FatalDownload(`${url} answered HTTP ${status}, expected 200 or 206`, { where: url, exitCode: ExitCode.installFailed });
  }
  const resuming = status === 206 && have > 0;
  if (status === 206 && !resuming) throw new FatalDownload(`${url} sent a partial response (206) to a full request`, { exitCode: ExitCode.installFailed });
  if (resuming) {
    const start = Number(/^bytes (\d+)-/.exec(String(res.headers['content-range'] ?? ''))?.[1]);
    if (start !== have) {
      await res.body.dump().catch(() => undefined);
      await rm(part, { force: true });
      throw new HvError(`server resumed at byte ${start}, not ${have}; starting over`);
    }
  }
  const etag = res.headers.etag;
  const lastModified = res.headers['last-modified'];
  const validator = typeof etag === 'string' && !etag.startsWith('W/') ? etag : typeof lastModified === 'string' ? lastModified : undefined;
  await writeFileAtomic(metaFile, JSON.stringify({ url, validator } satisfies PartMeta), { mode: 0o600 });
  const length = Number(res.headers['content-length']);
  const total = Number.isFinite(length) ? length + (resuming ? have : 0) : undefined;
  let bytes = resuming ? have : 0;
  let lastReport = 0;
  let lastBytes = bytes;
  const interval = opts.progressIntervalMs ?? 1_000;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      bytes += chunk.length;
      const now = Date.now();
      if (opts.onProgress && now - lastReport >= interval) {
        const rate = lastReport ? ((bytes - lastBytes) * 1000) / (now - lastReport) : 0;
        opts.onProgress({ bytes, total, rate });
        lastReport = now;
        lastBytes = bytes;
      }
      cb(null, chunk);
    },
  });
  const fh = await openPart(part, resuming);
  await pipeline(res.body, counter, fh.createWriteStream());
  if (total !== undefined && bytes !== total) throw new HvError(`connection closed after ${bytes} of ${total} bytes`);
  opts.onProgress?.({ bytes, total, rate: 0 });
  return { resumed: resuming };
}
