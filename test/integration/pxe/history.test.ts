/**
 * hvpxe's machine history for real: the built `hvpxe serve` is told a machine finished installing,
 * serves it a local boot, is stopped and started again and still does; `hvpxe rearm` gives it the
 * installer again; a corrupt history is set aside with a warning; a machine that keeps coming back
 * is called looping; a profile can ask for a reinstall; the state directory cannot be served.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { adminGet, bootIpxe, machineOf, makeTree, profilesYaml, runHvpxe, startHvpxe, stopHvpxe, type Running, type Tree } from './harness.js';

let dir: string;
let tree: Tree;
let profiles: string;
let state: string;
let hv: Running | undefined;

const NODE1 = '/ipxe/auto?mac=52:54:00:00:00:01&platform=pcbios';

async function start(profilesFile = profiles): Promise<void> {
  hv = await startHvpxe(['serve', '--root', tree.root, '--profiles', profilesFile, '--listen', '127.0.0.1:0', '--state-dir', state]);
}

async function get(p: string, init?: RequestInit): Promise<{ status: number; text: string }> {
  const r = await fetch(`${hv!.url}${p}`, init);
  return { status: r.status, text: await r.text() };
}

async function machine(name: string): Promise<Record<string, any>> {
  return machineOf(hv!, name);
}

/** Boots the machine, then posts an event with the boot credential of its script. */
async function report(query: string, body: unknown): Promise<number> {
  const { events } = await bootIpxe(hv!, query);
  return (await fetch(events!, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) })).status;
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-pxe-history-'));
  tree = await makeTree(dir);
  profiles = path.join(dir, 'profiles.yaml');
  state = path.join(dir, 'state');
  await writeFile(profiles, profilesYaml(tree));
});

