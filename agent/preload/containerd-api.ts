/**
 * The two questions the preload asks containerd most often (does it answer, which images does it
 * hold), asked over containerd's own gRPC API on its socket instead of through `ctr`: a ctr run is
 * a Go process start, 0.5–2.6 s of CPU on a booting node under emulation, and the preload asks before
 * and after every pass and while it waits for containerd to start. The calls are plain unary gRPC
 * over cleartext HTTP/2 (node:http2) with hand-read protobuf; the services and field numbers are
 * containerd's (containerd/containerd: api/services/version/v1/version.proto,
 * api/services/images/v1/images.proto), stable across 1.x and 2.x.
 */
import http2 from 'node:http2';
import net from 'node:net';

/**
 * `unreachable`: nothing at the socket spoke HTTP/2 within the deadline (refused, reset, silent): ctr
 * would fail the same way. `unexpected`: something answered but not as containerd's API does, so a
 * caller may still ask ctr.
 */
export class ContainerdApiError extends Error {
  constructor(
    readonly kind: 'unreachable' | 'unexpected',
    message: string,
  ) {
    super(message);
    this.name = 'ContainerdApiError';
  }
}

export interface ApiCallOptions {
  /** containerd's namespace header (the images service needs one). */
  namespace?: string;
  /** Until the server's HTTP/2 settings arrive. */
  connectTimeoutMs: number;
  /** For the whole call. */
  timeoutMs: number;
}

/** grpc-message is percent-encoded (gRPC over HTTP/2, "Responses"). */
function grpcMessage(v: unknown): string {
  if (typeof v !== 'string' || v === '') return '';
  try {
    return decodeURIComponent(v);
  } catch {
    return v;
  }
}

/** What came back on a call's stream: the HTTP status, the gRPC status (headers or trailers) and the body. */
interface RawReply {
  httpStatus: unknown;
  status: unknown;
  statusMessage: unknown;
  body: Buffer;
}

/** The one message of a finished unary call, or why there is none. Pure. */
function replyMessage(r: RawReply, where: string): Buffer | ContainerdApiError {
  const unexpected = (why: string) => new ContainerdApiError('unexpected', `${where}: ${why}`);
  if (r.httpStatus !== 200) return unexpected(`HTTP status ${String(r.httpStatus)}, not a gRPC reply`);
  if (r.status === undefined) return unexpected('the reply carries no grpc-status');
  if (String(r.status) !== '0') {
    const text = grpcMessage(r.statusMessage);
    return unexpected(`gRPC status ${String(r.status)}${text ? `: ${text}` : ''}`);
  }
  const b = r.body;
  if (b.length < 5) return unexpected(`the reply has no message (${b.length} bytes)`);
  if (b[0] !== 0) return unexpected(`the reply is compressed (flag ${b[0]}), which was not asked for`);
  const len = b.readUInt32BE(1);
  if (b.length !== 5 + len) return unexpected(`the reply's frame says ${len} bytes, ${b.length - 5} came`);
  return b.subarray(5);
}

function requestHeaders(method: string, o: ApiCallOptions): http2.OutgoingHttpHeaders {
  const headers: http2.OutgoingHttpHeaders = {
    ':method': 'POST',
    ':path': method,
    'content-type': 'application/grpc',
    te: 'trailers',
    'grpc-timeout': `${Math.max(1, Math.ceil(o.timeoutMs))}m`,
  };
  if (o.namespace) headers['containerd-namespace'] = o.namespace;
  return headers;
}

/** A gRPC length-prefixed message, uncompressed. */
function grpcFrame(message: Buffer): Buffer {
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  return frame;
}

