/**
 * One import attempt through the agent's API importer against a stand-in for containerd's API
 * (an HTTP/2 server on a unix socket that records every call): the calls it makes and in what
 * order, that a bad archive never gets an image record, that containerd's own refusal fails the
 * attempt with containerd's words and no ctr, that an answer the client cannot read hands the
 * archive to ctr, and that the lease is deleted whatever happens. Runs the real import scripts
 * (bash, cat) with a ctr stand-in; no containerd, no root.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type http2 from 'node:http2';
import { importArchiveOnce, ImportAttemptError } from '../../../agent/preload/stream-import.js';
import { readFields } from '../../../agent/preload/protobuf.js';
import { writeDockerArchive } from '../../fixtures/preload/image-archive.mjs';
import { fakeContainerdApi, failWith, replyWith, type SeenCall } from './fake-containerd-api.js';

let dir: string;
let archive: string;
let ctr: string;
let ctrRuns: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'hv-api-import-'));
  archive = path.join(dir, 'images.tar');
  const out = createWriteStream(archive);
  await writeDockerArchive(out, [{ ref: 'rancher/a:v1', size: 300_000 }]);
  out.end();
  await once(out, 'finish');
  // ctr's stand-in drains the archive and writes down that it ran.
  ctr = path.join(dir, 'ctr');
  ctrRuns = path.join(dir, 'ctr-runs');
  await writeFile(ctr, `#!/bin/sh\ncat > /dev/null\necho "$*" >> ${ctrRuns}\n`);
  await chmod(ctr, 0o755);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const CONTENT_WRITE = '/containerd.services.content.v1.Content/Write';
let serial = 0;

/** A stand-in answering like containerd (a digest for each write, NOT_FOUND for an unknown image's update), with `override` first. */
async function containerd(
  override: (path: string) => ((stream: http2.ServerHttp2Stream, p: string) => void) | undefined = () => undefined,
  onOpen?: (path: string) => void,
) {
  const socket = path.join(dir, `c${++serial}.sock`);
  const calls = await fakeContainerdApi(socket, (stream, p) => {
    const special = override(p);
    if (special) return special(stream, p);
    if (p === CONTENT_WRITE) return replyWith(Buffer.concat([Buffer.from([0x32, 71]), Buffer.from(`sha256:${String(serial).repeat(64).slice(0, 64)}`)]))(stream, p);
    if (p.endsWith('Images/Update')) return failWith(5, 'image not found')(stream, p);
    return replyWith(Buffer.alloc(0))(stream, p);
  }, onOpen);
  return { socket, calls };
}

async function attempt(socket: string, sha256?: string): Promise<{ err?: ImportAttemptError; fallbacks: string[] }> {
  const fallbacks: string[] = [];
  const err = await importArchiveOnce({
    archive: { id: 'images.tar', section: 'common', archivePath: archive, compression: 'none', images: ['docker.io/rancher/a:v1'], sha256, sizeBytes: (await stat(archive)).size },
    target: { ctr, socket, namespace: 'k8s.io', onApiFallback: (why) => fallbacks.push(why) },
    zstd: 'zstd',
    unpack: false,
    importer: 'api',
    stallTimeoutMs: 20_000,
    finishTimeoutMs: 20_000,
    signal: new AbortController().signal,
  }).then(
    () => undefined,
    (e: unknown) => e as ImportAttemptError,
  );
  return { err, fallbacks };
}

const methods = (calls: SeenCall[]) => calls.map((c) => String(c.headers[':path']).split('/').pop());
const ctrRan = async () => (await readFile(ctrRuns, 'utf8').catch(() => '')).trim();

/** The messages of a call's request body (gRPC frames). */
function messages(body: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let pos = 0; pos < body.length; pos += 5 + body.readUInt32BE(pos + 1)) out.push(body.subarray(pos + 5, pos + 5 + body.readUInt32BE(pos + 1)));
  return out;
}

