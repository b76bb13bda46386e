/**
 * Imports a docker archive into containerd over its own API, as `ctr images import --no-unpack`
 * does but without a ctr process: each file of the tar is streamed into the content store
 * (Content/Write, one call per file, its messages sent without waiting for each reply), the
 * manifests are written with their garbage-collection labels, and the image records are created
 * (Images/Update, else Create) only once the caller says the whole archive checked out. Everything
 * is written under a lease (Leases/Create), so nothing is collected half-way and a failed import
 * leaves nothing behind once the lease is deleted. Services and fields: containerd/containerd
 * api/services/{content,images,leases}/v1/*.proto and api/types/descriptor.proto.
 */
import { randomUUID } from 'node:crypto';
import { GRPC_ALREADY_EXISTS, GRPC_NOT_FOUND, ContainerdApiError, type GrpcSession } from './grpc-session.js';
import { IMPORT_LEASE_PREFIX, LEASE_OWNER_LABEL, ownerLabelValue, thisAgentProcess } from './lease-sweep.js';
import { bytesField, lengthPrefix, mapField, stringsOf, varintField } from './protobuf.js';
import { TarEntries } from './tar-entries.js';
import {
  cleanEntryName,
  isOciLayoutEntry,
  NotForApiImportError,
  planDockerImages,
  symlinkTarget,
  DockerArchiveError,
  type Descriptor,
  type PlannedImages,
  type StoredBlob,
} from './docker-archive.js';

const WRITE = '/containerd.services.content.v1.Content/Write';
const UPDATE_CONTENT = '/containerd.services.content.v1.Content/Update';
const CREATE_IMAGE = '/containerd.services.images.v1.Images/Create';
const UPDATE_IMAGE = '/containerd.services.images.v1.Images/Update';
const CREATE_LEASE = '/containerd.services.leases.v1.Leases/Create';
const DELETE_LEASE = '/containerd.services.leases.v1.Leases/Delete';

/** WriteContentRequest.action */
const ACTION_WRITE = 1;
const ACTION_COMMIT = 2;
/** Data per Content/Write message: containerd takes up to 16 MiB; 1 MiB keeps its writes large and the stream moving. */
const CHUNK_BYTES = 1 << 20;
/** Files this small that could be image configs are kept whole for their platform. */
const SMALL_FILE_BYTES = 1 << 20;
/** containerd's own limit for the archive's JSON files (core/images/archive/importer.go). */
const MANIFEST_LIMIT = 20 << 20;
const HEAD_BYTES = 16;
/** Content/Write calls open at once within one archive. */
const MAX_OPEN_WRITES = 16;
/** As ctr's: long enough for any import; the lease is deleted as soon as the import ends either way. */
const LEASE_EXPIRY_MS = 24 * 3600_000;
const LEASE_DELETE_TIMEOUT_MS = 5_000;
const EMPTY_DIGEST = 'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

export interface ApiImportOptions {
  session: GrpcSession;
  namespace: string;
  /** For each short call (lease, records, labels); the content writes are watched by the caller. */
  callTimeoutMs: number;
  /** Platform the images must be for (Go's GOARCH); this machine's by default. */
  arch?: string;
}

/** One archive's import over the API; `consumed` follows the tar bytes taken, for the caller's stall watchdog. */
export class DockerArchiveApiImport {
  private readonly lease = `${IMPORT_LEASE_PREFIX}${randomUUID()}`;
  private leaseCreated = false;
  private readonly tar: TarEntries;

  constructor(
    source: AsyncIterable<Buffer>,
    private readonly o: ApiImportOptions,
  ) {
    this.tar = new TarEntries(source);
  }

  get consumed(): number {
    return this.tar.consumed;
  }

  /**
   * Reads the archive to its end and writes every file and manifest into the content store (held by
   * the lease); then waits for `recordsAllowed` (the caller's word that the archive checked out) and
   * creates the image records. Returns the image names. The lease is deleted whatever happens.
   */
  async run(recordsAllowed: () => Promise<void>): Promise<string[]> {
    try {
      await this.createLease();
      const planned = await this.ingest();
      await recordsAllowed();
      await this.writeManifests(planned);
      for (const image of planned.images) await this.putImage(image.name, image.target);
      return planned.images.map((i) => i.name);
    } finally {
      await this.deleteLease();
    }
  }

