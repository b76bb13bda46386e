import os from 'node:os';
import { Worker } from 'node:worker_threads';

/**
 * sha256 of independent buffers on a pool of worker threads: the chunks of an image digest do not
 * depend on each other, so every core can hash while the main thread reads and writes. Buffers
 * must be backed by a SharedArrayBuffer (no copy) and left unchanged until their hash resolves.
 * The worker is JavaScript evaluated from a string, so it runs the same from dist/ and under vitest.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
parentPort.on('message', (m) => {
  const hex = createHash('sha256').update(new Uint8Array(m.buffer, m.offset, m.length)).digest('hex');
  parentPort.postMessage({ id: m.id, hex });
});
`;

interface Pending {
  resolve: (hex: string) => void;
  reject: (e: Error) => void;
}

interface PoolWorker {
  worker: Worker;
  pending: Map<number, Pending>;
}

export class Sha256Pool {
  private readonly workers: PoolWorker[];
  private nextId = 0;
  private failure?: Error;

  constructor(size = Math.max(1, Math.min(4, os.availableParallelism()))) {
    this.workers = Array.from({ length: size }, () => this.spawn());
  }

  private spawn(): PoolWorker {
    const w: PoolWorker = { worker: new Worker(WORKER_SOURCE, { eval: true }), pending: new Map() };
    w.worker.unref();
    w.worker.on('message', (m: { id: number; hex: string }) => {
      const p = w.pending.get(m.id);
      w.pending.delete(m.id);
      p?.resolve(m.hex);
    });
    w.worker.on('error', (e) => this.fail(e));
    w.worker.on('exit', (code) => this.fail(new Error(`sha256 worker exited (${code})`)));
    return w;
  }

  private fail(e: Error): void {
    this.failure ??= e;
    for (const w of this.workers ?? []) {
      for (const p of w.pending.values()) p.reject(this.failure);
      w.pending.clear();
    }
  }

  /** The sha256 (hex) of view, computed on the least busy worker. */
  hash(view: Uint8Array): Promise<string> {
    if (this.failure) return Promise.reject(this.failure);
    if (!(view.buffer instanceof SharedArrayBuffer)) return Promise.reject(new TypeError('Sha256Pool.hash needs a view of a SharedArrayBuffer'));
    const w = this.workers.reduce((a, b) => (b.pending.size < a.pending.size ? b : a));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      w.pending.set(id, { resolve, reject });
      w.worker.postMessage({ id, buffer: view.buffer, offset: view.byteOffset, length: view.byteLength });
    });
  }

  async close(): Promise<void> {
    for (const w of this.workers) w.worker.removeAllListeners('exit');
    this.fail(new Error('sha256 pool closed'));
    await Promise.all(this.workers.map((w) => w.worker.terminate()));
  }
}
