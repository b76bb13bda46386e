/**
 * What the preload asks containerd, each with a deadline: whether it answers and which images it
 * holds over its API (containerd-api.ts), with ctr (lib/exec run()) behind it for a containerd
 * whose answer the API client does not understand; removing images through ctr.
 */
import { stat } from 'node:fs/promises';
import { run, CommandError } from '../../lib/exec.js';
import type { Logger } from '../../lib/logger.js';
import { apiImageNames, apiVersion, ContainerdApiError } from './containerd-api.js';

export interface CtrTarget {
  ctr: string;
  socket: string;
  namespace: string;
  /** Told each time ctr was asked instead of containerd's API: an answer the client cannot use, or an archive the API importer does not take. */
  onApiFallback?: (why: string) => void;
}

/**
 * An onApiFallback that logs each distinct reason once: the answer is still right (ctr gave it),
 * but every such ask is a Go process start the API was there to save, and the reason is what to report.
 */
export function warnEachApiFallback(log: Logger): (why: string) => void {
  const seen = new Set<string>();
  return (why) => {
    if (seen.has(why)) return;
    seen.add(why);
    log.warn("containerd's API could not be used for this: ctr was asked instead", { why });
  };
}

/**
 * Why containerd cannot answer, without asking it: no socket at the address (the preload polls
 * while containerd starts; a stat is cheaper than a connection, let alone a ctr run).
 */
async function noSocket(t: CtrTarget): Promise<string | null> {
  const st = await stat(t.socket).catch((err: NodeJS.ErrnoException) => err.code ?? 'unreadable');
  if (typeof st === 'string') return st === 'ENOENT' ? 'no socket there yet' : `cannot stat it: ${st}`;
  return st.isSocket() ? null : 'it is not a socket';
}

function lastLine(err: unknown): string {
  return err instanceof CommandError ? (err.stderr.trim().split('\n').pop() ?? err.message) : (err as Error).message;
}

/** ctr failed after the API's answer could not be used: both reasons. */
class CtrAfterApiError extends Error {
  constructor(
    readonly ctrError: Error,
    readonly why: string,
  ) {
    super(`${ctrError.message} (${why})`);
    this.name = 'CtrAfterApiError';
  }
}

/**
 * Asks the API first; where it got an answer it could not use, ctr asks again (the API client is
 * this file's, ctr is containerd's own). Where nothing answered the API, ctr would not reach it
 * either, and is not started.
 */
async function apiThenCtr<T>(t: CtrTarget, api: () => Promise<T>, ctr: () => Promise<T>, what: string): Promise<T> {
  try {
    return await api();
  } catch (err) {
    if (!(err instanceof ContainerdApiError) || err.kind === 'unreachable') throw err;
    t.onApiFallback?.(err.message);
    try {
      return await ctr();
    } catch (ctrErr) {
      throw new CtrAfterApiError(ctrErr as Error, `ctr asked because ${what} over the API failed: ${err.message}`);
    }
  }
}

/** Null when containerd answers, else the reason (for the diagnosis). */
export async function containerdProblem(t: CtrTarget): Promise<string | null> {
  const missing = await noSocket(t);
  if (missing) return `containerd at ${t.socket} does not answer: ${missing}`;
  try {
    await apiThenCtr(
      t,
      () => apiVersion(t.socket, { connectTimeoutMs: 2_000, timeoutMs: 15_000 }),
      async () => (await run(t.ctr, ['-a', t.socket, '--connect-timeout', '2s', 'version'], { timeoutMs: 15_000 })).stdout,
      'its version',
    );
    return null;
  } catch (err) {
    const reason = err instanceof CtrAfterApiError ? `${lastLine(err.ctrError)} (${err.why})` : lastLine(err);
    return `containerd at ${t.socket} does not answer: ${reason}`;
  }
}

/** The image names in the namespace (digest-only entries left out, as `ctr images ls -q` lists them). */
export async function listImages(t: CtrTarget): Promise<Set<string>> {
  const missing = await noSocket(t);
  if (missing) throw new Error(`cannot list the images: containerd at ${t.socket} does not answer: ${missing}`);
  const names = await apiThenCtr(
    t,
    () => apiImageNames(t.socket, { namespace: t.namespace, connectTimeoutMs: 5_000, timeoutMs: 60_000 }),
    async () => {
      const r = await run(t.ctr, ['-a', t.socket, '--connect-timeout', '5s', '-n', t.namespace, 'images', 'ls', '-q'], { timeoutMs: 60_000 });
      return r.stdout.split('\n');
    },
    'the image list',
  );
  return new Set(names.map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('sha256:')));
}

export async function removeImages(t: CtrTarget, images: readonly string[]): Promise<void> {
  if (images.length === 0) return;
  await run(t.ctr, ['-a', t.socket, '--connect-timeout', '5s', '-n', t.namespace, 'images', 'rm', ...images], { timeoutMs: 60_000 });
}
