import { afterEach, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { HvpxeEventsSink } from '../../../installer/remote/events-sink.js';
import type { Sink } from '../../../installer/steps/progress.js';
import { Logger, MemorySink } from '../../../lib/logger.js';

const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

async function receiver(answer = true) {
  const got: Array<Record<string, unknown>> = [];
  const s = http.createServer((req, res) => {
    let b = '';
    req.on('data', (c) => (b += c));
    req.on('end', () => {
      got.push(JSON.parse(b));
      if (answer) res.end();
    });
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return { got, url: `http://127.0.0.1:${(s.address() as AddressInfo).port}/events/node-1` };
}

const quiet = () => new Logger(new MemorySink());

describe('HvpxeEventsSink', () => {
  it('is a progress-bus sink that forwards events in order and coalesces byte progress', async () => {
    const r = await receiver();
    const sink: Sink = new HvpxeEventsSink(r.url, quiet(), { now: () => 1000 });
    const ev = (e: Record<string, unknown>) => ({ ...e, ts: 't', elapsedMs: 0 }) as never;
    sink.event(ev({ type: 'step', phase: 'started', step: 'deploy', index: 3, total: 9 }));
    for (let i = 1; i <= 10; i++) sink.event(ev({ type: 'bytes', step: 'deploy', done: i, total: 10, rateBytesPerSec: 1 }));
    sink.event(ev({ type: 'step', phase: 'done', step: 'deploy', index: 3, total: 9 }));
    await sink.close?.();
    expect(r.got.map((e) => `${e.type}${e.type === 'bytes' ? e.done : ` ${e.phase}`}`)).toEqual(['step started', 'bytes1', 'bytes10', 'step done']);
  });

  it('redacts secrets, and does nothing without a URL', async () => {
    const log = quiet();
    log.redactor.add('cluster-token-secret');
    const r = await receiver();
    const s1 = new HvpxeEventsSink(r.url, log);
    s1.event({ type: 'message', level: 'info', message: 'token is cluster-token-secret' });
    await s1.close();
    expect(r.got[0].message).toBe('token is <redacted>');

    const none = new HvpxeEventsSink(undefined, log);
    none.event({ type: 'message', message: 'x' });
    await none.close();
  });

  it('close() gives up on a server that never answers: it returns while the post is still unanswered, and the bounded queue dropped the oldest', async () => {
    // The server holds every response until released; the release is a safety valve (10 s, inside
    // the test timeout) so that a close() that waits for the server fails on the assertion below.
    const held: http.ServerResponse[] = [];
    const got: string[] = [];
    let firstArrived!: () => void;
    const arrived = new Promise<void>((r) => (firstArrived = r));
    let released = false;
    const s = http.createServer((req, res) => {
      let b = '';
      req.on('data', (c) => (b += c));
      req.on('end', () => {
        got.push((JSON.parse(b) as { message: string }).message);
        firstArrived();
        if (released) res.end();
        else held.push(res);
      });
    });
    servers.push(s);
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    const release = (): void => {
      released = true;
      for (const res of held.splice(0)) res.end();
    };
    const valve = setTimeout(release, 10_000);
    try {
      const sink = new HvpxeEventsSink(`http://127.0.0.1:${(s.address() as AddressInfo).port}/events/node-1`, quiet(), { closeTimeoutMs: 200, postTimeoutMs: 60_000, maxQueued: 2 });
      for (let i = 0; i < 5; i++) sink.event({ type: 'message', message: `m${i}` });
      await arrived;
      await sink.close();
      expect(released, 'close() waited for the server to answer').toBe(false);
      // m0 went out at once and is still unanswered; of m1..m4 the queue (2) kept the newest.
      expect(got).toEqual(['m0']);
      expect(sink.dropped).toBe(2);
    } finally {
      clearTimeout(valve);
      release();
    }
  });
});
