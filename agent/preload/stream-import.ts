/**
 * One attempt at importing one archive, streamed, in one of two ways:
 *
 *   api: cat ARCHIVE ──fd3──▶ agent (sha256, byte count) ──stdin──▶ zstd -dc ──fd4──▶ agent ──▶ containerd's API
 *   ctr: cat ARCHIVE ──fd3──▶ agent (sha256, byte count, hold-back) ──stdin──▶ zstd -dc | ctr images import -
 *
 * (without a checksum zstd reads the archive itself and the agent only follows its progress). The
 * reading processes run in one new process group (a bash script, detached), so a stall or a
 * checksum mismatch kills the whole import with one signal. The archive is read by `cat` rather
 * than by the agent: a read hung in the kernel (dead virtual media) then blocks a killable child,
 * never the agent's own I/O threads. Nothing is decompressed to disk.
 *
 * A bad archive must not count as imported. The API importer (api-import.ts) creates image records
 * only once the group has exited cleanly and the hash matched. ctr's containerd creates them once
 * the tar stream ends (its end-of-archive blocks or EOF), so for ctr the last HOLD_BACK bytes of the
 * archive are held back until the whole file has been hashed: on a mismatch the group is SIGKILLed
 * before ctr ever sees the end of the tar, and no image is created. (The orchestrator still compares
 * the image list before and after and removes anything a failed attempt left behind.)
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Readable, Writable } from 'node:stream';
import { DockerArchiveApiImport } from './api-import.js';
import type { BundleArchive } from './bundle.js';
import type { CtrTarget } from './containerd.js';
import { formatBytes, type FailureKind } from './diagnosis.js';
import { DockerArchiveError, NotForApiImportError } from './docker-archive.js';
import { ContainerdApiError, GrpcSession } from './grpc-session.js';
import { TarFormatError } from './tar-entries.js';
import { StallWatchdog } from '../../lib/stall-watchdog.js';

/** 1 MiB: larger than zstd's last block plus a tar's end-of-archive padding. */
export const HOLD_BACK_BYTES = 1 << 20;
const STDERR_TAIL = 4096;

// $1 archive, $2 compression, $3 zstd, then the ctr command line; without one the tar goes to fd 4,
// where the agent's own importer reads it (api-import.ts).
// The zstd → ctr pipe is widened to 1 MiB (F_SETPIPE_SZ = 1031, through perl when there is one):
// ctr then reads and sends containerd bigger chunks, which costs containerd less CPU per byte.
// Best effort: without perl the import works the same with the default 64 KiB pipe.
// If the agent itself dies (SIGKILL), the group must not live on: a watcher kills it once the
// parent is gone (its stdio is /dev/null so it never holds the agent's pipes open).
const SCRIPT = `archive=$1 compression=$2 zstd=$3
shift 3
( while kill -0 "$PPID" 2>/dev/null; do sleep 2; done; kill -KILL 0 ) </dev/null >/dev/null 2>&1 3>&- 4>&- &
watcher=$!
cat -- "$archive" >&3 4>&- &
reader=$!
exec 3>&-
widen() { command -v perl >/dev/null 2>&1 && perl -e 'fcntl(STDIN, 1031, 1048576)' 2>/dev/null; return 0; }
if [ $# -eq 0 ] && [ "$compression" = zstd ]; then
  "$zstd" -dcq >&4
  zs=$? cs=0
elif [ $# -eq 0 ]; then
  cat >&4
  cs=$? zs=0
elif [ "$compression" = zstd ]; then
  "$zstd" -dcq | { widen; exec "$@"; }
  st=("\${PIPESTATUS[@]}")
  zs=\${st[0]} cs=\${st[1]}
else
  "$@"
  cs=$? zs=0
fi
wait "$reader"
rs=$?
kill "$watcher" 2>/dev/null
if [ "$rs" -ne 0 ]; then echo "hvagent-preload: reading $archive failed (cat exited $rs)" >&2; exit 97; fi
if [ "$zs" -eq 127 ]; then echo "hvagent-preload: $zstd not found: cannot decompress $archive" >&2; exit 96; fi
if [ "$zs" -ne 0 ] && [ "$zs" -ne 141 ]; then echo "hvagent-preload: zstd could not decompress $archive (exit $zs)" >&2; exit 98; fi
exit "$cs"
`;

