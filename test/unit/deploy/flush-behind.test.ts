import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FlushBehind, flushWhileWriting } from '../../../installer/deploy/flush-behind.js';

/** A FileHandle stand-in that counts flushes; datasync can be held open or made to fail. */
function fakeHandle(opts: { failDatasync?: Error } = {}) {
  const calls = { datasync: 0, sync: 0 };
  let release: () => void = () => undefined;
  const fh = {
    datasync: () => {
      calls.datasync++;
      if (opts.failDatasync) return Promise.reject(opts.failDatasync);
      return new Promise<void>((r) => (release = r));
    },
    sync: () => {
      calls.sync++;
      return Promise.resolve();
    },
  };
  return { fh: fh as unknown as FileHandle, calls, release: () => release() };
}

describe('FlushBehind', () => {
  it('starts a flush once enough has been written, and never two at once', async () => {
    const f = fakeHandle();
    const fb = new FlushBehind(f.fh, 100);
    fb.wrote(60);
    expect(f.calls.datasync).toBe(0);
    fb.wrote(60);
    expect(f.calls.datasync).toBe(1);
    fb.wrote(500); // one is running: no second
    expect(f.calls.datasync).toBe(1);
    f.release();
    await new Promise((r) => setImmediate(r));
    fb.wrote(100);
    expect(f.calls.datasync).toBe(2);
    f.release();
    await fb.finish();
    expect(f.calls.sync).toBe(1);
  });

  it('throws a failed intermediate flush from finish(), so an EIO is never lost', async () => {
    const eio = Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
    const f = fakeHandle({ failDatasync: eio });
    const fb = new FlushBehind(f.fh, 1);
    fb.wrote(10);
    await expect(fb.finish()).rejects.toBe(eio);
    expect(f.calls.sync).toBe(0);
  });
});

describe('flushWhileWriting', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'hv-flush-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("returns the writer's result after flushing along the way", async () => {
    const file = path.join(dir, 'img');
    await writeFile(file, 'x');
    const writer = new Promise<string>((r) => setTimeout(() => r('done'), 60));
    expect(await flushWhileWriting(file, writer, 5)).toBe('done');
  });

  it("passes the writer's failure on", async () => {
    const file = path.join(dir, 'img2');
    await writeFile(file, 'x');
    await expect(flushWhileWriting(file, Promise.reject(new Error('mke2fs failed')), 5)).rejects.toThrow('mke2fs failed');
  });

  it("leaves a file it cannot open to the writer (flushing only helps speed)", async () => {
    expect(await flushWhileWriting(path.join(dir, 'missing'), Promise.resolve(1))).toBe(1);
    await expect(flushWhileWriting(path.join(dir, 'missing'), Promise.reject(new Error('no such file')))).rejects.toThrow('no such file');
  });
});