/** One unary call: `message` (protobuf bytes) to `method` ("/pkg.Service/Method"); resolves to the reply's bytes. */
export function grpcUnary(socket: string, method: string, message: Buffer, o: ApiCallOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let connected = false;
    let settled = false;
    // The socket's own error (ENOENT, ECONNREFUSED) says more than the stream's "canceled" built on it.
    let socketError: Error | undefined;
    const conn = net.connect(socket);
    conn.on('error', (err) => (socketError ??= err));
    const session = http2.connect('http://localhost', { createConnection: () => conn });
    const finish = (outcome: Buffer | ContainerdApiError): void => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      clearTimeout(callTimer);
      session.destroy();
      conn.destroy();
      if (outcome instanceof ContainerdApiError) reject(outcome);
      else resolve(outcome);
    };
    const where = `containerd's API at ${socket} (${method})`;
    const failed = (err: Error): ContainerdApiError =>
      new ContainerdApiError(connected ? 'unexpected' : 'unreachable', `${where}: ${(socketError ?? err).message}`);
    const connectTimer = setTimeout(() => finish(new ContainerdApiError('unreachable', `${where}: no HTTP/2 answer within ${o.connectTimeoutMs} ms`)), o.connectTimeoutMs);
    const callTimer = setTimeout(() => finish(failed(new Error(`no reply within ${o.timeoutMs} ms`))), o.timeoutMs);
    session.on('remoteSettings', () => {
      connected = true;
      clearTimeout(connectTimer);
    });
    session.on('error', (err: Error) => finish(failed(err)));
    session.on('close', () => finish(failed(new Error('the connection closed before a reply'))));

    const req = session.request(requestHeaders(method, o));
    req.end(grpcFrame(message));
    const chunks: Buffer[] = [];
    const reply: RawReply = { httpStatus: undefined, status: undefined, statusMessage: undefined, body: Buffer.alloc(0) };
    req.on('response', (h) => {
      reply.httpStatus = h[':status'];
      // A call that fails at once answers with headers only ("Trailers-Only").
      if (h['grpc-status'] !== undefined) [reply.status, reply.statusMessage] = [h['grpc-status'], h['grpc-message']];
    });
    req.on('trailers', (t) => ([reply.status, reply.statusMessage] = [t['grpc-status'], t['grpc-message']]));
    req.on('data', (b: Buffer) => chunks.push(b));
    req.on('error', (err: Error) => finish(failed(err)));
    req.on('end', () => {
      if (reply.httpStatus === undefined) return finish(failed(new Error('the connection closed before a reply')));
      reply.body = Buffer.concat(chunks);
      finish(replyMessage(reply, where));
    });
  });
}

/** A protobuf field as read off the wire: varints as numbers, length-delimited fields as bytes. */
export interface WireField {
  field: number;
  value: number | Buffer;
}

/** The top-level fields of one protobuf message, in order (fixed-width fields are skipped). */
export function readFields(buf: Buffer): WireField[] {
  const out: WireField[] = [];
  let pos = 0;
  const varint = (): number => {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (pos >= buf.length) throw new Error('a varint runs past the end of the message');
      const b = buf[pos++]!;
      result += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return result;
      scale *= 128;
    }
    throw new Error('a varint longer than ten bytes');
  };
  while (pos < buf.length) {
    const key = varint();
    const field = Math.floor(key / 8);
    const wire = key % 8;
    if (field === 0) throw new Error('field number 0');
    if (wire === 0) out.push({ field, value: varint() });
    else if (wire === 2) {
      const len = varint();
      if (pos + len > buf.length) throw new Error(`field ${field} says ${len} bytes, ${buf.length - pos} are left`);
      out.push({ field, value: buf.subarray(pos, pos + len) });
      pos += len;
    } else if (wire === 1 || wire === 5) {
      const len = wire === 1 ? 8 : 4;
      if (pos + len > buf.length) throw new Error(`field ${field} is cut short`);
      pos += len;
    } else throw new Error(`wire type ${wire} (field ${field}) is not one containerd's API uses`);
  }
  return out;
}

function bytesOf(buf: Buffer, field: number): Buffer[] {
  return readFields(buf).flatMap((f) => (f.field === field && Buffer.isBuffer(f.value) ? [f.value] : []));
}

function stringsOf(buf: Buffer, field: number): string[] {
  return bytesOf(buf, field).map((b) => b.toString('utf8'));
}

function decoded<T>(socket: string, method: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    throw new ContainerdApiError('unexpected', `containerd's API at ${socket} (${method}): cannot read the reply: ${(err as Error).message}`);
  }
}

const VERSION = '/containerd.services.version.v1.Version/Version';
const LIST_IMAGES = '/containerd.services.images.v1.Images/List';

/** containerd's version (VersionResponse.version, field 1): proof that it answers. */
export async function apiVersion(socket: string, o: Omit<ApiCallOptions, 'namespace'>): Promise<string> {
  const reply = await grpcUnary(socket, VERSION, Buffer.alloc(0), o);
  return decoded(socket, VERSION, () => stringsOf(reply, 1)[0] ?? '');
}

/** Every image name in the namespace (ListImagesResponse.images, field 1; Image.name, field 1), unfiltered. */
export async function apiImageNames(socket: string, o: ApiCallOptions & { namespace: string }): Promise<string[]> {
  const reply = await grpcUnary(socket, LIST_IMAGES, Buffer.alloc(0), o);
  return decoded(socket, LIST_IMAGES, () => bytesOf(reply, 1).flatMap((image) => stringsOf(image, 1)));
}
