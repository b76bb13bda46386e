/**
 * The plumbing every hvpxe HTTP route shares: limits, the request context, routing by path, plain
 * replies and bounded bodies. The routes are in routes-*.ts and artifacts.ts.
 */
import type http from 'node:http';
import type { ServedState } from './state.js';

export const LIMITS = {
  maxHeaderSize: 16 * 1024,
  maxUrlLength: 4096,
  headersTimeoutMs: 20_000,
  requestTimeoutMs: 60_000,
  idleSocketMs: 120_000,
  readChunk: 512 * 1024,
  /** Artifact downloads sent by sendfile threads at once (zero-copy-send.ts); more are streamed. */
  sendfileThreads: 512,
} as const;

export const TEXT = 'text/plain; charset=utf-8';

/** How an artifact's body went out: the sendfile thread, or streamed through hvpxe's buffers. */
export type ArtifactSendVia = 'sendfile' | 'streamed';
export const JSON_TYPE = 'application/json';

/** What the request log line reports, filled in as the request is handled. */
export interface RequestNote {
  status: number;
  bytes: number;
  machine?: string;
  /** The route that answered (its label in /metrics); unset for requests no route took. */
  route?: string;
  /**
   * Set by serveFile before it writes the head (headers given to writeHead are not readable back),
   * and `via` as the body starts (zero-copy-send.ts).
   */
  fileReply: { status: number; length: number; via?: ArtifactSendVia };
}

export interface RequestContext {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  state: ServedState;
  query: URLSearchParams;
  /** The client's address ('' when the socket is already gone). */
  client: string;
  reply: (code: number, body: string, type?: string, extra?: Record<string, string>) => void;
  note: RequestNote;
}

/** A path, a prefix (ends with `/`: the rest is the parameter) or a pattern (its first group is). */
export interface Route {
  path: string | RegExp;
  /** The route's name in /metrics (default: the path). */
  label?: string;
  /** The method it answers: GET (and HEAD) by default. */
  method?: 'GET' | 'POST';
  handle: (c: RequestContext, param: string) => void | Promise<void>;
}

export function findRoute(routes: readonly Route[], pathname: string): { route: Route; param: string } | undefined {
  for (const route of routes) {
    const p = route.path;
    if (typeof p !== 'string') {
      const m = p.exec(pathname);
      if (m) return { route, param: m[1] ?? '' };
    } else if (p.endsWith('/') ? pathname.startsWith(p) : pathname === p) {
      return { route, param: pathname.slice(p.length) };
    }
  }
  return undefined;
}

export function routeLabel(r: Route): string {
  return r.label ?? String(r.path);
}

export function send(res: http.ServerResponse, status: number, body: string, type = TEXT, extra: Record<string, string> = {}): number {
  const buf = Buffer.from(body);
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': String(buf.length), ...extra });
  res.end(res.req.method === 'HEAD' ? undefined : buf);
  return buf.length;
}

/** Reads a request body up to `max` bytes; undefined (and the rest discarded) when it is larger. */
export function readBounded(req: http.IncomingMessage, max: number): Promise<Buffer | undefined> {
  const declared = Number(req.headers['content-length'] ?? '0');
  if (declared > max) {
    req.resume();
    return Promise.resolve(undefined);
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= max) chunks.push(c);
      else chunks.length = 0;
    });
    req.on('end', () => resolve(size > max ? undefined : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

