/**
 * hvpxe under faults and misuse, for real (the built `hvpxe serve`, some runs as the unprivileged
 * user nobody so that file permissions bite): an event body nested thousands of levels deep, a
 * history that cannot be read, a history that cannot be written while a machine finishes, a
 * restart after each (a machine whose end hvpxe cannot know boots its disk), secrets placed inside
 * --root, fleet conflicts, a SIGHUP during start-up, a dotted hostname, and what the text log says.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, stat, symlink, truncate, writeFile } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { waitUntil } from '../../../lib/wait.js';
import { adminGet, bootIpxe, CLI, machineOf, makeTree, profilesYaml, runHvpxe, startHvpxe, stopHvpxe, type Running, type Tree } from './harness.js';

const NOBODY = 65534;
const AS_NOBODY = ['setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--'];

let dir: string;
let tree: Tree;
let profiles: string;
let hv: Running | undefined;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-pxe-trust-'));
  // nobody must reach the tree and profiles.yaml (test secrets only).
  await chmod(dir, 0o755);
  tree = await makeTree(dir);
  profiles = path.join(dir, 'profiles.yaml');
  await writeFile(profiles, profilesYaml(tree), { mode: 0o644 });
});

afterEach(async () => {
  await stopHvpxe(hv);
  hv = undefined;
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A state directory owned by nobody. */
async function nobodysState(name: string): Promise<string> {
  const state = path.join(dir, name);
  await mkdir(state, { mode: 0o700 });
  await chown(state, NOBODY, NOBODY);
  return state;
}

function serveArgs(state: string, extra: string[] = []): string[] {
  return ['serve', '--root', tree.root, '--profiles', profiles, '--listen', '127.0.0.1:0', '--state-dir', state, ...extra];
}

async function post(url: string, body: string): Promise<number> {
  const r = await fetch(url, { method: 'POST', body });
  await r.arrayBuffer();
  return r.status;
}

async function health(): Promise<{ status: string; problems: string[] }> {
  return JSON.parse((await adminGet(hv!, '/healthz')).text) as { status: string; problems: string[] };
}

/** The first problem /healthz reports (after a SIGHUP: the refused reload), once there is one. */
async function firstProblem(): Promise<string> {
  return waitUntil(
    async () => {
      const h = await health();
      return h.problems.length ? { done: true as const, value: h.problems[0]! } : { done: false as const, reason: 'no reload yet' };
    },
    { what: 'the refused reload', timeoutMs: 30_000, intervalMs: 200 },
  );
}

