/**
 * The preload's gRPC client for containerd's API, against HTTP/2 servers on a unix socket that
 * answer as containerd does (one reply captured from containerd 1.6.20 is replayed byte for byte)
 * and as it does not: errors, silence, a socket that is not HTTP/2, broken protobuf.
 */
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { apiImageNames, apiVersion, ContainerdApiError, grpcUnary } from '../../../agent/preload/containerd-api.js';
import { readFields } from '../../../agent/preload/protobuf.js';
import { testTempDir } from '../temp-dir.js';
import { failWith, fakeContainerdApi, grpcFrame, replyWith, type Answer, type SeenCall } from './fake-containerd-api.js';

// containerd 1.6.20's reply to Images/List in a namespace holding one image imported by
// `ctr images import` (docker.io/rancher/harvester:v1.8.0): name, labels, the target descriptor
// with its annotations, created_at and updated_at.
const CAPTURED_LIST_REPLY = Buffer.from(
  '0ab2020a22646f636b65722e696f2f72616e636865722f6861727665737465723a76312e382e301aef010a346170706c69636174696f6e2f766e642e646f636b65722e646973747269627574696f6e2e6d616e69666573742e76322b6a736f6e12477368613235363a3862356161323662626434336639363436643337636261613836633332626136303433343862653862373032653038343333323136343237376536363663653018a3032a2b0a216f72672e6f70656e636f6e7461696e6572732e696d6167652e7265662e6e616d65120676312e382e302a3e0a18696f2e636f6e7461696e6572642e696d6167652e6e616d651222646f636b65722e696f2f72616e636865722f6861727665737465723a76312e382e303a0c08c2acd6d80610d8f8ccd602420c08c2acd6d80610d8f8ccd602',
  'hex',
);

/** A length-delimited protobuf field, written out by hand (tag = field << 3 | 2; length as a base-128 varint). */
function lengthField(field: number, bytes: Buffer | string): Buffer {
  const b = typeof bytes === 'string' ? Buffer.from(bytes) : bytes;
  const len: number[] = [];
  for (let n = b.length; ; n >>= 7) {
    if (n < 0x80) {
      len.push(n);
      break;
    }
    len.push((n & 0x7f) | 0x80);
  }
  return Buffer.concat([Buffer.from([(field << 3) | 2, ...len]), b]);
}

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

/** The stand-in API on a fresh socket, answering every call with `answer`. */
async function grpcServer(answer: Answer): Promise<{ socket: string; seen: SeenCall[] }> {
  const socket = path.join(testTempDir('hv-ctr-api-'), 'containerd.sock');
  return { socket, seen: await fakeContainerdApi(socket, answer) };
}

async function plainServer(onConnection: (c: import('node:net').Socket) => void): Promise<string> {
  const socket = path.join(testTempDir('hv-ctr-api-'), 'containerd.sock');
  const server: Server = createServer(onConnection);
  const open = new Set<import('node:net').Socket>();
  server.on('connection', (c) => open.add(c));
  await new Promise<void>((r) => server.listen(socket, r));
  closers.push(async () => {
    for (const c of open) c.destroy();
    await new Promise((r) => server.close(r));
  });
  return socket;
}

const quick = { connectTimeoutMs: 1_000, timeoutMs: 3_000 };

async function failure(p: Promise<unknown>): Promise<ContainerdApiError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ContainerdApiError);
  return err as ContainerdApiError;
}

