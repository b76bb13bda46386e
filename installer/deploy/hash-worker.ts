import { Worker } from 'node:worker_threads';

/**
 * A sha256 computed on a worker thread, fed views of SharedArrayBuffer chunks in order, so that
 * several images are hashed in parallel while the main thread keeps the disk busy. The worker
 * is plain JavaScript evaluated from a string, so it runs the same from dist/ and under vitest.
 * After digest() (or reset()) it starts a new hash: one worker serves the files of a tree one
 * after another, where a worker per file cost its start-up (tens of ms of CPU) each time.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
let hash = createHash('sha256');
parentPort.on('message', (m) => {
  if (m.type === 'chunk') {
    hash.update(new Uint8Array(m.buffer, m.offset, m.length));
    parentPort.postMessage({ type: 'ack' });
  } else if (m.type === 'digest') {
    parentPort.postMessage({ type: 'digest', hex: hash.digest('hex') });
    hash = createHash('sha256');
  } else if (m.type === 'reset') {
    hash = createHash('sha256');
  }
});
`;

export class WorkerSha256 {
  private readonly worker = new Worker(WORKER_SOURCE, { eval: true });
  private readonly acks: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  private digestWaiter?: { resolve: (hex: string) => void; reject: (e: Error) => void };
  private failure?: Error;

  constructor() {
    this.worker.unref();
    this.worker.on('message', (m: { type: string; hex?: string }) => {
      if (m.type === 'ack') this.acks.shift()?.resolve();
      else if (m.type === 'digest') this.digestWaiter?.resolve(m.hex!);
    });
    this.worker.on('error', (e) => this.fail(e));
    this.worker.on('exit', (code) => this.fail(new Error(`hash worker exited (${code})`)));
  }

  private fail(e: Error): void {
    this.failure ??= e;
    for (const a of this.acks.splice(0)) a.reject(e);
    this.digestWaiter?.reject(e);
  }

  /** Hashes view (which must be backed by a SharedArrayBuffer); resolves once the worker is done with it. */
  update(view: Uint8Array): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.acks.push({ resolve, reject });
      this.worker.postMessage({ type: 'chunk', buffer: view.buffer, offset: view.byteOffset, length: view.byteLength });
    });
  }

  digest(): Promise<string> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.digestWaiter = { resolve, reject };
      this.worker.postMessage({ type: 'digest' });
    });
  }

  /** Drops what was hashed so far (a file abandoned part-way); the next update starts a new hash. */
  reset(): void {
    if (!this.failure) this.worker.postMessage({ type: 'reset' });
  }

  async close(): Promise<void> {
    this.worker.removeAllListeners('exit');
    await this.worker.terminate();
  }
}

/** A Buffer over new shared memory, so workers can read it without a copy. */
export function sharedBuffer(size: number): Buffer {
  return Buffer.from(new SharedArrayBuffer(size));
}