// Without a checksum to verify, the agent stays out of the data path: zstd (or ctr, for a plain
// tar) reads the archive itself, in large reads, and the agent follows the reader's progress in
// /proc/<pid>/io (rchar) instead of relaying every 64 KiB chunk. fd 3 carries only the reader's PID.
const DIRECT_SCRIPT = `archive=$1 compression=$2 zstd=$3
shift 3
( while kill -0 "$PPID" 2>/dev/null; do sleep 2; done; kill -KILL 0 ) </dev/null >/dev/null 2>&1 3>&- 4>&- &
watcher=$!
widen() { command -v perl >/dev/null 2>&1 && perl -e 'fcntl(STDIN, 1031, 1048576)' 2>/dev/null; return 0; }
if [ $# -eq 0 ] && [ "$compression" = zstd ]; then
  ( echo "$BASHPID" >&3; exec 3>&-; exec "$zstd" -dcq < "$archive" >&4 )
  zs=$? cs=0
elif [ $# -eq 0 ]; then
  ( echo "$BASHPID" >&3; exec 3>&-; exec cat -- "$archive" >&4 ) || { echo "hvagent-preload: reading $archive failed (cat exited $?)" >&2; exit 97; }
  cs=0 zs=0
elif [ "$compression" = zstd ]; then
  { echo "$BASHPID" >&3; exec 3>&-; exec "$zstd" -dcq < "$archive"; } | { exec 3>&-; widen; exec "$@"; }
  st=("\${PIPESTATUS[@]}")
  zs=\${st[0]} cs=\${st[1]}
else
  ( echo "$BASHPID" >&3; exec 3>&-; exec "$@" < "$archive" )
  cs=$? zs=0
fi
exec 3>&-
kill "$watcher" 2>/dev/null
if [ "$zs" -eq 127 ]; then echo "hvagent-preload: $zstd not found: cannot decompress $archive" >&2; exit 96; fi
if [ "$zs" -ne 0 ] && [ "$zs" -ne 141 ]; then echo "hvagent-preload: zstd could not decompress $archive (exit $zs)" >&2; exit 98; fi
exit "$cs"
`;

