/**
 * hvpxe for a fleet, for real: two built `hvpxe serve` processes share a real three-member etcd
 * cluster (Debian's etcd-server on 127.0.0.1). One install per arm whichever server a machine
 * reaches; a SUCCEEDED through one server is a local boot through the other; `hvpxe rearm` against
 * etcd reaches every server by its watch; without quorum no installer and no config is served
 * (artifacts still are, /healthz says degraded) and the recovery needs no restart; one member
 * killed changes nothing for machines.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { waitUntil } from '../../../lib/wait.js';
import { adminGet, bootIpxe, machineOf, makeTree, profilesYaml, runHvpxe, startHvpxe, stopHvpxe, type Running, type Tree } from './harness.js';
import { EtcdCluster } from './etcd-cluster.js';
import { ETCD_REQUEST_TIMEOUT_MS } from '../../../pxe/etcd-client.js';
import { BOOK_LIMITS } from '../../../pxe/machine-book.js';

let dir: string;
let tree: Tree;
let profiles: string;
const etcd = new EtcdCluster();
let servers: Running[] = [];
let prefix = '';

const INSTALL = /\nkernel /;
const LOCAL = /sanboot --no-describe|exit 1|hvpxe: .*(disk|held)/i;

async function startFleet(names = ['a', 'b']): Promise<Running[]> {
  prefix = `/hvpxe/t${randomBytes(4).toString('hex')}`;
  servers = [];
  for (const name of names) servers.push(await startServer(name));
  return servers;
}

function startServer(name: string): Promise<Running> {
  return startHvpxe(['serve', '--root', tree.root, '--profiles', profiles, '--listen', '127.0.0.1:0', '--state-dir', path.join(dir, `state-${name}`), '--store', 'etcd', '--etcd-endpoints', etcd.endpoints, '--etcd-prefix', prefix, '--server-name', name]);
}

async function health(r: Running): Promise<{ status: string; problems: string[] }> {
  return JSON.parse((await adminGet(r, '/healthz')).text) as { status: string; problems: string[] };
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-pxe-etcd-'));
  tree = await makeTree(dir);
  profiles = path.join(dir, 'profiles.yaml');
  await writeFile(profiles, profilesYaml(tree));
  await etcd.start();
}, 120_000);

afterEach(async () => {
  await Promise.all(servers.map((s) => stopHvpxe(s)));
  servers = [];
});

afterAll(async () => {
  await etcd.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('hvpxe on etcd: several servers, one truth', () => {
  it('hands out one install per machine when it asks two servers at once: the other gets its disk', async () => {
    const [a, b] = await startFleet();
    const results: Array<{ mac: string; installs: number; local: number }> = [];
    for (let i = 0; i < 24; i++) {
      const mac = `02:00:00:00:10:${i.toString(16).padStart(2, '0')}`;
      const q = `/ipxe/auto?mac=${mac}&platform=pcbios`;
      const texts = await Promise.all([a, b].map(async (s) => (await fetch(`${s.url}${q}`)).text()));
      results.push({ mac, installs: texts.filter((t) => INSTALL.test(t)).length, local: texts.filter((t) => !INSTALL.test(t) && LOCAL.test(t)).length });
    }
    expect(results.filter((r) => r.installs !== 1 || r.local !== 1)).toEqual([]);
    // The loser says why on the machine's console.
    const m = await machineOf(b, 'spare-020000001000');
    expect(m.claim.server === 'a' || m.claim.server === 'b').toBe(true);
    // Both servers list the same machines, each naming the server that served its script.
    const listA = JSON.parse((await adminGet(a, '/machines')).text);
    const listB = JSON.parse((await adminGet(b, '/machines')).text);
    expect(listA.store).toBe('etcd');
    expect(listA.machines.map((x: { name: string }) => x.name).sort()).toEqual(listB.machines.map((x: { name: string }) => x.name).sort());
  });

  it('a SUCCEEDED through one server is a local boot through the other; hvpxe rearm against etcd reaches both by watch', async () => {
    const [a, b] = await startFleet();
    const boot = await bootIpxe(a, 'mac=52:54:00:00:00:01&platform=pcbios');
    expect(boot.script).toMatch(INSTALL);
    const cfg = await fetch(boot.config!);
    expect(cfg.status).toBe(200);
    expect(await (await fetch(boot.events!, { method: 'POST', body: '{"event":"SUCCEEDED","hostname":"node-1"}' })).status).toBe(204);
    // At once, at the other server: its copy may not have the SUCCEEDED yet, its write is refused and it decides again.
    const onB = await (await fetch(`${b.url}/ipxe/auto?mac=52:54:00:00:00:01&platform=pcbios`)).text();
    expect(onB).not.toMatch(INSTALL);
    expect(onB).toContain('sanboot --no-describe --drive 0x80');
    expect((await machineOf(b, 'node-1')).servedBy).toMatchObject({ script: 'b', config: 'a', event: 'a' });

    const r = await runHvpxe(['rearm', '--store', 'etcd', '--etcd-endpoints', etcd.endpoints, '--etcd-prefix', prefix, 'node-1']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^hvpxe: node-1 \(installed .*\) re-armed in \/hvpxe\/t[0-9a-f]+: its next network boot, through any server, installs it again/);
    // Seen by both without any request for the machine: the watch brought it.
    for (const s of [a, b]) {
      await waitUntil(async () => ((await machineOf(s, 'node-1')).boot.next === 'install' ? { done: true as const, value: true } : { done: false as const, reason: 'not re-armed yet' }), { what: 'the re-arm by watch', timeoutMs: 10_000, intervalMs: 20 });
    }
    expect((await bootIpxe(b, 'mac=52:54:00:00:00:01&platform=pcbios')).script).toMatch(INSTALL);
    const nobody = await runHvpxe(['rearm', '--store', 'etcd', '--etcd-endpoints', etcd.endpoints, '--etcd-prefix', prefix, 'nobody']);
    expect(nobody.code).toBe(1);
    expect(nobody.stderr).toContain(`no machine named nobody under ${prefix}`);
  });

  it('a config is served once per credential, whichever server is asked', async () => {
    const [a, b] = await startFleet();
    const boot = await bootIpxe(a, 'mac=52:54:00:00:00:02&platform=pcbios');
    const viaB = boot.config!.replace(a.url, b.url);
    const [r1, r2] = await Promise.all([fetch(boot.config!), fetch(viaB)]);
    expect([r1.status, r2.status].sort()).toEqual([200, 403]);
  });

});

describe('hvpxe on etcd when members fail', () => {
  it('one member killed: nothing changes for machines', async () => {
    const [a, b] = await startFleet();
    await etcd.kill(etcd.members[0]);
    try {
      const boot = await bootIpxe(b, 'mac=52:54:00:00:00:02&platform=pcbios');
      expect(boot.script).toMatch(INSTALL);
      expect((await fetch(boot.config!)).status).toBe(200);
      expect(await (await fetch(boot.events!, { method: 'POST', body: '{"event":"SUCCEEDED"}' })).status).toBe(204);
      expect((await bootIpxe(a, 'mac=52:54:00:00:00:02&platform=pcbios')).script).not.toMatch(INSTALL);
      expect((await health(a)).status).toBe('ok');
    } finally {
      await etcd.restart(etcd.members[0]);
    }
  });

  it('without quorum: no installer, no config; the disk for known machines; artifacts still served; degraded; back without a restart; a success report it could not store holds the machine', async () => {
    const [a] = await startFleet(['a']);
    const installed = await bootIpxe(a, 'mac=52:54:00:00:00:01&platform=pcbios');
    expect(await (await fetch(installed.events!, { method: 'POST', body: '{"event":"SUCCEEDED"}' })).status).toBe(204);
    const pending = await bootIpxe(a, 'mac=52:54:00:00:00:02&platform=pcbios');
    expect(pending.script).toMatch(INSTALL);
    // A machine in the middle of its install when the store goes away.
    const finishing = await bootIpxe(a, 'mac=52:54:00:00:00:33&platform=pcbios');
    expect((await fetch(finishing.config!)).status).toBe(200);

    await etcd.kill(etcd.members[1]);
    await etcd.kill(etcd.members[2]);
    try {
      await waitUntil(async () => ((await health(a)).status === 'degraded' ? { done: true as const, value: true } : { done: false as const, reason: 'not degraded yet' }), { what: 'degraded health', timeoutMs: 20_000, intervalMs: 100 });
      const h = await health(a);
      expect(h.problems.join('\n')).toMatch(/the machine store \(etcd .*\) cannot be read and written since .*: no install script and no config is served until it can/);
      expect((await fetch(`${a.url}/healthz`)).status).toBe(200);
      // Each request that needs the store waits out the client's deadline (9 s) before hvpxe fails
      // closed: they go together, as several machines' would.
      const [fresh, installedScript, pendingConfig, report] = await Promise.all([
        fetch(`${a.url}/ipxe/auto?mac=52:54:00:00:00:02&platform=pcbios`).then((r) => r.text()),
        fetch(`${a.url}/ipxe/auto?mac=52:54:00:00:00:01&platform=pcbios`).then((r) => r.text()),
        fetch(pending.config!).then((r) => r.status),
        // Its install finishes now: the report cannot be stored, and the installer does not send it again.
        fetch(finishing.events!, { method: 'POST', body: '{"event":"SUCCEEDED"}' }).then((r) => r.status),
      ]);
      // A machine that never installed: its disk and why, never the installer.
      expect(fresh).not.toMatch(INSTALL);
      expect(fresh).toContain('machine store');
      // The installed one: its disk.
      expect(installedScript).toContain('sanboot --no-describe --drive 0x80');
      // A credential issued before the outage: no config without the store.
      expect(pendingConfig).toBe(503);
      expect(report).toBe(503);
      // Artifacts carry no secret and are verified by sha256: still served.
      const art = await fetch(`${a.url}/artifacts/k/vmlinuz`);
      expect(art.status).toBe(200);
      expect(Buffer.from(await art.arrayBuffer()).equals(tree.files['k/vmlinuz'])).toBe(true);
      const metrics = (await adminGet(a, '/metrics')).text;
      expect(metrics).toMatch(/^hvpxe_store_available\{store="etcd"\} 0$/m);
      expect(metrics).toMatch(/^hvpxe_store_refused_total\{what="script"\} [1-9]/m);
      expect(a.stderr.join('')).toContain('machine store unavailable');
    } finally {
      await Promise.all([etcd.restart(etcd.members[1]), etcd.restart(etcd.members[2])]);
    }
    // Back: the store's problem is gone (the machine held below stays one, for the operator).
    await waitUntil(async () => (!(await health(a)).problems.some((p) => p.includes('machine store')) ? { done: true as const, value: true } : { done: false as const, reason: 'the store still unavailable' }), { what: 'recovery', timeoutMs: 30_000, intervalMs: 100 });
    expect((await bootIpxe(a, 'mac=52:54:00:00:00:02&platform=pcbios')).script).toMatch(INSTALL);
    expect(a.stderr.join('')).toContain('machine store available again');
    // The lost report: whether it finished is unknown, so it boots its disk, here and at a server that never saw the report.
    // A retry that began during the outage waits out the store client's deadline before the next one.
    const holdWithinMs = ETCD_REQUEST_TIMEOUT_MS + BOOK_LIMITS.lostSuccessRetryMs + 10_000;
    await waitUntil(async () => ((await machineOf(a, 'spare-525400000033')).hold ? { done: true as const, value: true } : { done: false as const, reason: 'not held yet' }), { what: 'the hold for the lost report', timeoutMs: holdWithinMs, intervalMs: 100 });
    expect((await machineOf(a, 'spare-525400000033')).hold.why).toMatch(/^its install reported success at .* while the machine store could not be written/);
    const b = await startServer('b');
    servers.push(b);
    const onB = await bootIpxe(b, 'mac=52:54:00:00:00:33&platform=pcbios');
    expect(onB.script).not.toMatch(INSTALL);
    expect(onB.script).toContain('reported success at');
    expect(a.stderr.join('')).toContain('machine held: its report of a finished install was lost');
  }, 300_000); // the store requests during the outage wait out the client's 9 s deadline before hvpxe fails closed
});
