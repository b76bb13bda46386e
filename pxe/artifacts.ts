/**
 * GET /artifacts/<path>: files under --root (kernels, initrds, root images, ISOs), with Range,
 * ETag, If-None-Match, If-Modified-Since and If-Range, sent by zero-copy-send.ts (sendfile, or
 * streamed by file-stream.ts). Artifacts are public (they hold nothing secret): no credential is
 * checked on this path, which is the one that carries the bytes.
 */
import type http from 'node:http';
import { checkRequestPath, openInsideRoot, type OpenedFile } from './safe-path.js';
import { LIMITS, TEXT, type RequestContext, type RequestNote, type Route } from './http.js';
import type { ServeContext } from './serve-context.js';
import type { ArtifactOrigin } from './artifact-origin.js';
import { sendFileBody, zeroCopySender } from './zero-copy-send.js';

/**
 * The Content-Type of a file under /artifacts/: the media types UEFI defines for HTTP Boot where
 * the name says what the file is (an EFI binary, an ISO the firmware mounts as a RAM disk; edk2's
 * NetworkPkg HttpBootDxe reads these first, the name's extension only when they are absent), else
 * application/octet-stream. `.img` stays octet-stream: initrds are named so too.
 */
export function artifactContentType(name: string): string {
  const ext = /\.([A-Za-z0-9]+)$/.exec(name)?.[1]?.toLowerCase();
  if (ext === 'efi') return 'application/efi';
  if (ext === 'iso') return 'application/vnd.efi-iso';
  return 'application/octet-stream';
}

function etagOf(st: { mtimeMs: number; size: number; ino: number }): string {
  return `"${Math.floor(st.mtimeMs).toString(16)}-${st.size.toString(16)}-${st.ino.toString(16)}"`;
}

function etagMatches(header: string, etag: string): boolean {
  if (header.trim() === '*') return true;
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === etag);
}