/** Bytes a process has read so far (/proc/<pid>/io rchar); undefined once it is gone. */
async function bytesReadBy(pid: number): Promise<number | undefined> {
  try {
    const m = /^rchar:\s+(\d+)$/m.exec(await readFile(`/proc/${pid}/io`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

export interface ImportAttemptOptions {
  archive: BundleArchive;
  target: CtrTarget;
  zstd: string;
  unpack: boolean;
  /** `api`: the agent's own importer over containerd's API (ctr for what it does not take); `ctr`: ctr always. */
  importer: 'api' | 'ctr';
  stallTimeoutMs: number;
  finishTimeoutMs: number;
  signal: AbortSignal;
  /** Called as the archive is read (bytes so far). */
  onBytes?: (bytes: number) => void;
  holdBackBytes?: number;
  now?: () => number;
}

export interface ImportAttemptResult {
  bytes: number;
  /** The archive's sha256, computed only when the bundle carries one to compare with. */
  sha256?: string;
  durationMs: number;
}

export class ImportAttemptError extends Error {
  constructor(
    readonly kind: FailureKind,
    message: string,
    readonly output: string,
  ) {
    super(message);
    this.name = 'ImportAttemptError';
  }
}

function tail(s: string): string {
  return s.length > STDERR_TAIL ? s.slice(-STDERR_TAIL) : s;
}

function lastLines(s: string, n = 3): string {
  return s.trim().split('\n').filter(Boolean).slice(-n).join(' | ');
}

/** The ctr argv for a streamed import from stdin. */
export function ctrImportArgs(t: CtrTarget, unpack: boolean): string[] {
  return [t.ctr, '-a', t.socket, '-n', t.namespace, 'images', 'import', ...(unpack ? [] : ['--no-unpack']), '-'];
}

/** Classifies how the import group ended (exit code from SCRIPT) into a failure, or null for success. */
export function classifyExit(
  code: number | null,
  signal: NodeJS.Signals | null,
  output: string,
  wholeFileSent: boolean,
): { kind: FailureKind; message: string } | null {
  if (code === 0) return null;
  const detail = lastLines(output);
  // bash's 127 for zstd: the tool is not on this node (or not executable); the archive is not at fault.
  if (code === 96) return { kind: 'tool-missing', message: `zstd is missing on this node: ${detail}` };
  if (code === 97) {
    const cat = output.split('\n').filter((l) => l.startsWith('cat:')).slice(-2).join(' | ');
    return { kind: 'read-failed', message: `reading the archive failed: ${cat || detail}` };
  }
  if (code === 98) {
    // zstd reports a broken pipe when ctr died first: that is ctr's failure, not a corrupt archive.
    if (/broken pipe|write error/i.test(output)) return { kind: 'import-failed', message: `ctr stopped reading: ${detail}` };
    // zstd reading the archive itself: a truncated file ends "prematurely", an I/O error is a read error.
    if (/read error/i.test(output) && !/premature end|unexpected end/i.test(output)) {
      return { kind: 'read-failed', message: `reading the archive failed: ${detail}` };
    }
    return { kind: 'corrupt', message: `cannot decompress (corrupt or truncated): ${detail}` };
  }
  if (signal) return { kind: 'import-failed', message: `the import was killed by ${signal}` };
  // ctr got every byte of the file and still ran out of tar: the archive itself is cut short.
  if (wholeFileSent && /unexpected EOF/.test(output)) {
    return { kind: 'corrupt', message: `the tar ends early (truncated archive): ${detail}` };
  }
  return { kind: 'import-failed', message: `ctr images import exited with status ${code}: ${detail || 'no output'}` };
}

/**
 * One attempt. With a checksum the agent relays the bytes (to hash them and hold back the tail);
 * without one the import reads the archive directly and the agent only watches its progress.
 */
export async function importArchiveOnce(opts: ImportAttemptOptions): Promise<ImportAttemptResult> {
  // The API importer writes content only; unpacking into snapshots is ctr's.
  if (opts.importer === 'ctr' || opts.unpack) return opts.archive.sha256 ? importRelayed(opts) : importDirect(opts);
  let session: GrpcSession;
  try {
    session = await GrpcSession.open(opts.target.socket, API_CONNECT_TIMEOUT_MS, `importing ${opts.archive.id}`);
  } catch (err) {
    throw new ImportAttemptError('import-failed', (err as Error).message, '');
  }
  const onAbort = (): void => session.close();
  opts.signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await (opts.archive.sha256 ? importRelayed(opts, session) : importDirect(opts, session));
  } catch (err) {
    if (!(err instanceof ApiImportUnusable) || opts.signal.aborted) throw err;
    // ctr reads the archive again from its start; what the API import wrote went with its lease.
    opts.target.onApiFallback?.(err.message);
    return opts.archive.sha256 ? importRelayed(opts) : importDirect(opts);
  } finally {
    opts.signal.removeEventListener('abort', onAbort);
    session.close();
  }
}

const API_CONNECT_TIMEOUT_MS = 10_000;
/** For each of the API importer's short calls (lease, manifest, record). */
const API_CALL_TIMEOUT_MS = 60_000;

/** The API importer cannot take this archive, or containerd's answer is not one it understands: ctr imports it. */
class ApiImportUnusable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ApiImportUnusable';
  }
}

/** An API import running beside the import group, reading the tar the group writes to fd 4. */
interface ApiSink {
  /** Tar bytes taken so far. */
  consumed(): number;
  /** The tar was read to its end and every file is in the content store. */
  ingested(): boolean;
  /** Once the group has exited: its failure, if any, else the importer's outcome (records created only now). */
  settle(groupFailure: Failure | null, output: string): Promise<ImportAttemptError | ApiImportUnusable | undefined>;
  /** Set when the attempt failed because the API importer cannot take the archive. */
  unusable(): ApiImportUnusable | undefined;
  /** Stops the importer; resolves once it has deleted its lease. */
  close(): Promise<void>;
}

/** Why an API import failed, as the attempt reports it. */
function apiFailure(err: unknown, archive: BundleArchive): ImportAttemptError | ApiImportUnusable {
  if (err instanceof NotForApiImportError) return new ApiImportUnusable(`${archive.id}: ${err.message}`);
  if (err instanceof ContainerdApiError && err.kind === 'unexpected' && err.grpcStatus === undefined) return new ApiImportUnusable(err.message);
  if (err instanceof TarFormatError || err instanceof DockerArchiveError) return new ImportAttemptError('corrupt', `the archive's tar is not valid: ${err.message}`, '');
  return new ImportAttemptError('import-failed', (err as Error).message, '');
}

function startApiSink(data: Readable, session: GrpcSession, opts: ImportAttemptOptions, fail: (kind: FailureKind, message: string) => void, running: () => boolean): ApiSink {
  const importer = new DockerArchiveApiImport(data, { session, namespace: opts.target.namespace, callTimeoutMs: API_CALL_TIMEOUT_MS });
  let allow!: () => void;
  let refuse!: (err: Error) => void;
  const recordsAllowed = new Promise<void>((resolve, reject) => ([allow, refuse] = [resolve, reject]));
  recordsAllowed.catch(() => undefined);
  let ingested = false;
  let unusable: ApiImportUnusable | undefined;
  const outcome = importer
    .run(() => {
      ingested = true;
      return recordsAllowed;
    })
    .then(
      () => undefined,
      (err: unknown) => apiFailure(err, opts.archive),
    );
  void outcome.then((bad) => {
    // Once the attempt has failed for another reason (or settles), the importer's own end is no news.
    if (!bad || !running()) return;
    if (bad instanceof ApiImportUnusable) unusable = bad;
    // Not reading on lets zstd end (broken pipe) instead of blocking on a full pipe.
    data.destroy();
    // containerd's failure ends the attempt at once; a bad tar waits for the group's exit, whose
    // own reason (zstd's, cat's) comes first when there is one.
    if (bad instanceof ApiImportUnusable || bad.kind !== 'corrupt') fail('import-failed', bad.message);
  });
  data.on('error', () => undefined);
  // containerd gone fails the attempt at once, also while the archive brings no bytes to write.
  void session.lost.then((why) => {
    if (running() && !opts.signal.aborted) fail('import-failed', `containerd's API at ${session.socket}: the connection went mid-import: ${why}`);
  });
  return {
    consumed: () => importer.consumed,
    ingested: () => ingested,
    unusable: () => unusable,
    async settle(groupFailure, output) {
      // zstd saw its reader stop: the importer's reason is the one that counts.
      const own = groupFailure && !/broken pipe|write error/i.test(output) ? groupFailure : null;
      if (own) {
        refuse(new Error(own.message));
        await outcome;
        return new ImportAttemptError(own.kind, own.message, output);
      }
      allow();
      const bad = await outcome;
      return bad ?? (groupFailure ? new ImportAttemptError(groupFailure.kind, groupFailure.message, output) : undefined);
    },
    async close() {
      refuse(new Error('the attempt ended'));
      data.destroy();
      await outcome;
    },
  };
}

/** Where an attempt stands at a tick: bytes still moving (the watchdog follows `measure`), or all of them through. */
type Progress = { state: 'moving'; measure: number; shownBytes: number; why: string } | { state: 'through' };

type Failure = { kind: FailureKind; message: string };

/** What one way of importing adds to the supervisor: its progress, how it settles, the streams it holds. */
interface AttemptWay {
  /** Undefined while not known yet (no tick then). */
  progress(): Progress | undefined | Promise<Progress | undefined>;
  /** Verb for the finish timeout: every byte was `read` / `sent`. */
  throughVerb: string;
  /** A failure seen while running, worded for the error (e.g. with cat's complaint). */
  failureMessage?(failure: Failure, output: string): string;
  /** The error for a failure seen while running, when it is not an ImportAttemptError of it. */
  failureError?(failure: Failure): Error | undefined;
  /** The outcome once the import group has exited and no failure was seen. */
  settle(code: number | null, signal: NodeJS.Signals | null, output: string): ImportAttemptResult | Error | Promise<ImportAttemptResult | Error>;
  /**
   * Stops listening on the attempt's own streams (a reader stuck in the kernel may keep them open);
   * resolves once the way has cleaned up after itself (the API importer's lease deleted).
   */
  close(): void | Promise<void>;
}

/**
 * Runs one import group (`script` under bash, in its own process group) and supervises it the same
 * way whichever way the bytes travel: the stall watchdog on bytes moved, the finish deadline once
 * every byte is through, the agent's abort signal, and one SIGKILL to the group for any of them.
 */
function superviseAttempt(
  opts: ImportAttemptOptions,
  script: string,
  stdin: 'pipe' | 'ignore',
  toAgent: boolean,
  start: (child: ReturnType<typeof spawn>, fail: (kind: FailureKind, message: string) => void, running: () => boolean) => AttemptWay,
): Promise<ImportAttemptResult> {
  return new Promise<ImportAttemptResult>((resolve, reject) => {
    if (opts.signal.aborted) return reject(opts.signal.reason ?? new Error('aborted'));
    const child = spawnImportGroup(opts, script, stdin, toAgent);
    let output = '';
    const collect = (b: Buffer): void => {
      output = tail(output + b.toString('utf8'));
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);

    let failure: Failure | undefined;
    let settled = false;
    const fail = (kind: FailureKind, message: string): void => {
      if (failure) return;
      failure = { kind, message };
      killGroup(child);
    };
    const way = start(child, fail, () => !failure && !settled);
    const tick = watchAttempt(opts, way, fail, () => failure !== undefined || settled);
    const onAbort = (): void => fail('import-failed', 'stopped: the agent is shutting down');
    opts.signal.addEventListener('abort', onAbort, { once: true });

    const finish = (code: number | null, sig: NodeJS.Signals | null): void => {
      if (settled) return;
      settled = true;
      clearInterval(tick);
      killGroup(child);
      // The API importer creates its records only now: settling may take a few calls (each with a deadline).
      void Promise.resolve(failure || opts.signal.aborted ? undefined : way.settle(code, sig, output)).then(async (outcome) => {
        opts.signal.removeEventListener('abort', onAbort);
        await way.close();
        if (opts.signal.aborted) return reject(opts.signal.reason ?? new Error('aborted'));
        if (failure) return reject(way.failureError?.(failure) ?? new ImportAttemptError(failure.kind, way.failureMessage?.(failure, output) ?? failure.message, output));
        if (outcome instanceof Error) reject(outcome);
        else resolve(outcome!);
      });
    };
    child.on('error', (err) => {
      fail('import-failed', `cannot start the import: ${err.message}`);
      finish(null, null);
    });
    settleAfterExit(child, finish);
  });
}

/** The import group: `script` under bash in its own process group, with the archive and ctr's arguments. */
function spawnImportGroup(opts: ImportAttemptOptions, script: string, stdin: 'pipe' | 'ignore', toAgent: boolean): ReturnType<typeof spawn> {
  const { archive } = opts;
  // Without ctr's argv the group writes the tar to fd 4, for the agent's own importer.
  const sink = toAgent ? [] : ctrImportArgs(opts.target, opts.unpack);
  return spawn('bash', ['-c', script, 'hvagent-preload', archive.archivePath, archive.compression, opts.zstd, ...sink], {
    detached: true,
    stdio: toAgent ? [stdin, 'pipe', 'pipe', 'pipe', 'pipe'] : [stdin, 'pipe', 'pipe', 'pipe'],
  });
}

function killGroup(child: ReturnType<typeof spawn>): void {
  try {
    if (child.pid) process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/**
 * Polls the way's progress: the stall watchdog while bytes move, the finish deadline once every byte
 * is through. One poll at a time; nothing once the attempt failed or settled.
 */
function watchAttempt(opts: ImportAttemptOptions, way: AttemptWay, fail: (kind: FailureKind, message: string) => void, over: () => boolean): NodeJS.Timeout {
  const now = opts.now ?? Date.now;
  const { archive } = opts;
  const watchdog = new StallWatchdog(opts.stallTimeoutMs, now);
  let throughSince: number | undefined;
  let polling = false;
  return setInterval(() => {
    if (over() || polling) return;
    polling = true;
    void Promise.resolve(way.progress()).then((p) => {
      polling = false;
      if (over() || !p) return;
      if (p.state === 'moving') {
        watchdog.observe(p.measure);
        if (watchdog.stalled()) {
          fail('stalled', `stalled: no bytes moved for ${Math.round(watchdog.idleMs() / 1000)} s at ${formatBytes(p.shownBytes)}${archive.sizeBytes ? ` of ${formatBytes(archive.sizeBytes)}` : ''}: ${p.why}`);
        }
        return;
      }
      throughSince ??= now();
      if (now() - throughSince >= opts.finishTimeoutMs) {
        fail('finish-timeout', `every byte was ${way.throughVerb} but ctr did not finish within ${Math.round(opts.finishTimeoutMs / 1000)} s`);
      }
    });
  }, Math.max(50, Math.min(1000, Math.floor(opts.stallTimeoutMs / 4))));
}

/** Settles once the group's leader exited: after its pipes delivered the last lines, or 2 s, whichever first. */
function settleAfterExit(child: ReturnType<typeof spawn>, finish: (code: number | null, sig: NodeJS.Signals | null) => void): void {
  child.on('exit', (code, sig) => {
    let done = false;
    const settle = (): void => {
      if (done) return;
      done = true;
      finish(code, sig);
    };
    child.once('close', settle);
    setTimeout(settle, 2000).unref();
  });
}

/** The import reads the archive itself; the agent follows the reader's rchar (its PID comes on fd 3). */
function importDirect(opts: ImportAttemptOptions, session?: GrpcSession): Promise<ImportAttemptResult> {
  const now = opts.now ?? Date.now;
  const started = now();
  const { archive } = opts;
  return superviseAttempt(opts, DIRECT_SCRIPT, 'ignore', session !== undefined, (child, fail, running) => {
    const api = session && startApiSink(child.stdio[4] as Readable, session, opts, fail, running);
    let pidText = '';
    let readerPid: number | undefined;
    const pidPipe = child.stdio[3] as Readable;
    pidPipe.on('data', (b: Buffer) => {
      pidText += b.toString('utf8');
      const m = /^(\d+)\n/.exec(pidText);
      if (m) readerPid = Number(m[1]);
    });
    pidPipe.on('error', () => undefined);
    let readBytes = 0;
    let readingDone = false;
    return {
      throughVerb: 'read',
      async progress() {
        if (readerPid === undefined) return undefined;
        const n = await bytesReadBy(readerPid);
        if (!running()) return undefined;
        if (n === undefined) readingDone = true;
        else readBytes = archive.sizeBytes !== undefined ? Math.min(n, archive.sizeBytes) : n;
        if (archive.sizeBytes !== undefined && readBytes >= archive.sizeBytes) readingDone = true;
        opts.onBytes?.(readBytes);
        return readingDone && (!api || api.ingested())
          ? { state: 'through' }
          : { state: 'moving', measure: readBytes + (api?.consumed() ?? 0), shownBytes: readBytes, why: 'the import stopped reading the archive (hung or very slow medium, or containerd stopped accepting data)' };
      },
      failureError: () => api?.unusable(),
      async settle(code, sig, output) {
        const bad = classifyExit(code, sig, output, true);
        const failed = api ? await api.settle(bad, output) : bad && new ImportAttemptError(bad.kind, bad.message, output);
        if (failed) return failed;
        const bytes = archive.sizeBytes ?? readBytes;
        opts.onBytes?.(bytes);
        return { bytes, durationMs: now() - started };
      },
      async close() {
        pidPipe.destroy();
        await api?.close();
      },
    };
  });
}

/** The agent relays the archive from `cat` (fd 3) to the import's stdin, hashing it and holding back its tail. */
function importRelayed(opts: ImportAttemptOptions, session?: GrpcSession): Promise<ImportAttemptResult> {
  const now = opts.now ?? Date.now;
  const started = now();
  return superviseAttempt(opts, SCRIPT, 'pipe', session !== undefined, (child, fail, running) => {
    const source = child.stdio[3] as Readable;
    const sink = child.stdin as Writable;
    const relay = relayArchive(source, sink, opts, fail, running);
    const api = session && startApiSink(child.stdio[4] as Readable, session, opts, fail, running);
    const delivered = (): number => relay.written - sink.writableLength;
    return {
      throughVerb: 'sent',
      progress() {
        if (relay.phase === 'finishing' && delivered() >= relay.written && (!api || api.ingested())) return { state: 'through' };
        const side = source.isPaused() || relay.phase === 'finishing' ? 'ctr/containerd stopped accepting data' : 'reading the archive stopped (hung or very slow medium?)';
        return { state: 'moving', measure: relay.readBytes + delivered() + (api?.consumed() ?? 0), shownBytes: relay.readBytes, why: side };
      },
      failureError: () => api?.unusable(),
      failureMessage(f, output) {
        // A short read: cat's own complaint (EIO, EISDIR, …) says why.
        const cat = output.split('\n').filter((l) => l.startsWith('cat:')).slice(-2).join(' | ');
        return f.kind === 'read-failed' && cat ? `${f.message}: ${cat}` : f.message;
      },
      async settle(code, sig, output) {
        const early: Failure | null =
          relay.phase === 'finishing'
            ? null
            : { kind: 'import-failed', message: `the import finished before the whole archive was sent (${formatBytes(relay.readBytes)} read): trailing data after the tar?` };
        const bad = classifyExit(code, sig, output, relay.phase === 'finishing') ?? early;
        // The API importer's records wait for this: only an archive whose sha256 checked out gets them.
        const failed = api ? await api.settle(bad, output) : bad && new ImportAttemptError(bad.kind, bad.message, output);
        if (failed) return failed;
        return { bytes: relay.readBytes, sha256: relay.sha256, durationMs: now() - started };
      },
      async close() {
        source.destroy();
        sink.destroy();
        await api?.close();
      },
    };
  });
}

/** Where a relay stands: bytes read from the archive and written to ctr, and whether the whole read checked out. */
interface RelayState {
  readBytes: number;
  written: number;
  /** 'finishing' once the whole archive was read, its size and sha256 right, and the held-back tail sent. */
  phase: 'streaming' | 'finishing';
  sha256?: string;
}

/**
 * Copies `source` to `sink` with backpressure, hashing it and holding back its last bytes until the
 * archive's size and sha256 check out: a corrupt archive never reaches ctr whole, so ctr never
 * commits it.
 */
function relayArchive(source: Readable, sink: Writable, opts: ImportAttemptOptions, fail: (kind: FailureKind, message: string) => void, running: () => boolean): RelayState {
  const holdBack = opts.holdBackBytes ?? HOLD_BACK_BYTES;
  const { archive } = opts;
  const expected = archive.sha256;
  // Hashing costs CPU on every byte: only when there is a checksum to verify.
  const hash = expected ? createHash('sha256') : undefined;
  const st: RelayState = { readBytes: 0, written: 0, phase: 'streaming' };
  const held: Buffer[] = [];
  let heldBytes = 0;
  const writeOut = (chunk: Buffer): void => {
    st.written += chunk.length;
    if (!sink.write(chunk)) source.pause();
  };
  sink.on('drain', () => {
    if (st.phase === 'streaming' && running()) source.resume();
  });
  // EPIPE when ctr died: the exit status says why.
  sink.on('error', () => undefined);
  source.on('error', () => undefined);
  source.on('data', (chunk: Buffer) => {
    if (!running()) return;
    hash?.update(chunk);
    st.readBytes += chunk.length;
    held.push(chunk);
    heldBytes += chunk.length;
    while (held.length > 1 && heldBytes - held[0]!.length >= holdBack) {
      const c = held.shift()!;
      heldBytes -= c.length;
      writeOut(c);
    }
    opts.onBytes?.(st.readBytes);
  });
  source.on('end', () => {
    if (!running()) return;
    // A short read is the medium's fault (worth a retry), not the archive's: check it first.
    if (archive.sizeBytes !== undefined && st.readBytes !== archive.sizeBytes) {
      fail('read-failed', `read ${st.readBytes} bytes but the file has ${archive.sizeBytes}: the medium returned a short read`);
      return;
    }
    st.sha256 = hash?.digest('hex');
    if (expected && st.sha256 !== expected) {
      fail('checksum-mismatch', `checksum mismatch: the bundle says sha256 ${expected}, the ${formatBytes(st.readBytes)} read hash to ${st.sha256}`);
      return;
    }
    st.phase = 'finishing';
    for (const c of held.splice(0)) {
      st.written += c.length;
      sink.write(c);
    }
    heldBytes = 0;
    sink.end();
  });
  return st;
}
