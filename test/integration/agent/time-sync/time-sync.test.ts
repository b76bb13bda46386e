/**
 * time-sync on real parts: two network namespaces joined by a veth pair, a real NTP server (chronyd
 * serving its local clock) on one side and the node's chronyd, a client, on the other; the guard
 * reads the client through chronyc. Neither daemon may touch this machine's clock (-x), so "a
 * clock years off" is the join server's: an HTTPS server whose Date header says another year, and
 * one that sends no Date at all. systemd-timesyncd is not run here (it would set the host's
 * clock); its path is read the same way in the first-boot e2e of the systemd test OS.
 */
import { randomBytes } from 'node:crypto';
import https from 'node:https';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { beforeAll, describe, it } from 'vitest';
import { run } from '../../../../lib/exec.js';
import { Logger, MemorySink } from '../../../../lib/logger.js';
import { Redactor } from '../../../../lib/redact.js';
import { runGuards } from '../../../../agent/runner.js';
import { defaultSettings } from '../../../../agent/settings.js';
import { fetchChrony, startChronyd, type Chrony, type ChronyDaemon } from './chrony.js';

let chrony: Chrony;
const ip = (...args: string[]) => run('ip', args, { timeoutMs: 10_000 });

beforeAll(async () => {
  chrony = await fetchChrony();
}, 300_000);

/** One test's two namespaces (the node, the NTP server) joined by a veth pair, its dir, log and daemons. */
interface Pair {
  node: string;
  srv: string;
  dir: string;
  sink: MemorySink;
  daemons: ChronyDaemon[];
  servers: https.Server[];
}

