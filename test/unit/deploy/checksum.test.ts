import { afterAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sha256File } from '../../../installer/deploy/checksum.js';
import { WorkerSha256 } from '../../../installer/deploy/hash-worker.js';

const MiB = 1024 * 1024;
const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function file(name: string, bytes: Buffer): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-checksum-'));
  dirs.push(dir);
  await writeFile(path.join(dir, name), bytes);
  return path.join(dir, name);
}

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

describe('sha256File on a borrowed worker', () => {
  it('hashes files one after another on one worker, each as its own bytes, and leaves the worker open', async () => {
    const contents = [randomBytes(9 * MiB + 17), randomBytes(5 * MiB), Buffer.alloc(0)];
    const files = await Promise.all(contents.map((c, i) => file(`f${i}`, c)));
    const hasher = new WorkerSha256();
    try {
      for (const [i, f] of files.entries()) expect(await sha256File(f, { hasher })).toBe(sha256(contents[i]!));
      expect(await sha256File(files[0]!, { hasher })).toBe(sha256(contents[0]!));
    } finally {
      await hasher.close();
    }
  });

  it('a file abandoned part-way does not carry its bytes into the next file on the same worker', async () => {
    const first = randomBytes(12 * MiB);
    const second = randomBytes(6 * MiB);
    const [a, b] = [await file('a', first), await file('b', second)];
    const hasher = new WorkerSha256();
    try {
      const stop = new AbortController();
      let chunks = 0;
      const err = await sha256File(a, { hasher, signal: stop.signal, onBytes: () => ++chunks === 1 && stop.abort(new Error('stopped by the test')) }).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(err?.message).toBe('stopped by the test');
      expect(chunks).toBeGreaterThanOrEqual(1);
      expect(await sha256File(b, { hasher })).toBe(sha256(second));
    } finally {
      await hasher.close();
    }
  });

  it('without one, each call hashes on a worker of its own', async () => {
    const bytes = randomBytes(4 * MiB + 1);
    expect(await sha256File(await file('c', bytes))).toBe(sha256(bytes));
  });
});
