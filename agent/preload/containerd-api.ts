/**
 * The two questions the preload asks containerd most often (does it answer, which images does it
 * hold), asked over containerd's own gRPC API on its socket instead of through `ctr`: a ctr run is
 * a Go process start, 0.5–2.6 s of CPU on a booting node under emulation, and the preload asks before
 * and after every pass and while it waits for containerd to start. The calls are plain unary gRPC
 * (grpc-session.ts) with hand-read protobuf; the services and field numbers are containerd's
 * (containerd/containerd: api/services/version/v1/version.proto,
 * api/services/images/v1/images.proto), stable across 1.x and 2.x.
 */
import { ContainerdApiError, GrpcSession } from './grpc-session.js';
import { bytesOf, stringsOf } from './protobuf.js';

export { ContainerdApiError } from './grpc-session.js';

export interface ApiCallOptions {
  /** containerd's namespace header (the images service needs one). */
  namespace?: string;
  /** Until the server's HTTP/2 settings arrive. */
  connectTimeoutMs: number;
  /** For the call once connected (the connection has its own deadline, never longer than this). */
  timeoutMs: number;
}

/** One unary call on a connection of its own: `message` (protobuf bytes) to `method`; resolves to the reply's bytes. */
export async function grpcUnary(socket: string, method: string, message: Buffer, o: ApiCallOptions): Promise<Buffer> {
  const session = await GrpcSession.open(socket, Math.min(o.connectTimeoutMs, o.timeoutMs), method);
  try {
    return await session.unary(method, message, { namespace: o.namespace, timeoutMs: o.timeoutMs });
  } finally {
    session.close();
  }
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