afterEach(async () => {
  await stopHvpxe(hv);
  hv = undefined;
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('hvpxe machine history', () => {
  it('serves a local boot after SUCCEEDED, keeps doing so across a restart, and installs again after hvpxe rearm', async () => {
    await start();
    expect((await get(NODE1)).text).toContain('kernel ');
    expect(await report('mac=52:54:00:00:00:01', '{"event":"SUCCEEDED","hostname":"node-1"}')).toBe(204);
    const local = (await get(NODE1)).text;
    expect(local).toContain('sanboot --no-describe --drive 0x80 || goto firmware');
    expect(local).not.toContain('kernel ');
    const m = await machine('node-1');
    expect(m.installed.via).toBe('SUCCEEDED webhook');
    expect(m.boot).toMatchObject({ next: 'local', localBoots: 1 });
    expect(local).not.toContain('credential=');
    expect(m.boot.why).toContain('`hvpxe rearm node-1` installs it again');

    // A real restart: the SUCCEEDED must come back from the state directory.
    await stopHvpxe(hv);
    expect(JSON.parse(await readFile(path.join(state, 'machines.json'), 'utf8')).machines.find((x: { name: string }) => x.name === 'node-1').installed).toBeDefined();
    await start();
    expect((await get(NODE1)).text).toContain('sanboot --no-describe --drive 0x80');
    expect((await machine('node-1')).events.at(-1).event).toBe('SUCCEEDED');

    // Re-armed while hvpxe runs: the next boot gets the installer, the request is consumed.
    const r = await runHvpxe(['rearm', '--state-dir', state, 'node-1']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^hvpxe: node-1 \(installed .*\) re-armed: its next network boot installs it again, wiping its disk/);
    expect((await get(NODE1)).text).toContain('kernel ');
    expect(existsSync(path.join(state, 'rearm', 'node-1'))).toBe(false);
    const after = await machine('node-1');
    expect(after.installed).toBeUndefined();
    expect(after.rearmedAt).toBeDefined();
    expect(after.boot.next).toBe('install');

    // Nothing to re-arm: a machine that never finished, one that does not exist.
    const again = await runHvpxe(['rearm', '--state-dir', state, 'node-1']);
    expect(again.stdout).toBe('hvpxe: node-1 has not reported a finished install: its next network boot installs it anyway\n');
    const nobody = await runHvpxe(['rearm', '--state-dir', state, 'nobody']);
    expect(nobody.code).toBe(1);
    expect(nobody.stderr).toContain(`no machine named nobody in ${path.join(state, 'machines.json')}`);
  });

  it('knows success from hvinstall\'s own events and calls a machine that keeps coming back looping', async () => {
    await start();
    expect(await report('mac=52:54:00:00:00:02', { type: 'install', phase: 'succeeded', device: '/dev/nvme0n1' })).toBe(204);
    const efi = '/ipxe/auto?mac=52:54:00:00:00:02&platform=efi';
    expect((await get(efi)).text).not.toContain('sanboot');
    await get(efi);
    const third = (await get(efi)).text;
    expect(third).toContain('echo hvpxe: node-2 asked for a local boot 3 times in 10 min');
    expect(third).toContain('sanboot --no-describe --drive 0x80');
    const m = await machine('node-2');
    expect(m.installed.via).toBe('hvinstall events');
    expect(m.boot.loop).toMatch(/no NVRAM boot entry for it/);
  });

  it('sets a corrupt history aside and holds every machine on local boot until it is re-armed', async () => {
    await writeFile(path.join(state, 'machines.json'), '{"version":1,"machines":[{"name":');
    await start();
    const health = JSON.parse((await adminGet(hv!, '/healthz')).text);
    expect(health.status).toBe('degraded');
    expect(health.problems[0]).toMatch(/^the machine history was lost at .* \(kept as .*machines\.json\.corrupt-.*\): every machine boots its disk until `hvpxe rearm`$/);
    expect(JSON.parse((await get('/healthz')).text)).toEqual({ status: 'degraded' });
    expect((await adminGet(hv!, '/metrics')).text).toMatch(/^hvpxe_history_lost 1$/m);
    const aside = (await readdir(state)).filter((f) => f.startsWith('machines.json.corrupt-'));
    expect(aside).toHaveLength(1);
    expect(await readFile(path.join(state, aside[0]!), 'utf8')).toBe('{"version":1,"machines":[{"name":');
    expect(hv!.stderr.join('')).toContain('machine history unreadable: set aside; every machine boots its disk until re-armed');
    // Fail closed: hvpxe cannot tell whether node-1 finished installing, so it boots its disk.
    const held = (await get(NODE1)).text;
    expect(held).not.toContain('kernel ');
    expect(held).toContain("echo hvpxe: node-1: hvpxe's machine history was lost at");
    expect(held).toContain('sanboot --no-describe --drive 0x80');
    expect((await machine('node-1')).boot).toMatchObject({ next: 'local', why: expect.stringMatching(/^held: hvpxe's machine history was lost/) });
    // Re-armed (a declared machine the lost history did not know): the installer again; node-2 stays held.
    const r = await runHvpxe(['rearm', '--state-dir', state, 'node-1']);
    expect(r.stdout).toMatch(/^hvpxe: node-1 \(history lost at .*\) re-armed: its next network boot installs it again/);
    expect((await get(NODE1)).text).toContain('kernel ');
    expect((await get('/ipxe/auto?mac=52:54:00:00:00:02')).text).not.toContain('kernel ');
    // The loss survives a restart until each machine is re-armed.
    await stopHvpxe(hv);
    await start();
    expect((await get(NODE1)).text).toContain('kernel ');
    expect((await get('/ipxe/auto?mac=52:54:00:00:00:02')).text).not.toContain('kernel ');
  });

  it('reinstalls after success when the profile says after_install: reinstall', async () => {
    const reinstall = path.join(dir, 'profiles-reinstall.yaml');
    await writeFile(reinstall, profilesYaml(tree).replace('    kernel_args:', '    after_install: reinstall\n    kernel_args:'));
    await start(reinstall);
    expect(await report('uuid=11111111-2222-3333-4444-555555555555', '{"event":"SUCCEEDED"}')).toBe(204);
    expect((await get('/ipxe/auto?uuid=11111111-2222-3333-4444-555555555555')).text).toContain('kernel ');
    expect((await machine('node-3')).boot.why).toContain('after_install: reinstall');
  });

  it('refuses a state directory under the served root', async () => {
    const r = await runHvpxe(['serve', '--root', tree.root, '--profiles', profiles, '--listen', '127.0.0.1:0', '--state-dir', path.join(tree.root, 'state')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`is inside --root ${tree.root}, which hvpxe serves`);
  });
});