describe('containerd API calls as containerd answers them', () => {
  it('lists the image names of the captured reply, asking Images/List in the namespace with an empty request', async () => {
    const { socket, seen } = await grpcServer(replyWith(CAPTURED_LIST_REPLY));
    expect(await apiImageNames(socket, { namespace: 'k8s.io', ...quick })).toEqual(['docker.io/rancher/harvester:v1.8.0']);
    expect(seen).toHaveLength(1);
    const h = seen[0]!.headers;
    expect(h[':method']).toBe('POST');
    expect(h[':path']).toBe('/containerd.services.images.v1.Images/List');
    expect(h['content-type']).toBe('application/grpc');
    expect(h['containerd-namespace']).toBe('k8s.io');
    expect(h.te).toBe('trailers');
    // An uncompressed frame holding an empty ListImagesRequest (no filters: every image).
    expect(seen[0]!.body).toEqual(Buffer.from([0, 0, 0, 0, 0]));
  });

  it('lists every image of a longer reply, digest-named ones included, and nothing from other fields', async () => {
    const image = (name: string) => lengthField(1, Buffer.concat([lengthField(1, name), lengthField(2, lengthField(1, 'io.cri-containerd.image') /* a labels entry */)]));
    const reply = Buffer.concat([
      image('docker.io/rancher/rke2-runtime:v1.31.4-rke2r1'),
      image('sha256:' + 'c'.repeat(64)),
      image('registry.local:5000/longhorn/longhorn-manager@sha256:' + 'd'.repeat(64)),
    ]);
    const { socket } = await grpcServer(replyWith(reply));
    expect(await apiImageNames(socket, { namespace: 'k8s.io', ...quick })).toEqual([
      'docker.io/rancher/rke2-runtime:v1.31.4-rke2r1',
      'sha256:' + 'c'.repeat(64),
      'registry.local:5000/longhorn/longhorn-manager@sha256:' + 'd'.repeat(64),
    ]);
  });

  it('reads an empty namespace as no images', async () => {
    const { socket } = await grpcServer(replyWith(Buffer.alloc(0)));
    expect(await apiImageNames(socket, { namespace: 'k8s.io', ...quick })).toEqual([]);
  });

  it('asks Version/Version with no namespace and returns the version string', async () => {
    const { socket, seen } = await grpcServer(replyWith(Buffer.concat([lengthField(1, 'v1.7.23-k3s1'), lengthField(2, '57f17f6')])));
    expect(await apiVersion(socket, quick)).toBe('v1.7.23-k3s1');
    expect(seen[0]!.headers[':path']).toBe('/containerd.services.version.v1.Version/Version');
    expect(seen[0]!.headers['containerd-namespace']).toBeUndefined();
  });
});

