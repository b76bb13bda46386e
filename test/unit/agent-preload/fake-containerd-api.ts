/**
 * A stand-in for containerd's gRPC API in unit tests: an HTTP/2 server on a unix socket that
 * records each call and answers it as the test says. Closed when the running test finishes.
 */
import http2 from 'node:http2';
import { onTestFinished } from 'vitest';

export interface SeenCall {
  headers: http2.IncomingHttpHeaders;
  body: Buffer;
}

/** How one call is answered, once its request has been read. */
export type Answer = (stream: http2.ServerHttp2Stream, path: string) => void;

/** A gRPC length-prefixed message, uncompressed, written out by hand. */
export function grpcFrame(message: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}

/** A reply as containerd sends one: headers, one message, then grpc-status 0 in the trailers. */
export function replyWith(message: Buffer): Answer {
  return (stream) => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    stream.end(grpcFrame(message));
  };
}

/** A call refused at once, with headers only ("Trailers-Only"): `message` as sent, percent-encoded or not. */
export function failWith(code: number, message: string): Answer {
  return (stream) => stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(code), 'grpc-message': message }, { endStream: true });
}

/** Serves `answer` on `socket` until the running test finishes; returns the calls it saw. `onOpen` hears each call as it starts. */
export async function fakeContainerdApi(socket: string, answer: Answer, onOpen?: (path: string) => void): Promise<SeenCall[]> {
  const seen: SeenCall[] = [];
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (s) => sessions.add(s));
  server.on('stream', (stream, headers) => {
    onOpen?.(String(headers[':path']));
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => {
      seen.push({ headers, body: Buffer.concat(chunks) });
      // A client that gave up on the call has reset its stream: nothing to answer.
      if (!stream.destroyed) answer(stream, String(headers[':path']));
    });
    stream.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(socket, r));
  onTestFinished(async () => {
    for (const s of sessions) s.destroy();
    await new Promise((r) => server.close(r));
  });
  return seen;
}
