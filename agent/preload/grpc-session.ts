/**
 * gRPC over cleartext HTTP/2 on containerd's unix socket (node:http2): one connection, many calls,
 * each a stream of length-prefixed protobuf messages ("gRPC over HTTP2", grpc/grpc:
 * doc/PROTOCOL-HTTP2.md). Unary calls for questions and records; client-streaming writes with
 * replies read as they come, for the content store.
 */
import http2 from 'node:http2';
import net from 'node:net';

/**
 * `unreachable`: nothing at the socket spoke HTTP/2 within the deadline (refused, reset, silent): ctr
 * would fail the same way. `unexpected`: something answered but not as containerd's API does, so a
 * caller may still ask ctr; `grpcStatus` is set where containerd itself refused the call with a
 * status (then ctr would be refused the same).
 */
export class ContainerdApiError extends Error {
  constructor(
    readonly kind: 'unreachable' | 'unexpected',
    message: string,
    readonly grpcStatus?: number,
  ) {
    super(message);
    this.name = 'ContainerdApiError';
  }
}

/** gRPC status codes the preload acts on (grpc/grpc: doc/statuscodes.md). */
export const GRPC_NOT_FOUND = 5;
export const GRPC_ALREADY_EXISTS = 6;

export interface CallOptions {
  /** containerd's namespace header (most services need one). */
  namespace?: string;
  /** containerd's lease header: what the call writes is held by the lease until it is deleted. */
  lease?: string;
  /** For the whole call; none for a stream whose progress the caller watches itself. */
  timeoutMs?: number;
}

/** grpc-message is percent-encoded. */
function grpcMessage(v: unknown): string {
  if (typeof v !== 'string' || v === '') return '';
  try {
    return decodeURIComponent(v);
  } catch {
    return v;
  }
}

/** The 5-byte prefix of an uncompressed gRPC message of `length` bytes. */
function framePrefix(length: number): Buffer {
  const p = Buffer.alloc(5);
  p.writeUInt32BE(length, 1);
  return p;
}

function requestHeaders(method: string, o: CallOptions): http2.OutgoingHttpHeaders {
  const headers: http2.OutgoingHttpHeaders = { ':method': 'POST', ':path': method, 'content-type': 'application/grpc', te: 'trailers' };
  if (o.timeoutMs !== undefined) headers['grpc-timeout'] = `${Math.max(1, Math.ceil(o.timeoutMs))}m`;
  if (o.namespace) headers['containerd-namespace'] = o.namespace;
  if (o.lease) headers['containerd-lease'] = o.lease;
  return headers;
}

/**
 * One call on a session: messages sent with backpressure, replies taken as they arrive, and its
 * end: resolved once the status is 0, rejected with the reason otherwise.
 */
export class GrpcCall {
  /** Rejects with a ContainerdApiError; resolves with every reply. */
  readonly finished: Promise<Buffer[]>;
  private readonly replies: Buffer[] = [];
  private pending: Buffer = Buffer.alloc(0);
  /** The last message received, kept even when the call then fails. */
  lastReply: Buffer | undefined;
  private ended = false;
  private failure: ContainerdApiError | undefined;

  constructor(
    private readonly stream: http2.ClientHttp2Stream,
    private readonly where: string,
    failed: (why: string) => ContainerdApiError,
    timeoutMs: number | undefined,
  ) {
    let httpStatus: unknown;
    let status: unknown;
    let statusMessage: unknown;
    this.finished = new Promise<Buffer[]>((resolve, reject) => {
      const timer = timeoutMs === undefined ? undefined : setTimeout(() => settle(failed(`no reply within ${timeoutMs} ms`)), timeoutMs);
      const settle = (err?: ContainerdApiError): void => {
        if (this.ended) return;
        this.ended = true;
        clearTimeout(timer);
        if (err) {
          this.failure = err;
          stream.destroy();
          reject(err);
        } else resolve(this.replies.splice(0));
      };
      stream.on('response', (h) => {
        httpStatus = h[':status'];
        // A call that fails at once answers with headers only ("Trailers-Only").
        if (h['grpc-status'] !== undefined) [status, statusMessage] = [h['grpc-status'], h['grpc-message']];
      });
      stream.on('trailers', (t) => ([status, statusMessage] = [t['grpc-status'], t['grpc-message']]));
      stream.on('data', (b: Buffer) => {
        // A body that is not gRPC's is not read: the HTTP status says what it is.
        if (httpStatus !== 200) return;
        const bad = this.take(b);
        if (bad) settle(this.unexpected(bad));
      });
      stream.on('error', (err: Error) => settle(failed(err.message)));
      stream.on('close', () => {
        if (httpStatus === undefined) return settle(failed('the connection closed before a reply'));
        if (httpStatus !== 200) return settle(this.unexpected(`HTTP status ${String(httpStatus)}, not a gRPC reply`));
        // Reset or cut off with the connection: no status will come, and none was refused.
        if (status === undefined && (stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR || stream.aborted)) return settle(failed('the call was cut off before it ended'));
        if (status === undefined) return settle(this.unexpected('the reply carries no grpc-status'));
        if (String(status) !== '0') {
          const text = grpcMessage(statusMessage);
          return settle(new ContainerdApiError('unexpected', `${where}: gRPC status ${String(status)}${text ? `: ${text}` : ''}`, Number(status)));
        }
        if (this.pending.length > 0) return settle(this.unexpected(`the reply's frame says ${this.pending.length >= 5 ? this.pending.readUInt32BE(1) : '?'} bytes, ${Math.max(0, this.pending.length - 5)} came`));
        settle();
      });
    });
    this.finished.catch(() => undefined);
  }