describe('an import through the API importer', () => {
  it('writes every file under its lease, then the manifest with its labels, then the record, and deletes the lease', async () => {
    const c = await containerd();
    const sha = createHash('sha256').update(await readFile(archive)).digest('hex');
    const r = await attempt(c.socket, sha);
    expect(r).toEqual({ err: undefined, fallbacks: [] });
    // layer, config (written as the tar has them), manifest, record, lease gone.
    expect(methods(c.calls)).toEqual(['Create', 'Write', 'Write', 'Write', 'Update', 'Create', 'Delete']);
    const lease = String(c.calls[0]!.headers['containerd-lease'] ?? '') || (readFields(messages(c.calls[0]!.body)[0]!)[0]!.value as Buffer).toString();
    expect(lease).toMatch(/^hvagent-import-/);
    // The lease names its agent (this process: boot id, PID, start time), for a later agent's sweep.
    const stat = (await readFile('/proc/self/stat', 'utf8')).trim().split(') ')[1]!.split(' ');
    const owner = `${(await readFile('/proc/sys/kernel/random/boot_id', 'utf8')).trim()} ${process.pid} ${stat[19]}`;
    const labels = readFields(messages(c.calls[0]!.body)[0]!).filter((f) => f.field === 3).map((f) => readFields(f.value as Buffer).map((e) => (e.value as Buffer).toString()));
    expect(labels).toEqual([['containerd.io/gc.expire', expect.stringMatching(/^\d{4}-\d\d-\d\dT/)], ['hvinstall.io/hvagent', owner]]);
    for (const w of c.calls.filter((x) => x.headers[':path'] === CONTENT_WRITE)) expect(w.headers['containerd-lease']).toBe(lease);
    // The layer went in 1 MiB messages or fewer, at increasing offsets, then one commit of its size.
    const layer = messages(c.calls[1]!.body).map((m) => readFields(m));
    expect(layer.at(-1)!.find((f) => f.field === 1)!.value).toBe(2);
    // The manifest: committed with its expected digest and the gc label naming the config.
    const manifest = readFields(messages(c.calls[3]!.body)[0]!);
    expect(manifest.find((f) => f.field === 4)!.value.toString()).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(manifest.filter((f) => f.field === 7).map((f) => (f.value as Buffer).toString('latin1'))).toEqual([
      expect.stringContaining('containerd.io/gc.ref.content.config'),
      expect.stringContaining('containerd.io/gc.ref.content.l.0'),
    ]);
    expect(c.calls[5]!.body.includes(Buffer.from('docker.io/rancher/a:v1'))).toBe(true);
    expect(c.calls[6]!.body.includes(Buffer.from(lease))).toBe(true);
    expect(await ctrRan()).toBe('');
  });

  it('takes every byte even when the archive was read and its reader gone before containerd answered the lease', async () => {
    // Node sets an unread pipe of an exited child flowing and drops its bytes: the importer must be reading from the start.
    const c = await containerd((p) => (p.endsWith('Leases/Create') ? (stream, path_) => void setTimeout(() => replyWith(Buffer.alloc(0))(stream, path_), 500) : undefined));
    // Small enough to fit in the pipe whole: its reader exits at once.
    const saved = archive;
    archive = path.join(dir, 'tiny.tar');
    const out = createWriteStream(archive);
    await writeDockerArchive(out, [{ ref: 'rancher/a:v1', size: 1000 }]);
    out.end();
    await once(out, 'finish');
    try {
      const r = await attempt(c.socket);
      expect(r).toEqual({ err: undefined, fallbacks: [] });
      expect(methods(c.calls)).toEqual(['Create', 'Write', 'Write', 'Write', 'Update', 'Create', 'Delete']);
    } finally {
      archive = saved;
    }
  });

  it('keeps at most 16 writes open at once on an archive of many small files, and writes every one', async () => {
    let open = 0;
    let most = 0;
    const c = await containerd(
      (p) =>
        p === CONTENT_WRITE
          ? (stream, path_) =>
              void setTimeout(() => {
                open--;
                replyWith(Buffer.concat([Buffer.from([0x32, 71]), Buffer.from(`sha256:${'7'.repeat(64)}`)]))(stream, path_);
              }, 30)
          : undefined,
      (p) => {
        if (p === CONTENT_WRITE) most = Math.max(most, ++open);
      },
    );
    const saved = archive;
    archive = path.join(dir, 'many.tar');
    const out = createWriteStream(archive);
    await writeDockerArchive(out, Array.from({ length: 20 }, (_, i) => ({ ref: `rancher/m${i}:v1`, size: 100 })));
    out.end();
    await once(out, 'finish');
    try {
      const r = await attempt(c.socket);
      expect(r).toEqual({ err: undefined, fallbacks: [] });
      // 40 files (a layer and a config per image), then the manifests (the stand-in gives every
      // file one digest, so images whose files are the same size share one).
      expect(methods(c.calls).filter((m) => m === 'Write').length).toBeGreaterThanOrEqual(41);
      expect(methods(c.calls).filter((m) => m === 'Create')).toHaveLength(21);
      expect(most).toBeGreaterThan(1);
      expect(most).toBeLessThanOrEqual(16);
    } finally {
      archive = saved;
    }
  });

  it('creates no image record for an archive whose checksum does not match, and deletes its lease', async () => {
    const c = await containerd();
    const r = await attempt(c.socket, '0'.repeat(64));
    expect(r.err?.kind).toBe('checksum-mismatch');
    expect(methods(c.calls)).not.toContain('Update');
    expect(methods(c.calls).at(-1)).toBe('Delete');
    expect(r.fallbacks).toEqual([]);
  });

  it("fails with containerd's own words when it refuses a write, without asking ctr", async () => {
    const c = await containerd((p) => (p === CONTENT_WRITE ? failWith(8, 'write /var/lib/containerd/ingest/x: no space left on device') : undefined));
    const r = await attempt(c.socket);
    expect(r.err?.kind).toBe('import-failed');
    expect(r.err?.message).toMatch(/gRPC status 8: write .*: no space left on device$/);
    expect(r.fallbacks).toEqual([]);
    expect(methods(c.calls)).not.toContain('Update');
    expect(methods(c.calls).at(-1)).toBe('Delete');
    expect(await ctrRan()).toBe('');
  });

  it('hands the archive to ctr, saying why, when containerd answers in a way the client cannot read', async () => {
    const c = await containerd((p) => (p === CONTENT_WRITE ? (stream) => stream.respond({ ':status': 404 }, { endStream: true }) : undefined));
    const r = await attempt(c.socket);
    expect(r.err).toBeUndefined();
    expect(r.fallbacks).toEqual([expect.stringMatching(/Content\/Write\): HTTP status 404, not a gRPC reply$/)]);
    expect(await ctrRan()).toBe(`-a ${c.socket} -n k8s.io images import --no-unpack -`);
    expect(methods(c.calls).at(-1)).toBe('Delete');
    await rm(ctrRuns, { force: true });
  });

  it('fails naming the socket when nothing answers there, without asking ctr', async () => {
    const r = await attempt(path.join(dir, 'nothing.sock'));
    expect(r.err?.kind).toBe('import-failed');
    expect(r.err?.message).toMatch(/containerd's API at .*nothing\.sock \(importing images\.tar\): connect ENOENT/);
    expect(r.fallbacks).toEqual([]);
    expect(await ctrRan()).toBe('');
  });

  it('names the archive as not a tar when it is not one, and never creates a record', async () => {
    const c = await containerd();
    const saved = archive;
    archive = path.join(dir, 'garbage.tar');
    await writeFile(archive, Buffer.alloc(4096, 'x'));
    try {
      const r = await attempt(c.socket);
      expect(r.fallbacks).toEqual([]);
      expect(r.err?.kind).toBe('corrupt');
      expect(r.err?.message).toMatch(/the archive's tar is not valid: a tar header's .* (not a number|checksum is wrong)/);
      expect(methods(c.calls)).toEqual(['Create', 'Delete']);
    } finally {
      archive = saved;
    }
  });
});

