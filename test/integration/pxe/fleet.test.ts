/**
 * The fleet test (bounded, loopback only, stops by itself): 2000 declared machines, 300 of them
 * simulated booting in random order through three `hvpxe serve` processes that share a real
 * three-member etcd: script, credentialed config, kernel and initrd with Range, events, then a
 * reboot through any server. One hvpxe and one etcd member are killed (SIGKILL) mid-run; a machine
 * whose server is gone boots through another (as DHCP pointing elsewhere would send it).
 * Pass: zero double installs (no machine gets two configs, none is offered the installer after its
 * SUCCEEDED was acknowledged), every event acknowledged with a 2xx is in the store, no 5xx except
 * from the killed server, each server's RSS bounded. p50/p99 of the script and config requests and
 * each server's peak RSS are printed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { adminGet, makeTree, profilesYaml, scriptUrls, startHvpxe, stopHvpxe, type Running, type Tree } from './harness.js';
import { EtcdCluster } from './etcd-cluster.js';

const DECLARED = 2000;
const BOOTING = 300;
const WORKERS = 30;
const KILL_AFTER = 100;
const RSS_BOUND_MIB = 512;
const REQUEST_MS = 20_000;

interface Sim {
  name: string;
  mac: string;
  configs: number;
  succeeded: boolean;
  installAfterSuccess: number;
  acked: string[];
  stranded?: string;
}

const etcd = new EtcdCluster();
let dir: string;
let tree: Tree;
const servers: Array<Running & { name: string; alive: boolean; rss: number }> = [];
const latency = { script: [] as number[], config: [] as number[] };
const fiveXX: Array<{ server: string; path: string; status: number }> = [];

function fleetProfiles(t: Tree): string {
  const head = profilesYaml(t, { defaultGroup: false }).split('\ngroups:\n')[0];
  const groups: string[] = [];
  for (let g = 0; g < DECLARED / 100; g++) {
    const machines = Array.from({ length: 100 }, (_, i) => `      - { hostname: r${g}-n${i}, mac: "52:54:01:${g.toString(16).padStart(2, '0')}:00:${i.toString(16).padStart(2, '0')}" }`);
    groups.push(`  - name: rack${g}\n    profile: hv\n    fleet: { vip: 10.1.${g}.250 }\n    values: { disk: nvme-test-1 }\n    machines:\n${machines.join('\n')}`);
  }
  return `${head}\ngroups:\n${groups.join('\n')}\n`;
}

/** One request with a deadline; undefined when the server cannot be reached (killed). */
async function call(s: (typeof servers)[number], p: string, init: RequestInit = {}): Promise<{ status: number; body: Buffer } | undefined> {
  try {
    const r = await fetch(p.startsWith('http') ? p : `${s.url}${p}`, { ...init, signal: AbortSignal.timeout(REQUEST_MS) });
    const body = Buffer.from(await r.arrayBuffer());
    if (r.status >= 500) fiveXX.push({ server: s.name, path: p.replace(/\?.*/, ''), status: r.status });
    return { status: r.status, body };
  } catch {
    return undefined;
  }
}

function live(): (typeof servers)[number] {
  const up = servers.filter((s) => s.alive);
  return up[Math.floor(Math.random() * up.length)]!;
}

async function timed<T>(into: number[], f: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  const r = await f();
  into.push(performance.now() - t0);
  return r;
}