/** A pair of namespaces for one test, taken down when it finishes: the tests run side by side, each on its own. */
async function pair(onTestFinished: (fn: () => Promise<void>) => void): Promise<Pair> {
  const id = randomBytes(3).toString('hex');
  const p: Pair = { node: `hvts-${id}-node`, srv: `hvts-${id}-ntp`, dir: await mkdtemp(path.join(tmpdir(), 'hvagent-time-')), sink: new MemorySink(), daemons: [], servers: [] };
  onTestFinished(async () => {
    for (const d of p.daemons.splice(0)) await d.stop();
    for (const s of p.servers.splice(0)) await new Promise((r) => s.close(r));
    await ip('netns', 'del', p.node).catch(() => undefined);
    await ip('netns', 'del', p.srv).catch(() => undefined);
    await rm(p.dir, { recursive: true, force: true });
  });
  await ip('netns', 'add', p.node);
  await ip('netns', 'add', p.srv);
  await ip('-n', p.node, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', p.srv);
  await ip('-n', p.srv, 'addr', 'add', '10.89.0.1/24', 'dev', 'eth0');
  await ip('-n', p.node, 'addr', 'add', '10.89.0.2/24', 'dev', 'eth0');
  for (const ns of [p.node, p.srv]) {
    await ip('-n', ns, 'link', 'set', 'eth0', 'up');
    await ip('-n', ns, 'link', 'set', 'lo', 'up');
  }
  return p;
}

async function ntpServer(p: Pair): Promise<void> {
  p.daemons.push(await startChronyd(chrony, p.srv, path.join(p.dir, 'ntp-server'), ['local stratum 8', 'allow 10.89.0.0/24', 'bindaddress 10.89.0.1', 'port 123']));
}

async function nodeClient(p: Pair): Promise<ChronyDaemon> {
  const d = await startChronyd(chrony, p.node, path.join(p.dir, 'node-chrony'), ['server 10.89.0.1 iburst minpoll -2 maxpoll 0', 'port 0']);
  p.daemons.push(d);
  return d;
}

/** An HTTPS "join server" on loopback whose Date says what `date` returns (nothing: no Date header). */
async function joinServer(p: Pair, date: () => string | undefined): Promise<string> {
  const key = path.join(p.dir, 'key.pem');
  const cert = path.join(p.dir, 'cert.pem');
  await run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=127.0.0.1', '-days', '1', '-keyout', key, '-out', cert]);
  const s = https.createServer({ key: await readFile(key), cert: await readFile(cert) }, (_req, res) => {
    const d = date();
    res.sendDate = false;
    if (d) res.setHeader('Date', d);
    res.end('pong');
  });
  p.servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `https://127.0.0.1:${(s.address() as AddressInfo).port}/ping`;
}

async function runTimeSync(p: Pair, guard: Record<string, unknown>, deadline = '60s') {
  const s = defaultSettings();
  s.backoff = { initialMs: 200, maxMs: 500 };
  s.guards['time-sync'] = { deadline, daemon: 'chrony', chronyc: chrony.chronyc, netns: p.node, pollWindow: '1s', pollInterval: '200ms', ...guard };
  const log = new Logger(p.sink, new Redactor(), 'debug');
  const r = await runGuards({ mode: 'once', rootDir: p.dir, settings: s, log, signal: new AbortController().signal, only: ['time-sync'] });
  return r.status.guards.find((g) => g.name === 'time-sync')!;
}

// Each test waits on chronyd (a few seconds to synchronise) or on a deadline, on namespaces of its
// own: they run side by side.
describe.concurrent('time-sync with chronyd in network namespaces', () => {
  it('waits for the node\'s chronyd to synchronise to the NTP server, then reports the server and offset', async ({ expect, onTestFinished }) => {
    const p = await pair(onTestFinished);
    await ntpServer(p);
    const client = await nodeClient(p);
    const g = await runTimeSync(p, { chronySocket: client.socket, syncWait: '30s' });
    expect(g.phase).toBe('succeeded');
    expect(g.detail).toMatch(/^chronyd synchronised to 10\.89\.0\.1 \(offset \d+\.\d s\)$/);
    expect(g.data).toMatchObject({ verdict: 'ok', confirmed: true, reference: 'ntp', daemon: 'chrony', synchronised: true, ntpServer: '10.89.0.1' });
  });

  it('says the NTP server is unreachable, and lets the bootstrap go ahead unconfirmed after the wait', async ({ expect, onTestFinished }) => {
    const p = await pair(onTestFinished);
    const client = await nodeClient(p);
    const g = await runTimeSync(p, { chronySocket: client.socket, syncWait: '2s' });
    expect(g.phase).toBe('succeeded');
    expect(g.detail).toMatch(/^clock not confirmed \(.*\): chronyd not synchronised: no NTP source selected: 10\.89\.0\.1 unreachable after \d s; RKE2 starts anyway$/);
    expect(g.data).toMatchObject({ confirmed: false, synchronised: false });
    expect(p.sink.lines.some((l) => l.includes('clock not confirmed; the bootstrap goes ahead'))).toBe(true);
  });

  it('holds RKE2 back when the join server\'s clock is years ahead, naming the offset, until the deadline', async ({ expect, onTestFinished }) => {
    const p = await pair(onTestFinished);
    await ntpServer(p);
    const client = await nodeClient(p);
    const url = await joinServer(p, () => new Date(Date.now() + 3 * 365 * 86_400_000).toUTCString());
    const g = await runTimeSync(p, { chronySocket: client.socket, syncWait: '30s', serverUrl: url }, '4s');
    expect(g.phase).toBe('failed');
    expect(g.lastError).toMatch(/^not reached within 4 s \(\d+ attempts?\): the clock is 9460\d{4} s \(1095 days\) behind the join server's \(https:\/\/127\.0\.0\.1:\d+\/ping Date .*\)/);
    expect(g.data).toMatchObject({ verdict: 'wrong', reference: 'server' });
  });

  it('takes a join server that sends no Date as no evidence, saying so', async ({ expect, onTestFinished }) => {
    const p = await pair(onTestFinished);
    await ntpServer(p);
    const client = await nodeClient(p);
    const url = await joinServer(p, () => undefined);
    const g = await runTimeSync(p, { chronySocket: client.socket, syncWait: '30s', serverUrl: url });
    expect(g.phase).toBe('succeeded');
    expect(g.detail).toMatch(/^chronyd synchronised to 10\.89\.0\.1 \(offset .*\); the join server's clock is unknown: it answered HTTP 200 without a Date header$/);
  });
});
