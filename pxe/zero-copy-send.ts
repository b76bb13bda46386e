/**
 * Artifact bodies over plain HTTP with sendfile(2): the kernel hands page-cache pages to the
 * socket, where streaming (file-stream.ts) copies every byte twice through user space. Node 20 has
 * no sendfile, so a small addon (native/zero-copy-send.c, built by `make build`) runs each
 * transfer's sendfile loop on a thread of its own. Where it cannot be used (the addon is not
 * built, TLS, a response still queued behind a pipelined one, a file system without sendfile,
 * every allowed thread busy), the body is streamed: the client gets the same bytes either way.
 */
import { createRequire } from 'node:module';
import type http from 'node:http';
import type { FileHandle } from 'node:fs/promises';
import { streamFileRange } from './file-stream.js';
import type { ArtifactSendVia } from './http.js';

/** The addon's interface (native/zero-copy-send.c). */
export interface ZeroCopySender {
  send(socketFd: number, fileFd: number, offset: number, length: number, stallMs: number, done: (code: string | null, sent: number) => void): unknown;
  cancel(handle: unknown): void;
}

export type SenderLoad = { sender: ZeroCopySender } | { unavailable: string };

/** Where `make build` puts the addon: next to this module in dist/, or in dist/ when run from source (tests). */
const ADDON_CANDIDATES = ['./native/zero-copy-send.node', '../dist/pxe/native/zero-copy-send.node'];

/** Loads the addon from the first candidate that exists; the reason when none loads. */
export function loadZeroCopySender(candidates: readonly string[] = ADDON_CANDIDATES, from: string = import.meta.url): SenderLoad {
  const require = createRequire(from);
  const failures: string[] = [];
  for (const c of candidates) {
    try {
      const m = require(c) as Partial<ZeroCopySender>;
      if (typeof m.send === 'function' && typeof m.cancel === 'function') return { sender: m as ZeroCopySender };
      failures.push(`${c}: not hvpxe's zero-copy addon`);
    } catch (err) {
      failures.push(`${c}: ${(err as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' ? 'not built' : (err as Error).message.split('\n')[0]}`);
    }
  }
  return { unavailable: `the sendfile addon could not be loaded (${failures.join('; ')}); run 'make build' to build it` };
}

let loaded: SenderLoad | undefined;
/** The addon, loaded once per process. */
export function zeroCopySender(): SenderLoad {
  loaded ??= loadZeroCopySender();
  return loaded;
}

/** How artifact bodies go out, for the start-up log line: the operator sees when sendfile is not used, and why. */
export function artifactSendMode(tls: boolean, load: SenderLoad = zeroCopySender()): string {
  if (tls) return 'streamed (TLS: the bytes are encrypted in user space)';
  return 'sender' in load ? 'sendfile' : `streamed (${load.unavailable})`;
}

/** The descriptor of a plain TCP socket libuv owns; undefined for TLS or a socket without one. */
function plainSocketFd(socket: NonNullable<http.ServerResponse['socket']>): number | undefined {
  if ((socket as { encrypted?: boolean }).encrypted) return undefined;
  const fd = (socket as unknown as { _handle?: { fd?: unknown } })._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : undefined;
}

/** The empty write whose callback says the head has reached the kernel. */
const EMPTY = Buffer.alloc(0);

/** Transfers each sender has running (a thread each). */
const running = new WeakMap<ZeroCopySender, number>();

/** Errors of a first sendfile that mean "not from this file or to this socket", not a failed transfer. */
const UNSUPPORTED = new Set(['EINVAL', 'ENOSYS', 'EOVERFLOW']);

/**
 * Sends bytes [start, end] of `fh` as the body of `res`, whose head the caller has set with
 * writeHead; resolves to the bytes handed to the socket once the response is complete or abandoned
 * (client gone, no byte accepted for `stallMs`, the file shrank: the connection is destroyed, so
 * the client sees a short body). `fh` may be closed once this resolves: the thread sends from a
 * duplicate of its descriptor. With `maxThreads` transfers already sending, the body is streamed:
 * many clients cost memory then, never an unbounded number of threads. `report.via` says which
 * way the body went once it starts (for the request log and /metrics).
 */
export function sendFileBody(
  load: SenderLoad,
  fh: FileHandle,
  res: http.ServerResponse,
  start: number,
  end: number,
  opts: { chunk: number; stallMs: number; maxThreads: number },
  report: { via?: ArtifactSendVia } = {},
): Promise<number> {
  const socket = res.socket;
  const fd = socket ? plainSocketFd(socket) : undefined;
  const streamAll = (): Promise<number> => {
    report.via = 'streamed';
    return streamFileRange(fh, res, start, end, opts.chunk);
  };
  if (!('sender' in load) || !socket || fd === undefined || (running.get(load.sender) ?? 0) >= opts.maxThreads) return streamAll();
  const { sender } = load;
  running.set(sender, (running.get(sender) ?? 0) + 1);
  let counted = true;
  // The thread slot is held from here until the transfer is done or streamed instead.
  const release = (): void => {
    if (counted) running.set(sender, running.get(sender)! - 1);
    counted = false;
  };
  return new Promise((resolve) => {
    let settled = false;
    const finish = (sent: number, destroy: boolean): void => {
      release();
      if (settled) return;
      settled = true;
      res.off('close', beforeSend);
      if (destroy) res.destroy();
      resolve(sent);
    };
    const stream = (): void => {
      release();
      settled = true;
      res.off('close', beforeSend);
      void streamAll().then(resolve);
    };
    // Gone before the body started: a write callback may never come once the socket is gone.
    const beforeSend = (): void => finish(0, true);
    res.on('close', beforeSend);
    res.flushHeaders();
    // The callback of an empty write runs once everything queued before it, the head included, is
    // in the kernel's socket buffer: the body's bytes go after it.
    socket.write(EMPTY, (err) => {
      if (settled) return;
      if (err || res.destroyed || socket.destroyed) return finish(0, true);
      // The thread keeps the socket busy where Node cannot see it: the idle timeout would cut a
      // healthy download, so the addon's stall deadline stands in for it meanwhile.
      const idleTimeout = socket.timeout ?? 0;
      let handle: unknown;
      const onClose = (): void => sender.cancel(handle);
      const done = (code: string | null, sent: number): void => {
        release(); // the thread has ended
        res.off('close', onClose);
        if (socket.destroyed) return finish(sent, false);
        socket.setTimeout(idleTimeout);
        if (code && sent === 0 && UNSUPPORTED.has(code)) return stream();
        if (code) return finish(sent, true);
        // end's callback waits for 'finish', which a socket gone meanwhile never sends: 'close' ends the wait.
        res.once('close', () => finish(sent, false));
        res.end(() => finish(sent, false));
      };
      try {
        handle = sender.send(fd, fh.fd, start, end - start + 1, opts.stallMs, done);
      } catch {
        // No descriptor or thread to spare: this one response is streamed.
        return stream();
      }
      report.via = 'sendfile';
      socket.setTimeout(0);
      res.off('close', beforeSend);
      res.on('close', onClose);
    });
  });
}