/** Kernel and initrd as iPXE fetches them here: the first 64 KiB, then the rest, by Range. */
async function fetchArtifacts(s: (typeof servers)[number], urls: string[]): Promise<boolean> {
  for (const u of urls) {
    const rel = decodeURIComponent(new URL(u).pathname.replace(/^\/artifacts\//, ''));
    const head = await call(s, u, { headers: { Range: 'bytes=0-65535' } });
    const tail = await call(s, u, { headers: { Range: 'bytes=65536-' } });
    if (!head || !tail || head.status !== 206) return false;
    const whole = tail.status === 206 ? Buffer.concat([head.body, tail.body]) : head.body;
    if (!whole.equals(tree.files[rel]!)) throw new Error(`${u}: other bytes than the file`);
  }
  return true;
}

async function postEvents(s: (typeof servers)[number], m: Sim, eventsUrl: string): Promise<boolean> {
  const bodies = [{ event: 'STARTED' }, { event: 'progress', id: `${m.name}-1` }, { event: 'progress', id: `${m.name}-2` }, { event: 'SUCCEEDED', id: `${m.name}-done` }];
  for (const b of bodies) {
    const r = await call(s, eventsUrl, { method: 'POST', body: JSON.stringify(b) });
    if (r?.status !== 204) return false;
    if (b.id) m.acked.push(b.id);
  }
  m.succeeded = true;
  return true;
}

/** One machine: boots (again when its server is gone) until it installed, or is held on its disk. */
async function boot(m: Sim): Promise<void> {
  for (let attempt = 0; attempt < 6 && !m.succeeded; attempt++) {
    const s = live();
    const script = await timed(latency.script, () => call(s, `/ipxe/auto?mac=${m.mac}&platform=efi`));
    if (!script || script.status !== 200) continue;
    const text = script.body.toString();
    if (!/\nkernel /.test(text)) {
      m.stranded = text.split('\n')[2]?.slice(0, 160);
      return;
    }
    const urls = scriptUrls(text);
    const files = ['kernel', 'initrd'].map((w) => new RegExp(`^${w} .*?(https?://\\S+)`, 'm').exec(text)?.[1] ?? '');
    if (!(await fetchArtifacts(s, files))) continue;
    const config = await timed(latency.config, () => call(s, urls.config!));
    if (config?.status !== 200) continue;
    m.configs++;
    if (!(await postEvents(s, m, urls.events!))) return void (m.stranded = 'its server went away during the install');
  }
  if (!m.succeeded) return;
  // The finished machine reboots, through any server: its disk, never the installer.
  const again = await call(live(), `/ipxe/auto?mac=${m.mac}&platform=efi`);
  if (again && /\nkernel /.test(again.body.toString())) m.installAfterSuccess++;
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

/** What the fleet takes in etcd (docs/fleet.md, sizing): its machine records, credentials and the database. */
async function storeSize(member: string): Promise<{ machines: number; recordBytes: number; largest: number; credentials: number; dbBytes: number }> {
  const post = async (p: string, body: unknown): Promise<any> => (await fetch(`${member}${p}`, { method: 'POST', body: JSON.stringify(body) })).json();
  const range = (prefix: string): Promise<{ kvs?: Array<{ value: string }>; count?: string }> => {
    const end = Buffer.from(prefix);
    end[end.length - 1]++;
    return post('/v3/kv/range', { key: Buffer.from(prefix).toString('base64'), range_end: end.toString('base64') });
  };
  const records = ((await range('/hvpxe/fleet-test/machines/')).kvs ?? []).map((kv) => Buffer.from(kv.value, 'base64').length);
  const creds = await range('/hvpxe/fleet-test/credentials/');
  const status = await post('/v3/maintenance/status', {});
  return { machines: records.length, recordBytes: records.reduce((a, b) => a + b, 0), largest: Math.max(0, ...records), credentials: creds.kvs?.length ?? 0, dbBytes: Number(status.dbSize ?? 0) };
}

const pct = (xs: number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-pxe-fleet-'));
  tree = await makeTree(dir);
  await writeFile(path.join(dir, 'profiles.yaml'), fleetProfiles(tree));
  await etcd.start();
  for (const name of ['rack-a', 'rack-b', 'rack-c']) {
    const r = await startHvpxe(['serve', '--root', tree.root, '--profiles', path.join(dir, 'profiles.yaml'), '--listen', '127.0.0.1:0', '--state-dir', path.join(dir, name), '--store', 'etcd', '--etcd-endpoints', etcd.endpoints, '--etcd-prefix', '/hvpxe/fleet-test', '--server-name', name, '--log-level', 'warn'], 180_000);
    servers.push({ ...r, name, alive: true, rss: 0 });
  }
}, 600_000);

afterAll(async () => {
  await Promise.all(servers.map((s) => stopHvpxe(s)));
  await etcd.stop();
  await rm(dir, { recursive: true, force: true });
});

/** Runs the machines WORKERS at a time; after KILL_AFTER of them, kills one hvpxe and one etcd member. */
async function run(sims: Sim[]): Promise<{ killed: string }> {
  let next = 0;
  let done = 0;
  let killed = '';
  const sampler = setInterval(() => servers.filter((s) => s.alive).forEach((s) => (s.rss = Math.max(s.rss, rssMiB(s.proc.pid!)))), 250);
  const worker = async (): Promise<void> => {
    while (next < sims.length) {
      await boot(sims[next++]!);
      if (++done === KILL_AFTER) {
        const victim = servers[2]!;
        victim.alive = false;
        killed = victim.name;
        victim.proc.kill('SIGKILL');
        await etcd.kill(etcd.members[0]!);
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: WORKERS }, worker));
  } finally {
    clearInterval(sampler);
  }
  return { killed };
}

describe('a fleet: three hvpxe servers on one etcd', () => {
  it('boots 300 of 2000 machines in random order with one server and one etcd member killed: no double install, every acknowledged event stored', async () => {
    const order = Array.from({ length: DECLARED }, (_, i) => i).sort(() => Math.random() - 0.5).slice(0, BOOTING);
    const sims: Sim[] = order.map((i) => ({ name: `r${Math.floor(i / 100)}-n${i % 100}`, mac: `52:54:01:${Math.floor(i / 100).toString(16).padStart(2, '0')}:00:${(i % 100).toString(16).padStart(2, '0')}`, configs: 0, succeeded: false, installAfterSuccess: 0, acked: [] }));
    const t0 = Date.now();
    const { killed } = await run(sims);
    const secs = (Date.now() - t0) / 1000;

    const survivor = servers.find((s) => s.alive)!;
    const listed = JSON.parse((await adminGet(survivor, '/machines')).text) as { machines: Array<{ name: string; events: Array<{ data: { id?: string } }> }> };
    const stored = new Map(listed.machines.map((x) => [x.name, new Set(x.events.map((e) => e.data.id).filter(Boolean))]));
    const lostEvents = sims.flatMap((m) => m.acked.filter((id) => !stored.get(m.name)?.has(id)).map((id) => `${m.name}: ${id}`));
    const installed = sims.filter((m) => m.succeeded).length;
    const size = await storeSize(etcd.members[1]!.clientUrl);
    const stranded = sims.filter((m) => m.stranded);
    console.log(
      [
        `fleet test: ${DECLARED} declared, ${BOOTING} booted in ${secs.toFixed(1)} s through 3 servers (${killed} and etcd ${etcd.members[0]!.name} killed after ${KILL_AFTER})`,
        `installed ${installed}, held on their disk ${stranded.length} (e.g. ${stranded[0]?.stranded ?? '-'})`,
        `script p50 ${pct(latency.script, 50).toFixed(1)} ms p99 ${pct(latency.script, 99).toFixed(1)} ms (${latency.script.length}); config p50 ${pct(latency.config, 50).toFixed(1)} ms p99 ${pct(latency.config, 99).toFixed(1)} ms (${latency.config.length})`,
        `etcd: ${size.machines} machine records, ${(size.recordBytes / size.machines / 1024).toFixed(1)} KiB each on average (largest ${(size.largest / 1024).toFixed(1)} KiB), ${size.credentials} credentials, database ${(size.dbBytes / 1048576).toFixed(1)} MiB`,
        `peak RSS: ${servers.map((s) => `${s.name} ${s.rss.toFixed(0)} MiB`).join(', ')}`,
        `5xx: ${fiveXX.length} (${fiveXX.filter((f) => f.server === killed).length} from ${killed})`,
      ].join('\n'),
    );
    expect(sims.filter((m) => m.configs > 1).map((m) => m.name)).toEqual([]);
    expect(sims.filter((m) => m.installAfterSuccess > 0).map((m) => m.name)).toEqual([]);
    expect(lostEvents).toEqual([]);
    // A 5xx from a live server: its store log lines say why.
    if (fiveXX.some((f) => f.server !== killed)) console.log(servers.map((s) => s.stderr.join('').split('\n').filter((l) => /store/.test(l)).slice(0, 6).join('\n')).join('\n'));
    expect(fiveXX.filter((f) => f.server !== killed)).toEqual([]);
    expect(servers.filter((s) => s.rss > RSS_BOUND_MIB).map((s) => `${s.name} ${s.rss} MiB`)).toEqual([]);
    // The run did what it says: most machines installed, each through one config.
    expect(installed).toBeGreaterThan(BOOTING / 2);
    expect(sims.filter((m) => m.succeeded && m.configs !== 1)).toEqual([]);
  }, 900_000);
});
