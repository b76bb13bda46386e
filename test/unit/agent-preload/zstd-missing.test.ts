/**
 * A node image without the zstd tool (Debian's minbase has libzstd but not the zstd binary) found
 * on the first real boot of the e2e's systemd test OS: the import must say that zstd is missing —
 * the archive is fine — and not send the operator to re-copy a bundle whose checksum just
 * verified. Runs the real import scripts (bash) with a ctr stand-in that drains its input.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { importArchiveOnce, ImportAttemptError } from '../../../agent/preload/stream-import.js';
import { diagnose, isPermanent } from '../../../agent/preload/diagnosis.js';

let dir: string;
let archivePath: string;
let ctr: string;
const bytes = Buffer.from('not looked at: zstd is never started\n'.repeat(100));

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'hv-zstd-missing-'));
  archivePath = path.join(dir, 'images.tar.zst');
  await writeFile(archivePath, bytes);
  ctr = path.join(dir, 'ctr');
  await writeFile(ctr, '#!/bin/sh\ncat > /dev/null\n');
  await chmod(ctr, 0o755);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function attempt(sha256: string | undefined): Promise<ImportAttemptError> {
  const err = await importArchiveOnce({
    archive: { id: 'images.tar.zst', section: 'common', archivePath, compression: 'zstd', images: ['docker.io/x/a:1'], sha256 },
    target: { ctr, socket: path.join(dir, 'none.sock'), namespace: 'k8s.io' },
    zstd: path.join(dir, 'no-such-zstd'),
    unpack: true,
    importer: 'ctr',
    stallTimeoutMs: 30_000,
    finishTimeoutMs: 30_000,
    signal: new AbortController().signal,
  }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ImportAttemptError);
  return err as ImportAttemptError;
}

describe('image import without a zstd on the node', () => {
  it.each([
    ['with a checksum (the agent relays the bytes)', createHash('sha256').update(bytes).digest('hex')],
    ['without a checksum (zstd reads the archive itself)', undefined],
  ])('%s: names the missing tool, not a corrupt archive', async (_what, sha256) => {
    const err = await attempt(sha256);
    expect(err.kind).toBe('tool-missing');
    expect(err.message).toContain(`${path.join(dir, 'no-such-zstd')} not found`);
    expect(err.message).not.toMatch(/corrupt|truncated/);
    // Retrying cannot bring the tool: the guard stops and says what to do.
    expect(isPermanent(err.kind)).toBe(true);
    const d = diagnose({
      bundleDir: dir,
      archives: [{ id: 'images.tar.zst', status: 'failed', attempts: 1, bytes: 0, durationMs: 1, failure: { kind: err.kind, message: err.message } }],
      listedImages: 1,
      missing: [],
    });
    expect(d.permanent).toBe(true);
    expect(d.hint).toMatch(/zstd/);
    expect(d.hint).not.toMatch(/re-copy/);
  });
});