  private unexpected(why: string): ContainerdApiError {
    return new ContainerdApiError('unexpected', `${this.where}: ${why}`);
  }

  /** Cuts complete messages off the reply bytes; returns why they cannot be read, if so. */
  private take(b: Buffer): string | undefined {
    this.pending = this.pending.length ? Buffer.concat([this.pending, b]) : b;
    while (this.pending.length >= 5) {
      if (this.pending[0] !== 0) return `the reply is compressed (flag ${this.pending[0]}), which was not asked for`;
      const len = this.pending.readUInt32BE(1);
      if (this.pending.length < 5 + len) break;
      const message = Buffer.from(this.pending.subarray(5, 5 + len));
      this.pending = this.pending.subarray(5 + len);
      this.lastReply = message;
      this.replies.push(message);
    }
    return undefined;
  }

  /** Sends one message made of `parts` (their bytes are not copied); waits while the stream is full. */
  async send(parts: Buffer[]): Promise<void> {
    if (this.failure) throw this.failure;
    const length = parts.reduce((n, p) => n + p.length, 0);
    let room = this.stream.write(framePrefix(length));
    for (const p of parts) room = this.stream.write(p) && room;
    if (!room && !this.ended) {
      await new Promise<void>((resolve) => {
        const go = (): void => {
          this.stream.off('drain', go);
          this.stream.off('close', go);
          resolve();
        };
        this.stream.on('drain', go);
        this.stream.on('close', go);
      });
    }
    if (this.failure) throw this.failure;
  }

  /** Sends the last message (if any) and half-closes the call. */
  end(parts: Buffer[] = []): void {
    if (this.ended) return;
    if (parts.length) {
      const length = parts.reduce((n, p) => n + p.length, 0);
      this.stream.write(framePrefix(length));
      for (const p of parts) this.stream.write(p);
    }
    this.stream.end();
  }

  /** Abandons the call (its stream is reset); `finished` rejects. */
  cancel(): void {
    this.stream.destroy();
  }
}

/** One HTTP/2 connection to containerd's socket. */
export class GrpcSession {
  private connected = false;
  private socketError: Error | undefined;
  private closedWhy: string | undefined;
  private readonly session: http2.ClientHttp2Session;
  private readonly conn: net.Socket;
  /** Settles, with why, once the connection is gone: containerd stopped, or closed here. */
  readonly lost: Promise<string>;

  private constructor(readonly socket: string) {
    this.conn = net.connect(socket);
    // The socket's own error (ENOENT, ECONNREFUSED) says more than the session's built on it.
    this.conn.on('error', (err) => (this.socketError ??= err));
    this.session = http2.connect('http://localhost', { createConnection: () => this.conn });
    this.session.on('error', (err: Error) => (this.closedWhy ??= (this.socketError ?? err).message));
    this.session.on('close', () => (this.closedWhy ??= (this.socketError?.message ?? 'the connection closed before a reply')));
    this.lost = new Promise((resolve) => this.session.once('close', () => resolve(this.closedWhy ?? 'the connection closed')));
  }

  /** Resolves once the server's HTTP/2 settings arrived; `label` names the work in errors. */
  static open(socket: string, connectTimeoutMs: number, label: string): Promise<GrpcSession> {
    const s = new GrpcSession(socket);
    return new Promise((resolve, reject) => {
      const where = `containerd's API at ${socket} (${label})`;
      const fail = (why: string): void => {
        clearTimeout(timer);
        s.close();
        reject(new ContainerdApiError('unreachable', `${where}: ${why}`));
      };
      const timer = setTimeout(() => fail(`no HTTP/2 answer within ${connectTimeoutMs} ms`), connectTimeoutMs);
      s.session.once('remoteSettings', () => {
        clearTimeout(timer);
        s.connected = true;
        resolve(s);
      });
      s.session.once('close', () => {
        if (!s.connected) fail(s.closedWhy ?? 'the connection closed');
      });
    });
  }

  /** Starts a call to `method` ("/pkg.Service/Method"). */
  call(method: string, o: CallOptions): GrpcCall {
    const where = `containerd's API at ${this.socket} (${method})`;
    // A call cut off because the connection went (containerd stopped) is as unreachable as a refused one.
    const gone = (): boolean => !this.connected || this.closedWhy !== undefined || this.session.destroyed || this.session.closed || this.conn.destroyed || this.conn.readableEnded;
    const failed = (why: string): ContainerdApiError => new ContainerdApiError(gone() ? 'unreachable' : 'unexpected', `${where}: ${this.socketError?.message ?? why}`);
    if (this.closedWhy !== undefined || this.session.destroyed) throw failed(this.closedWhy ?? 'the connection is closed');
    return new GrpcCall(this.session.request(requestHeaders(method, o)), where, failed, o.timeoutMs);
  }

  /** One request, one reply. */
  async unary(method: string, message: Buffer, o: CallOptions): Promise<Buffer> {
    const call = this.call(method, o);
    call.end([message]);
    const [reply] = await call.finished;
    if (!reply) throw new ContainerdApiError('unexpected', `containerd's API at ${this.socket} (${method}): the reply has no message`);
    return reply;
  }

  close(): void {
    this.session.destroy();
    this.conn.destroy();
  }
}