  private meta(): { namespace: string; timeoutMs: number } {
    return { namespace: this.o.namespace, timeoutMs: this.o.callTimeoutMs };
  }

  private async createLease(): Promise<void> {
    const expire = new Date(Date.now() + LEASE_EXPIRY_MS).toISOString();
    // The owner lets a later agent delete this lease if this process dies before it does (lease-sweep.ts).
    const owner = await thisAgentProcess();
    const labels = { 'containerd.io/gc.expire': expire, ...(owner ? { [LEASE_OWNER_LABEL]: ownerLabelValue(owner) } : {}) };
    await this.o.session.unary(CREATE_LEASE, Buffer.concat([bytesField(1, this.lease), mapField(3, labels)]), this.meta());
    this.leaseCreated = true;
  }

  private async deleteLease(): Promise<void> {
    if (!this.leaseCreated) return;
    // Best effort, briefly: a lease left behind expires, or the next agent's sweep deletes it.
    const timeoutMs = Math.min(this.o.callTimeoutMs, LEASE_DELETE_TIMEOUT_MS);
    await this.o.session.unary(DELETE_LEASE, bytesField(1, this.lease), { namespace: this.o.namespace, timeoutMs }).catch(() => undefined);
  }

  private async ingest(): Promise<PlannedImages> {
    const blobs = new Map<string, StoredBlob>();
    const symlinks = new Map<string, string>();
    const smallFiles = new Map<string, Buffer>();
    let manifestJson: Buffer | undefined;
    const commits: Promise<void>[] = [];
    const open = new Set<Promise<void>>();
    let failed: unknown;
    for (;;) {
      if (failed) throw failed;
      const entry = await this.tar.next();
      if (!entry) {
        // What follows the end-of-archive blocks (a tar's record padding) is read and dropped, so the
        // decompressor writing it can finish.
        await this.tar.drain();
        break;
      }
      const name = cleanEntryName(entry.name);
      if (isOciLayoutEntry(name)) throw new NotForApiImportError(`the archive is an OCI image layout (${name})`);
      if (entry.type === '2') symlinks.set(name, symlinkTarget(name, entry.linkname));
      if (entry.type !== '0') continue;
      if (name === 'manifest.json') {
        manifestJson = await this.tar.readAll(MANIFEST_LIMIT, name);
        continue;
      }
      const small = entry.size <= SMALL_FILE_BYTES && name.endsWith('.json') ? await this.tar.readAll(SMALL_FILE_BYTES, name) : undefined;
      if (small) smallFiles.set(name, small);
      // The commit of one file overlaps the streaming of the next, a few calls at a time (a legacy
      // archive has thousands of tiny files); the first failure stops the import.
      while (open.size >= MAX_OPEN_WRITES) await Promise.race(open);
      const committed = this.writeFile(name, entry.size, small).then((b) => void blobs.set(name, b));
      open.add(committed);
      committed.then(
        () => open.delete(committed),
        (err) => {
          open.delete(committed);
          failed ??= err;
        },
      );
      commits.push(committed);
      // A file streamed from the tar must be through before the next entry can be read.
      if (!small) await this.streamed;
    }
    await Promise.all(commits);
    if (!manifestJson) throw new NotForApiImportError('the archive has no manifest.json: not a docker archive');
    return planDockerImages({ manifestJson, blobs, symlinks, smallFiles }, this.o.arch);
  }

  /** Resolves once the file being written has taken all of its bytes from the tar. */
  private streamed: Promise<void> = Promise.resolve();

