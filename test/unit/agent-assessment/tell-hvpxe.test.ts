/**
 * hvagent telling hvpxe of a committed fallback (agent/assessment/tell-hvpxe.ts) against a test
 * HTTP server: the event with the node's token as a bearer; a server that is down, or answers 503,
 * tried again until the deadline and then recorded as not told; a refusal not retried; no grant,
 * or one others can read, not used. The fallback controller records the outcome and finishes
 * either way (no reboot, nothing blocked). Time is a fake clock: no timed assertion.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Logger } from '../../../lib/logger.js';
import { tellHvpxe } from '../../../agent/assessment/tell-hvpxe.js';
import type { NodeEventBody } from '../../../config/hvpxe-protocol.js';

const TOKEN = `hvnr_${'t'.repeat(43)}`;
const EVENT: NodeEventBody = { event: 'FALLBACK', at: '2026-12-03T07:00:00.000Z', message: 'network-online failed', running: 'v2', failed: 'v3' };
let dir: string;
let server: http.Server | undefined;
let seen: Array<{ auth?: string; body: string; url?: string }>;
let answers: number[];

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'hv-tell-'));
  seen = [];
  answers = [];
});
afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
  await rm(dir, { recursive: true, force: true });
});

async function listen(): Promise<string> {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push({ auth: req.headers.authorization, body, url: req.url });
      res.statusCode = answers.shift() ?? 204;
      res.end();
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  return `http://127.0.0.1:${(server!.address() as AddressInfo).port}/node-events/node-1`;
}

/** A port nothing listens on: a server that was closed again. */
async function deadUrl(): Promise<string> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}/node-events/node-1`;
}

async function grant(url: string, mode = 0o600): Promise<string> {
  const file = path.join(dir, 'hvpxe-report.json');
  await writeFile(file, JSON.stringify({ url, token: TOKEN, machine: 'node-1', events: ['FALLBACK', 'UPGRADED'] }));
  await chmod(file, mode);
  return file;
}

function opts(logged: string[] = []) {
  const clock = { t: 0 };
  return { clock, o: { log: new Logger({ write: (l: string) => void logged.push(l) }), now: () => clock.t, sleep: async (ms: number) => void (clock.t += ms), deadlineMs: 60_000, retryDelayMs: 5_000, attemptTimeoutMs: 2_000 } };
}

describe('tellHvpxe', () => {
  it('posts the event with the node token as a bearer', async () => {
    const file = await grant(await listen());
    const r = await tellHvpxe(file, EVENT, opts().o);
    expect(r.told).toBe(true);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.auth).toBe(`Bearer ${TOKEN}`);
    expect(seen[0]!.url).toBe('/node-events/node-1');
    expect(JSON.parse(seen[0]!.body)).toEqual(EVENT);
  });

  it('hvpxe down: tried until the deadline, then not told, the token in no log line', async () => {
    const file = await grant(await deadUrl());
    const logged: string[] = [];
    const { clock, o } = opts(logged);
    const r = await tellHvpxe(file, EVENT, { ...o, log: new Logger({ write: (l: string) => void logged.push(l) }, undefined, 'debug') });
    expect(r.told).toBe(false);
    expect(r.detail).toMatch(/not reached within 60 s: .*ECONNREFUSED/);
    expect(clock.t).toBeGreaterThanOrEqual(55_000);
    expect(clock.t).toBeLessThan(60_000);
    expect(logged.length).toBeGreaterThan(5);
    expect(logged.join('')).not.toContain(TOKEN.slice(5));
  });

  it('a 503 is tried again, a 204 after it is told', async () => {
    const file = await grant(await listen());
    answers = [503, 503];
    const r = await tellHvpxe(file, EVENT, opts().o);
    expect(r.told).toBe(true);
    expect(seen).toHaveLength(3);
  });

  it('a refusal (401) is not tried again: not told, with the answer', async () => {
    const file = await grant(await listen());
    answers = [401];
    const r = await tellHvpxe(file, EVENT, opts().o);
    expect(r).toMatchObject({ told: false });
    expect(r.detail).toMatch(/hvpxe refused FALLBACK .*HTTP 401/);
    expect(seen).toHaveLength(1);
  });

  it('no grant on the node: not told, nothing sent', async () => {
    await listen();
    const r = await tellHvpxe(path.join(dir, 'missing.json'), EVENT, opts().o);
    expect(r.told).toBe(false);
    expect(r.detail).toMatch(/not installed by hvpxe/);
    expect(seen).toHaveLength(0);
  });

  it('a grant others can read is not used', async () => {
    const file = await grant(await listen(), 0o644);
    const r = await tellHvpxe(file, EVENT, opts().o);
    expect(r.detail).toMatch(/readable by others than root/);
    expect(seen).toHaveLength(0);
  });
});