describe('the machine history cannot be lost or silently stop', () => {
  it('a body nested 7000 levels deep is kept as a bounded summary; a later SUCCEEDED survives a restart and SIGTERM is prompt', async () => {
    const state = path.join(dir, 'state-nested');
    hv = await startHvpxe(serveArgs(state));
    const node2 = await bootIpxe(hv, 'mac=52:54:00:00:00:02');
    const deep = '['.repeat(7000) + ']'.repeat(7000) + ' '.repeat(28_000);
    expect(deep.length).toBeGreaterThan(40_000);
    expect(await post(node2.events!, deep)).toBe(204);
    // Two 24 KB bodies, nested and wide: what is kept stays small.
    const wide = JSON.stringify({ event: 'progress', items: JSON.parse('['.repeat(3000) + ']'.repeat(3000)), pad: 'p'.repeat(18_000) });
    expect(await post(node2.events!, wide)).toBe(204);
    expect(await post(node2.events!, wide)).toBe(204);
    expect(await post(node2.events!, '{"event":"SUCCEEDED","hostname":"node-2"}')).toBe(204);
    const m = await machineOf(hv, 'node-2');
    expect(m.events[0]).toMatchObject({ event: 'event', data: {}, note: 'body nested deeper than 8 levels: not kept' });
    expect(m.installed.via).toBe('SUCCEEDED webhook');
    const stopped = await stopHvpxe(hv);
    expect(stopped).toEqual({ code: 0, signal: null });
    expect((await stat(path.join(state, 'machines.json'))).size).toBeLessThan(64 * 1024);
    hv = await startHvpxe(serveArgs(state));
    const again = (await bootIpxe(hv, 'mac=52:54:00:00:00:02')).script;
    expect(again).toContain('node-2 is installed');
    expect(again).not.toMatch(/^kernel /m);
  });

  it('an unreadable history refuses start (exit 2, the path, what to do) and reload', async () => {
    const state = await nobodysState('state-unreadable');
    const file = path.join(state, 'machines.json');
    await writeFile(file, JSON.stringify({ version: 2, savedAt: new Date().toISOString(), machines: [] }), { mode: 0o600 });
    const refused = await runHvpxe(serveArgs(state, ['--admin-listen', '127.0.0.1:0']), AS_NOBODY, 20_000);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`cannot read the machine history ${file}: EACCES`);
    expect(refused.stderr).toContain('hvpxe needs it to know which machines finished installing');
    // Readable at start, unreadable at the reload: the reload is refused and says why.
    await chown(file, NOBODY, NOBODY);
    hv = await startHvpxe(serveArgs(state), 60_000, AS_NOBODY);
    await chown(file, 0, 0);
    hv.proc.kill('SIGHUP');
    const problem = await firstProblem();
    expect(problem).toContain(`the last reload of profiles.yaml was refused (still serving the previous profiles): cannot read the machine history ${file}: EACCES`);
  });

  it('a write that fails is retried, reported, and a SUCCEEDED it could not save is not taken for an unfinished install after a restart', async () => {
    const state = await nobodysState('state-readonly');
    hv = await startHvpxe(serveArgs(state), 60_000, AS_NOBODY);
    const node1 = await bootIpxe(hv, 'mac=52:54:00:00:00:01');
    expect((await fetch(node1.config!)).status).toBe(200);
    await chmod(state, 0o500);
    expect(await post(node1.events!, '{"event":"STARTED"}')).toBe(204);
    const problem = await waitUntil(
      async () => {
        const h = await health();
        return h.problems.some((p) => p.includes('cannot be written')) ? { done: true as const, value: h } : { done: false as const, reason: JSON.stringify(h) };
      },
      { what: 'the failed write in /healthz', timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(problem.status).toBe('degraded');
    expect(problem.problems.find((p) => p.includes('cannot be written'))).toMatch(/^the machine history .*machines\.json cannot be written since .* \(EACCES.*\); retrying, and no config is served until it can$/);
    const metrics = (await adminGet(hv, '/metrics')).text;
    expect(metrics).toMatch(/^hvpxe_history_writable 0$/m);
    expect(Number(/^hvpxe_history_write_failures_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(1);
    expect(hv.stderr.join('')).toContain('cannot save the machine history; retrying');
    // While the history cannot be written, no config goes out (its single use could not be recorded).
    const node2 = await bootIpxe(hv, 'mac=52:54:00:00:00:02');
    expect((await fetch(node2.config!)).status).toBe(503);
    expect(await post(node1.events!, '{"event":"SUCCEEDED"}')).toBe(204);
    expect(await stopHvpxe(hv)).toEqual({ code: 0, signal: null });
    expect(hv.stderr.join('')).toContain('machine history not saved before stopping');
    // The file still says node-1 was installing: hvpxe cannot tell whether it finished, so it boots its disk.
    hv = await startHvpxe(serveArgs(state), 60_000, AS_NOBODY);
    const held = (await bootIpxe(hv, 'mac=52:54:00:00:00:01')).script;
    expect(held).not.toMatch(/^kernel /m);
    expect(held).toContain('echo hvpxe: node-1: hvpxe stopped while its install was running');
    expect((await machineOf(hv, 'node-1')).boot).toMatchObject({ next: 'local' });
    // It reports again (its boot credential survived in the history): the hold ends with the outcome.
    await chmod(state, 0o700);
    expect(await post(node1.events!.replace(/^http:\/\/[^/]+/, hv.url), '{"event":"SUCCEEDED"}')).toBe(204);
    expect((await machineOf(hv, 'node-1')).installed.via).toBe('SUCCEEDED webhook');
    expect((await machineOf(hv, 'node-1')).hold).toBeUndefined();
  });
});

describe('what must never be served', () => {
  it('refuses profiles.yaml and a TLS key inside --root, at start (exit 2) and at reload', async () => {
    const inside = path.join(tree.root, 'profiles.yaml');
    await writeFile(inside, await readFile(profiles));
    const r = await runHvpxe(['serve', '--root', tree.root, '--profiles', inside, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0', '--state-dir', path.join(dir, 'state-inside')], [], 20_000);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`profiles.yaml (every machine's secrets) ${inside} is inside --root`);
    await rm(inside);
    const key = path.join(tree.root, 'k', 'tls.key');
    await writeFile(key, 'not really a key');
    const k = await runHvpxe(['serve', '--root', tree.root, '--profiles', profiles, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0', '--state-dir', path.join(dir, 'state-inside'), '--tls-cert', key, '--tls-key', key], [], 20_000);
    expect(k.code).toBe(2);
    expect(k.stderr).toContain(`the TLS key ${key} is inside --root`);
    await rm(key);
    // At reload: profiles.yaml is a link the operator re-points into the root.
    const link = path.join(dir, 'profiles-link.yaml');
    await symlink(profiles, link);
    hv = await startHvpxe(['serve', '--root', tree.root, '--profiles', link, '--listen', '127.0.0.1:0', '--state-dir', path.join(dir, 'state-reload')]);
    await writeFile(inside, await readFile(profiles));
    await rm(link);
    await symlink(inside, link);
    hv.proc.kill('SIGHUP');
    const problem = await firstProblem();
    expect(problem).toContain(`profiles.yaml (every machine's secrets) ${link} is inside --root`);
    await rm(inside);
  });
});

describe('fleet conflicts', () => {
  const conflicts: Array<[string, (t: string) => string, RegExp]> = [
    ['two machines with the same static address', (t) => t.replace('- { hostname: node-2, mac: "52:54:00:00:00:02" }', '- { hostname: node-2, mac: "52:54:00:00:00:02", ip: 10.0.0.13/24, gateway: 10.0.0.1, dns: [10.0.0.1] }'), /machines node-2 and node-3 both have the static address 10\.0\.0\.13/],
    ['a machine whose address is the VIP', (t) => t.replace('ip: 10.0.0.13/24', 'ip: 10.0.0.100/24'), /machine node-3's static address 10\.0\.0\.100 is the VIP that machine node-1 creates/],
    ['a join node whose server_url is its own address', (t) => t.replace('config: { install: { management_interface', 'config: { server_url: "https://10.0.0.13:443", install: { management_interface'), /machine node-3 joins the cluster at its own address 10\.0\.0\.13 \(server_url\)/],
    ['the same MAC under two machines (in another case and spelling)', (t) => t.replace('mac: "52:54:00:00:00:01"', 'mac: "52:54:00:AA:BB:CC"').replace('mac: "52:54:00:00:00:02"', 'mac: "52-54-00-aa-bb-cc"'), /machines 'node-1' \(group rack1\) and 'node-2' \(group rack1\) have the same MAC 52:54:00:aa:bb:cc/],
    ['the same UUID under two machines', (t) => t.replace('mac: "52:54:00:00:00:02"', 'uuid: "11111111-2222-3333-4444-555555555555"'), /machines 'node-2' \(group rack1\) and 'node-3' \(group rack1\) have the same UUID 11111111-2222-3333-4444-555555555555/],
  ];
  it.each(conflicts)('refuses %s, naming both machines', async (_what, edit, message) => {
    const file = path.join(dir, `conflict-${Math.random().toString(16).slice(2)}.yaml`);
    const text = edit(profilesYaml(tree, { defaultGroup: false }));
    expect(text).not.toBe(profilesYaml(tree, { defaultGroup: false }));
    await writeFile(file, text);
    const r = await runHvpxe(['serve', '--root', tree.root, '--profiles', file, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0', '--state-dir', path.join(dir, 'state-conflict')], [], 20_000);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(message);
  });
});

describe('small defects', () => {
  it('a SIGHUP during start-up does not kill hvpxe: it reloads once started', async () => {
    const state = path.join(dir, 'state-hup');
    // A 512 MiB artifact (sparse): checking its sha256 keeps hvpxe starting for a second or more
    // (with 2 GiB, checked at start and again at the reload, this test took 24 s).
    const big = path.join(tree.root, 'big.img');
    await writeFile(big, '');
    await truncate(big, 512 * 1024 ** 2);
    const file = path.join(dir, 'hup.yaml');
    // sha256 of 512 MiB of zeros (sha256sum of the sparse file).
    await writeFile(file, profilesYaml(tree).replace('artifacts:\n', 'artifacts:\n  big: { path: big.img, sha256: "9acca8e8c22201155389f65abbf6bc9723edc7384ead80503839f49dcc56d767" }\n'));
    const args = ['serve', '--root', tree.root, '--profiles', file, '--listen', '127.0.0.1:0', '--state-dir', state, '--admin-listen', '127.0.0.1:0', '--log-format', 'json'];
    const proc = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    proc.stdout.on('data', (d) => (out += d));
    proc.stderr.on('data', (d) => (err += d));
    // As soon as it says it is starting (before the artifacts are checked), or, for an hvpxe that says nothing, a few seconds in.
    await waitUntil(async () => (/"msg":"starting"/.test(err) ? { done: true as const, value: true } : { done: false as const, reason: 'not starting yet' }), { what: 'start-up', timeoutMs: 5_000, intervalMs: 5 }).catch(() => undefined);
    expect(out).not.toContain('hvpxe: serving');
    proc.kill('SIGHUP');
    const serving = await waitUntil(async () => (/hvpxe: serving/.test(out) ? { done: true as const, value: true } : proc.exitCode !== null || proc.signalCode ? { done: true as const, value: false } : { done: false as const, reason: 'not serving yet' }), {
      what: 'hvpxe to serve',
      timeoutMs: 60_000,
      intervalMs: 50,
    });
    try {
      expect({ serving, signal: proc.signalCode }).toEqual({ serving: true, signal: null });
      await waitUntil(async () => (/"msg":"reloaded"/.test(err) ? { done: true as const, value: true } : { done: false as const, reason: 'no reload yet' }), { what: 'the deferred reload', timeoutMs: 30_000, intervalMs: 50 });
    } finally {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGTERM');
        await new Promise((r) => proc.once('exit', r));
      }
      await rm(big);
    }
  });

  it('a dotted hostname gets config, event and re-arm that work', async () => {
    const file = path.join(dir, 'dotted.yaml');
    await writeFile(file, profilesYaml(tree).replace('hostname: node-2, mac', 'hostname: node-2.rack1.example.com, mac'));
    const state = path.join(dir, 'state-dotted');
    hv = await startHvpxe(['serve', '--root', tree.root, '--profiles', file, '--listen', '127.0.0.1:0', '--state-dir', state]);
    const b = await bootIpxe(hv, 'mac=52:54:00:00:00:02');
    expect(b.config).toMatch(/\/config\/node-2\.rack1\.example\.com\.yaml\?/);
    const config = await fetch(b.config!);
    expect(config.status).toBe(200);
    expect(await config.text()).toContain('hostname: node-2.rack1.example.com');
    expect(await post(b.events!, '{"event":"SUCCEEDED"}')).toBe(204);
    expect((await machineOf(hv, 'node-2.rack1.example.com')).installed).toBeDefined();
    const r = await runHvpxe(['rearm', '--state-dir', state, 'node-2.rack1.example.com']);
    expect(r.code, r.stderr).toBe(0);
    expect((await bootIpxe(hv, 'mac=52:54:00:00:00:02')).script).toMatch(/^kernel /m);
  });

  it('says nothing `undefined` in its text log, and escapes what clients send', async () => {
    const file = path.join(dir, 'no-default.yaml');
    await writeFile(file, profilesYaml(tree, { defaultGroup: false }));
    hv = await startHvpxe(['serve', '--root', tree.root, '--profiles', file, '--listen', '127.0.0.1:0', '--state-dir', path.join(dir, 'state-text'), '--log-format', 'text']);
    await (await fetch(`${hv.url}/artifacts/k/vmlinuz`)).arrayBuffer();
    await (await fetch(`${hv.url}/ipxe/auto?mac=52:54:00:00:00:99`)).text();
    await (await fetch(`${hv.url}/artifacts/%1b%5b31mred`)).text();
    await stopHvpxe(hv);
    const log = hv.stderr.join('');
    expect(log).toMatch(/ INFO  serving url=http/);
    expect(log).not.toContain('undefined');
    expect(log).not.toContain('\u001b');
  });
});