  /** Writes one file of `size` bytes (from `whole`, or streamed from the tar) and commits it. */
  private writeFile(name: string, size: number, whole: Buffer | undefined): Promise<StoredBlob> {
    const call = this.o.session.call(WRITE, { namespace: this.o.namespace, lease: this.lease });
    const ref = `${this.lease}/${name}`;
    let head = Buffer.alloc(0);
    const send = async (): Promise<number> => {
      let offset = 0;
      while (offset < size) {
        const pieces: Buffer[] = [];
        let n = 0;
        if (whole) {
          pieces.push(whole.subarray(offset, Math.min(size, offset + CHUNK_BYTES)));
          n = pieces[0]!.length;
        } else {
          while (n < Math.min(CHUNK_BYTES, size - offset)) {
            const p = await this.tar.read(Math.min(CHUNK_BYTES, size - offset) - n);
            if (!p) break;
            pieces.push(p);
            n += p.length;
          }
        }
        if (head.length < HEAD_BYTES) head = Buffer.concat([head, ...pieces]).subarray(0, HEAD_BYTES);
        const fields = Buffer.concat([varintField(1, ACTION_WRITE), offset === 0 ? Buffer.concat([bytesField(2, ref), varintField(3, size)]) : varintField(5, offset), lengthPrefix(6, n)]);
        await call.send([fields, ...pieces]);
        offset += n;
      }
      return offset;
    };
    const sent = send();
    this.streamed = sent.then(() => undefined);
    this.streamed.catch(() => undefined);
    return sent.then(async (offset) => {
      call.end([Buffer.concat([varintField(1, ACTION_COMMIT), offset === 0 ? bytesField(2, ref) : varintField(5, offset), varintField(3, size)])]);
      const digest = await committedDigest(call.finished, () => call.lastReply, size);
      return { digest, size, head };
    }, (err) => {
      call.cancel();
      throw err;
    });
  }

  private async writeManifests(planned: PlannedImages): Promise<void> {
    for (const m of planned.manifests) {
      const call = this.o.session.call(WRITE, { namespace: this.o.namespace, lease: this.lease, timeoutMs: this.o.callTimeoutMs });
      const ref = `${this.lease}/manifest-${m.digest}`;
      call.end([Buffer.concat([varintField(1, ACTION_COMMIT), bytesField(2, ref), varintField(3, m.json.length), bytesField(4, m.digest), mapField(7, m.labels), lengthPrefix(6, m.json.length)]), m.json]);
      try {
        await call.finished;
      } catch (err) {
        if (!(err instanceof ContainerdApiError) || err.grpcStatus !== GRPC_ALREADY_EXISTS) throw err;
        // Already there (an earlier import or a pull): make sure it keeps its config and layers.
        await this.labelContent(m.digest, m.labels);
      }
    }
  }

  private async labelContent(digest: string, labels: Record<string, string>): Promise<void> {
    const info = Buffer.concat([bytesField(1, digest), mapField(5, labels)]);
    const mask = Buffer.concat(Object.keys(labels).sort().map((k) => bytesField(1, `labels.${k}`)));
    await this.o.session.unary(UPDATE_CONTENT, Buffer.concat([bytesField(1, info), bytesField(2, mask)]), this.meta());
  }

  /** As ctr: update the record's target where the name exists, else create it. */
  private async putImage(name: string, target: Descriptor): Promise<void> {
    const descriptor = Buffer.concat([bytesField(1, target.mediaType), bytesField(2, target.digest), varintField(3, target.size), mapField(5, target.annotations ?? {})]);
    const image = Buffer.concat([bytesField(1, name), bytesField(3, descriptor)]);
    try {
      await this.o.session.unary(UPDATE_IMAGE, Buffer.concat([bytesField(1, image), bytesField(2, bytesField(1, 'target'))]), this.meta());
    } catch (err) {
      if (!(err instanceof ContainerdApiError) || err.grpcStatus !== GRPC_NOT_FOUND) throw err;
      await this.o.session.unary(CREATE_IMAGE, bytesField(1, image), this.meta());
    }
  }
}

/**
 * The digest containerd committed a file under (WriteContentResponse.digest, field 6). Where the
 * content store already held it, the commit is refused as existing: the last write's reply carries
 * the digest of everything written.
 */
async function committedDigest(finished: Promise<Buffer[]>, lastReply: () => Buffer | undefined, size: number): Promise<string> {
  try {
    await finished;
  } catch (err) {
    if (!(err instanceof ContainerdApiError) || err.grpcStatus !== GRPC_ALREADY_EXISTS) throw err;
    if (size === 0) return EMPTY_DIGEST;
  }
  const digest = lastReply() ? stringsOf(lastReply()!, 6).pop() : undefined;
  if (!digest?.startsWith('sha256:')) throw new ContainerdApiError('unexpected', `containerd's content store did not say which digest it stored (${WRITE})`);
  return digest;
}
