import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { alignedSharedBuffer } from '../../../installer/deploy/aligned-buffer.js';
import { Sha256Pool } from '../../../installer/deploy/hash-pool.js';

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
let pool: Sha256Pool | undefined;
afterEach(async () => {
  await pool?.close();
  pool = undefined;
});

describe('Sha256Pool', () => {
  it('hashes many independent views of shared memory in parallel, each to its own sha256', async () => {
    pool = new Sha256Pool(2);
    const buf = alignedSharedBuffer(1024 * 1024);
    for (let i = 0; i < buf.length; i++) buf[i] = (i * 7) & 0xff;
    const views = Array.from({ length: 32 }, (_, i) => buf.subarray(i * 1000, i * 1000 + 5000 + i));
    expect(await Promise.all(views.map((v) => pool!.hash(v)))).toEqual(views.map(sha));
  });

  it('refuses memory the workers cannot share', async () => {
    pool = new Sha256Pool(1);
    await expect(pool.hash(Buffer.alloc(10))).rejects.toThrow(/SharedArrayBuffer/);
  });

  it('fails what is pending, and what comes after, once closed', async () => {
    const p = new Sha256Pool(1);
    await p.close();
    await expect(p.hash(alignedSharedBuffer(10))).rejects.toThrow(/closed/);
  });
});

describe('alignedSharedBuffer', () => {
  it('is shared memory of the size asked for', () => {
    const b = alignedSharedBuffer(4 * 1024 * 1024 + 3);
    expect(b.length).toBe(4 * 1024 * 1024 + 3);
    expect(b.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(b.every((x) => x === 0)).toBe(true);
  });
});