/** Parses one `bytes=` range against a size. undefined: ignore the header (serve 200); 'unsatisfiable': 416. */
export function parseRange(header: string, size: number): { start: number; end: number } | 'unsatisfiable' | undefined {
  const m = /^bytes=\s*(\d*)\s*-\s*(\d*)\s*$/.exec(header);
  if (!m) return undefined; // multiple ranges or another unit: a 200 with the whole body is allowed
  const [, a, b] = m;
  if (a === '' && b === '') return undefined;
  if (a === '') {
    const n = Number(b);
    if (n === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(a);
  const end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  if (b !== '' && Number(b) < start) return undefined;
  if (start >= size) return 'unsatisfiable';
  return { start, end };
}

/** What one artifact request got: status, bytes sent. */
export interface ArtifactReply {
  status: number;
  bytes: number;
}

/** Serves an artifact (or `<declared artifact>.sha256`); returns what was sent, undefined for a 404. */
/** A declared artifact not under --root, from the origin's verified cache (artifact-origin.ts); only reached when the local file is missing. */
async function fromOrigin(c: RequestContext, rel: string, origin: ArtifactOrigin | undefined): Promise<OpenedFile | undefined> {
  const declared = c.state.artifactsByPath.get(rel);
  return declared?.origin && origin ? origin.open(rel, declared.sha256) : undefined;
}

export async function serveArtifact(c: RequestContext, encoded: string, origin?: ArtifactOrigin): Promise<(ArtifactReply & { path: string }) | undefined> {
  const check = checkRequestPath(encoded);
  if (!check.ok) return void c.reply(404, 'not found\n');
  const rel = check.segments.join('/');
  const file = (await openInsideRoot(c.state.rootReal, check.segments)) ?? (await fromOrigin(c, rel, origin));
  if (!file) {
    // `<artifact>.sha256` (sha256sum format) for every declared artifact, so the installer can verify an ISO.
    if (c.state.artifactsByPath.get(rel)?.origin) {
      c.reply(503, 'this artifact comes from the artifacts origin, which cannot be reached now (or served other bytes); retry shortly\n', TEXT, { 'Retry-After': '30' });
      return undefined;
    }
    const declared = rel.endsWith('.sha256') ? c.state.artifactsByPath.get(rel.slice(0, -'.sha256'.length)) : undefined;
    if (declared) c.reply(200, `${declared.sha256}  ${check.segments.at(-1)!.slice(0, -'.sha256'.length)}\n`, TEXT);
    else c.reply(404, 'not found\n');
    return undefined;
  }
  const r = await serveFile(c.req, c.res, file, artifactContentType(check.segments.at(-1)!), c.note.fileReply);
  c.note.status = r.status;
  c.note.bytes = r.bytes;
  return { ...r, path: rel };
}

/** The conditional and range headers' answer: 304, 416, or what to send. */
function plan(req: http.IncomingMessage, stat: OpenedFile['stat'], headers: Record<string, string>): { status: 304 } | { status: 416 } | { status: 200 | 206; start: number; end: number } {
  const etag = headers.ETag;
  const lastModified = headers['Last-Modified'];
  const inm = req.headers['if-none-match'];
  const ims = req.headers['if-modified-since'];
  if ((inm !== undefined && etagMatches(inm, etag)) || (inm === undefined && ims !== undefined && Date.parse(ims) >= Math.floor(stat.mtimeMs / 1000) * 1000)) return { status: 304 };
  const rangeHeader = req.headers.range;
  const ifRange = req.headers['if-range'];
  if (rangeHeader !== undefined && (ifRange === undefined || ifRange === etag || ifRange === lastModified)) {
    const r = parseRange(rangeHeader, stat.size);
    if (r === 'unsatisfiable') return { status: 416 };
    if (r) return { status: 206, ...r };
  }
  return { status: 200, start: 0, end: stat.size - 1 };
}

async function serveFile(req: http.IncomingMessage, res: http.ServerResponse, file: OpenedFile, contentType: string, reply: RequestNote['fileReply']): Promise<ArtifactReply> {
  const { fh, stat } = file;
  try {
    const lastModified = new Date(Math.floor(stat.mtimeMs / 1000) * 1000).toUTCString();
    const headers: Record<string, string> = { ETag: etagOf(stat), 'Last-Modified': lastModified, 'Accept-Ranges': 'bytes', 'Content-Type': contentType };
    const p = plan(req, stat, headers);
    if (p.status === 304) {
      res.writeHead(304, headers);
      res.end();
      return { status: 304, bytes: 0 };
    }
    if (p.status === 416) {
      const body = 'requested range not satisfiable\n';
      res.writeHead(416, { ...headers, 'Content-Range': `bytes */${stat.size}`, 'Content-Type': TEXT, 'Content-Length': String(body.length) });
      res.end(req.method === 'HEAD' ? undefined : body);
      return { status: 416, bytes: 0 };
    }
    if (p.status === 206) headers['Content-Range'] = `bytes ${p.start}-${p.end}/${stat.size}`;
    const length = stat.size === 0 ? 0 : p.end - p.start + 1;
    headers['Content-Length'] = String(length);
    reply.status = p.status;
    reply.length = length;
    res.writeHead(p.status, headers);
    if (req.method === 'HEAD' || length === 0) {
      res.end();
      return { status: p.status, bytes: 0 };
    }
    return { status: p.status, bytes: await sendFileBody(zeroCopySender(), fh, res, p.start, p.end, { chunk: LIMITS.readChunk, stallMs: LIMITS.idleSocketMs, maxThreads: LIMITS.sendfileThreads }, reply) };
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** GET /artifacts/<path>, attributed to the machine last seen at the client's address (for /machines). */
export function artifactRoutes(ctx: ServeContext): Route[] {
  const handle = async (c: RequestContext, encoded: string): Promise<void> => {
    c.note.machine = ctx.book.machineAt(c.client);
    const r = await serveArtifact(c, encoded, ctx.origin);
    if (r) ctx.book.fetched(c.client, r.path, r);
  };
  return [{ path: '/artifacts/', handle }];
}
