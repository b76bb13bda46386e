/** The few ctr calls the preload needs, each with a deadline (lib/exec run()). */
import { stat } from 'node:fs/promises';
import { run, CommandError } from '../../lib/exec.js';

export interface CtrTarget {
  ctr: string;
  socket: string;
  namespace: string;
}

/**
 * Why ctr cannot reach containerd without asking it: no socket at the address. A ctr run is a Go
 * process start (seconds of CPU on a booting node) and the preload waits while containerd starts.
 */
async function noSocket(t: CtrTarget): Promise<string | null> {
  const st = await stat(t.socket).catch((err: NodeJS.ErrnoException) => err.code ?? 'unreadable');
  if (typeof st === 'string') return st === 'ENOENT' ? 'no socket there yet' : `cannot stat it: ${st}`;
  return st.isSocket() ? null : 'it is not a socket';
}

/** Null when containerd answers, else the reason (for the diagnosis). */
export async function containerdProblem(t: CtrTarget): Promise<string | null> {
  const missing = await noSocket(t);
  if (missing) return `containerd at ${t.socket} does not answer: ${missing}`;
  try {
    await run(t.ctr, ['-a', t.socket, '--connect-timeout', '2s', 'version'], { timeoutMs: 15_000 });
    return null;
  } catch (err) {
    const msg = err instanceof CommandError ? (err.stderr.trim().split('\n').pop() ?? err.message) : (err as Error).message;
    return `containerd at ${t.socket} does not answer: ${msg}`;
  }
}

/** The image names in the namespace (digest-only entries left out). */
export async function listImages(t: CtrTarget): Promise<Set<string>> {
  const missing = await noSocket(t);
  if (missing) throw new Error(`cannot list the images: containerd at ${t.socket} does not answer: ${missing}`);
  const r = await run(t.ctr, ['-a', t.socket, '--connect-timeout', '5s', '-n', t.namespace, 'images', 'ls', '-q'], { timeoutMs: 60_000 });
  return new Set(
    r.stdout
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('sha256:')),
  );
}

export async function removeImages(t: CtrTarget, images: readonly string[]): Promise<void> {
  if (images.length === 0) return;
  await run(t.ctr, ['-a', t.socket, '--connect-timeout', '5s', '-n', t.namespace, 'images', 'rm', ...images], { timeoutMs: 60_000 });
}