describe('containerd API calls that fail', () => {
  it('reports a headers-only gRPC error with its status and decoded message, as an unexpected answer', async () => {
    const { socket } = await grpcServer(failWith(12, 'unknown%20method%20List'));
    const err = await failure(apiImageNames(socket, { namespace: 'k8s.io', ...quick }));
    expect(err.kind).toBe('unexpected');
    expect(err.message).toBe(`containerd's API at ${socket} (/containerd.services.images.v1.Images/List): gRPC status 12: unknown method List`);
  });

  it('reports a non-zero grpc-status in the trailers even when a message came before it', async () => {
    const { socket } = await grpcServer((stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '14', 'grpc-message': 'shutting down' }));
      stream.end(grpcFrame(CAPTURED_LIST_REPLY));
    });
    const err = await failure(apiImageNames(socket, { namespace: 'k8s.io', ...quick }));
    expect(err.kind).toBe('unexpected');
    expect(err.message).toMatch(/gRPC status 14: shutting down$/);
  });

  it('refuses an HTTP answer that is not gRPC', async () => {
    const { socket } = await grpcServer((stream) => {
      stream.respond({ ':status': 404, 'content-type': 'text/plain' });
      stream.end('not here');
    });
    const err = await failure(apiVersion(socket, quick));
    expect(err.kind).toBe('unexpected');
    expect(err.message).toMatch(/HTTP status 404, not a gRPC reply$/);
  });

  it('refuses a reply with no grpc-status, a cut frame, or a compressed frame', async () => {
    const noStatus = await grpcServer((stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
      stream.end(grpcFrame(CAPTURED_LIST_REPLY));
    });
    expect((await failure(apiVersion(noStatus.socket, quick))).message).toMatch(/the reply carries no grpc-status$/);

    const cut = await grpcServer((stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(grpcFrame(CAPTURED_LIST_REPLY).subarray(0, 100));
    });
    expect((await failure(apiImageNames(cut.socket, { namespace: 'k8s.io', ...quick }))).message).toMatch(/the reply's frame says 309 bytes, 95 came$/);

    const compressed = await grpcServer((stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      const f = grpcFrame(CAPTURED_LIST_REPLY);
      f[0] = 1;
      stream.end(f);
    });
    expect((await failure(apiImageNames(compressed.socket, { namespace: 'k8s.io', ...quick }))).message).toMatch(/the reply is compressed \(flag 1\)/);
  });

  it('refuses a reply whose protobuf runs past its end, naming the call', async () => {
    // Field 1 (an image) says 50 bytes; 3 follow.
    const { socket } = await grpcServer(replyWith(Buffer.from([0x0a, 50, 0x0a, 1, 0x61])));
    const err = await failure(apiImageNames(socket, { namespace: 'k8s.io', ...quick }));
    expect(err.kind).toBe('unexpected');
    expect(err.message).toBe(`containerd's API at ${socket} (/containerd.services.images.v1.Images/List): cannot read the reply: field 1 says 50 bytes, 3 are left`);
  });

  it('calls a missing socket unreachable and names the system error', async () => {
    const socket = path.join(testTempDir('hv-ctr-api-'), 'absent.sock');
    const err = await failure(apiVersion(socket, quick));
    expect(err.kind).toBe('unreachable');
    expect(err.message).toBe(`containerd's API at ${socket} (/containerd.services.version.v1.Version/Version): connect ENOENT ${socket}`);
  });

  it('calls a socket that closes at once unreachable', async () => {
    const socket = await plainServer((c) => c.destroy());
    expect((await failure(apiVersion(socket, quick))).kind).toBe('unreachable');
  });

  it('calls a socket that accepts and says nothing unreachable once the connect deadline passes', async () => {
    const socket = await plainServer(() => undefined);
    const started = Date.now();
    const err = await failure(apiVersion(socket, { connectTimeoutMs: 300, timeoutMs: 10_000 }));
    expect(err.kind).toBe('unreachable');
    expect(err.message).toMatch(/no HTTP\/2 answer within 300 ms$/);
    // The call deadline (10 s) was not what ended it.
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('calls a server that speaks HTTP/2 and never replies unexpected once the call deadline passes', async () => {
    const { socket } = await grpcServer(() => undefined);
    const err = await failure(grpcUnary(socket, '/containerd.services.version.v1.Version/Version', Buffer.alloc(0), { connectTimeoutMs: 1_000, timeoutMs: 400 }));
    expect(err.kind).toBe('unexpected');
    expect(err.message).toMatch(/no reply within 400 ms$/);
  });
});

describe('readFields', () => {
  it('reads varints wider than 32 bits and skips fixed-width fields', () => {
    // field 3 varint 5_000_000_000 (a layer's size), field 7 fixed64, field 2 fixed32, field 1 "a".
    const buf = Buffer.from([0x18, 0x80, 0xe4, 0x97, 0xd0, 0x12, 0x39, 1, 2, 3, 4, 5, 6, 7, 8, 0x15, 1, 2, 3, 4, 0x0a, 1, 0x61]);
    expect(readFields(buf)).toEqual([
      { field: 3, value: 5_000_000_000 },
      { field: 1, value: Buffer.from('a') },
    ]);
  });

  it('refuses group wire types, field 0, a varint past ten bytes and a cut fixed64', () => {
    expect(() => readFields(Buffer.from([0x0b]))).toThrow('wire type 3 (field 1) is not one containerd\'s API uses');
    expect(() => readFields(Buffer.from([0x02, 0]))).toThrow('field number 0');
    expect(() => readFields(Buffer.from([0x08, ...Array(10).fill(0xff), 1]))).toThrow('a varint longer than ten bytes');
    expect(() => readFields(Buffer.from([0x09, 1, 2]))).toThrow('field 1 is cut short');
    expect(() => readFields(Buffer.from([0x08, 0x80]))).toThrow('a varint runs past the end of the message');
  });
});
