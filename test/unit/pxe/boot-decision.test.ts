/**
 * What a network-booting machine gets after it reported a finished install, the loop that an NVRAM
 * without an entry for the disk causes, the local-boot script, and the history file's checks.
 */
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { decideBoot, LOCAL_BOOTS_KEPT, reportsFailure, reportsSuccess, withLocalBoot } from '../../../pxe/boot-decision.js';
import { HistoryStore } from '../../../pxe/history.js';
import { heldByLostHistory, holdUnfinishedInstalls, parseHistory, type MachineActivity } from '../../../pxe/history-document.js';
import { renderLocalBootScript } from '../../../pxe/ipxe.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import type { Machine } from '../../../pxe/profiles.js';

const T0 = Date.parse('2026-12-01T10:00:00Z');
const at = (min: number): string => new Date(T0 + min * 60_000).toISOString();
const installed = { at: at(0), via: 'SUCCEEDED webhook' };

describe('decideBoot', () => {
  it('installs a machine that never reported success', () => {
    expect(decideBoot(undefined, 'local', T0)).toEqual({ kind: 'install', why: 'no finished install reported' });
    expect(decideBoot({ localBoots: [at(1)] }, 'local', T0).kind).toBe('install');
  });

  it('boots a finished machine from its disk, unless the profile asks for a reinstall', () => {
    expect(decideBoot({ installed }, 'local', T0 + 60_000)).toEqual({ kind: 'local', installedAt: at(0), via: 'SUCCEEDED webhook' });
    expect(decideBoot({ installed }, 'reinstall', T0)).toEqual({ kind: 'install', why: `installed ${at(0)}, and the profile says after_install: reinstall` });
  });

  it('calls the third local boot within ten minutes a loop, and older boots do not count', () => {
    expect(decideBoot({ installed, localBoots: [at(1)] }, 'local', T0 + 2 * 60_000)).not.toHaveProperty('loop');
    const loop = decideBoot({ installed, localBoots: [at(1), at(2)] }, 'local', T0 + 3 * 60_000);
    expect(loop.kind === 'local' && loop.loop).toMatch(/^asked for a local boot 3 times in 10 min: the firmware comes back to the network instead of booting the disk \(no NVRAM boot entry for it/);
    expect(decideBoot({ installed, localBoots: [at(1), at(2)] }, 'local', T0 + 30 * 60_000)).not.toHaveProperty('loop');
  });

  it('keeps a bounded number of local-boot times', () => {
    let boots: string[] = [];
    for (let i = 0; i < 25; i++) boots = withLocalBoot(boots, at(i));
    expect(boots).toHaveLength(LOCAL_BOOTS_KEPT);
    expect(boots.at(-1)).toBe(at(24));
  });

  it('knows success from hvinstall\'s events and from Harvester\'s SUCCEEDED webhook, nothing else', () => {
    expect(reportsSuccess({ type: 'install', phase: 'succeeded', device: '/dev/sda' })).toBe(true);
    expect(reportsSuccess({ event: 'SUCCEEDED', hostname: 'n1' })).toBe(true);
    expect(reportsSuccess({ type: 'install', phase: 'failed' })).toBe(false);
    expect(reportsSuccess({ event: 'STARTED' })).toBe(false);
    expect(reportsSuccess('SUCCEEDED')).toBe(false);
    expect(reportsSuccess(['SUCCEEDED'])).toBe(false);
  });
});

describe('failing closed: a machine whose end hvpxe cannot know boots its disk', () => {
  const lost = { at: at(5), keptAs: '/s/machines.json.corrupt-x', why: 'Unexpected end of JSON input' };

  it('holds a machine with a hold, and says why; a loop is still seen', () => {
    const hold = { since: at(0), why: 'hvpxe stopped while its install was running' };
    expect(decideBoot({ hold }, 'local', T0)).toEqual({ kind: 'hold', why: hold.why });
    const looping = decideBoot({ hold, localBoots: [at(1), at(2)] }, 'local', T0 + 3 * 60_000);
    expect(looping).toMatchObject({ kind: 'hold', loop: expect.stringMatching(/^asked for a local boot 3 times/) });
    // A finished install wins over a hold (it is what the machine said last); reinstall profiles reinstall.
    expect(decideBoot({ hold, installed }, 'local', T0).kind).toBe('local');
    expect(decideBoot({ hold }, 'reinstall', T0)).toEqual({ kind: 'install', why: 'the profile says after_install: reinstall' });
  });

  it('after a lost history, holds every machine not re-armed since the loss', () => {
    expect(decideBoot(undefined, 'local', T0, lost)).toEqual({ kind: 'hold', why: `hvpxe's machine history was lost at ${at(5)} (Unexpected end of JSON input; kept as /s/machines.json.corrupt-x): whether this machine finished installing is unknown` });
    expect(decideBoot({ rearmedAt: at(4) }, 'local', T0, lost).kind).toBe('hold');
    expect(decideBoot({ rearmedAt: at(5) }, 'local', T0, lost).kind).toBe('install');
    expect(decideBoot({ rearmedAt: at(6) }, 'local', T0, lost)).toEqual({ kind: 'install', why: 'no finished install reported' });
    expect(decideBoot({ installed }, 'local', T0, lost).kind).toBe('local');
    expect(heldByLostHistory(undefined, undefined)).toBe(false);
    expect(heldByLostHistory({ installed }, lost)).toBe(false);
  });

  it('holds, at start-up, exactly the machines whose install was running (config served, no outcome)', () => {
    const ms: MachineActivity[] = [
      { name: 'running', group: 'g', profile: 'p', fetched: { artifacts: {} }, events: [], installing: { since: at(1) } },
      { name: 'finished', group: 'g', profile: 'p', fetched: { artifacts: {} }, events: [], installing: { since: at(1) }, installed },
      { name: 'booting', group: 'g', profile: 'p', fetched: { artifacts: {} }, events: [] },
      { name: 'held', group: 'g', profile: 'p', fetched: { artifacts: {} }, events: [], installing: { since: at(1) }, hold: { since: at(2), why: 'earlier' } },
    ];
    expect(holdUnfinishedInstalls(ms, at(9))).toEqual(['running']);
    expect(ms[0]!.hold).toEqual({ since: at(9), why: `hvpxe stopped while its install was running (config served ${at(1)}): whether it finished is unknown` });
    expect(ms[3]!.hold!.why).toBe('earlier');
    expect(ms[1]!.hold).toBeUndefined();
  });

  it('knows a failed install from both sources, nothing else', () => {
    expect(reportsFailure({ type: 'install', phase: 'failed' })).toBe(true);
    expect(reportsFailure({ event: 'FAILED' })).toBe(true);
    expect(reportsFailure({ event: 'SUCCEEDED' })).toBe(false);
    expect(reportsFailure({ type: 'step', phase: 'failed' })).toBe(false);
    expect(reportsFailure('FAILED')).toBe(false);
    expect(reportsFailure(null)).toBe(false);
    expect(reportsFailure(['FAILED'])).toBe(false);
  });
});

describe('renderLocalBootScript for a held machine', () => {
  const m = { name: 'node-1', group: 'rack1', profile: 'hv', spec: {} } as Machine;
  it('says why on the console, how to install it, and boots the disk', () => {
    expect(renderLocalBootScript(m, { kind: 'hold', why: 'whether it finished is unknown ${evil}' }, { platform: 'pcbios' }).split('\n')).toEqual([
      '#!ipxe',
      '# hvpxe: machine node-1 is held: boot its disk (`hvpxe rearm node-1` installs it)',
      'echo hvpxe: node-1: whether it finished is unknown ?{evil}',
      'echo hvpxe: so it boots its local disk, not the installer; `hvpxe rearm node-1` on the boot server installs it',
      'sanboot --no-describe --drive 0x80 || goto firmware',
      ':firmware',
      'echo hvpxe: handing back to the firmware for the next boot device',
      'exit 0',
      '',
    ]);
  });
});

describe('renderLocalBootScript', () => {
  const m = { name: 'node-1', group: 'rack1', profile: 'hv', spec: {} } as Machine;

  it('BIOS: boots the first disk with sanboot, then hands back to the firmware', () => {
    const s = renderLocalBootScript(m, { kind: 'local', installedAt: at(0) }, { platform: 'pcbios' });
    expect(s.split('\n')).toEqual([
      '#!ipxe',
      `# hvpxe: machine node-1 reported a finished install at ${at(0)}: boot its disk (\`hvpxe rearm node-1\` installs it again)`,
      `echo hvpxe: node-1 is installed (${at(0)}); booting from the local disk`,
      'sanboot --no-describe --drive 0x80 || goto firmware',
      ':firmware',
      'echo hvpxe: handing back to the firmware for the next boot device',
      'exit 0',
      '',
    ]);
  });

  it('UEFI: exits to the firmware; when looping it also tries the disk itself and says why on the console', () => {
    const plain = renderLocalBootScript(m, { kind: 'local', installedAt: at(0) }, { platform: 'efi' });
    expect(plain).not.toContain('sanboot');
    expect(plain).toContain('exit 0');
    const looping = renderLocalBootScript(m, { kind: 'local', installedAt: at(0), loop: 'asked for a local boot 3 times in 10 min: …' }, { platform: 'efi' });
    expect(looping).toContain('echo hvpxe: node-1 asked for a local boot 3 times in 10 min: …');
    expect(looping).toContain('sanboot --no-describe --drive 0x80 || goto firmware');
  });
});

describe('the history file', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'hvpxe-history-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const machine = (over: Partial<MachineActivity> = {}): MachineActivity => ({ name: 'node-1', group: 'rack1', profile: 'hv', fetched: { artifacts: {} }, events: [], ...over });

  it('round-trips what it saved', async () => {
    const store = new HistoryStore(dir, new Logger(new MemorySink()));
    expect(await store.load()).toEqual({ machines: [] });
    store.track(() => ({ machines: [machine({ installed })] }));
    store.save();
    expect(await store.flush()).toBe(true);
    expect((await new HistoryStore(dir, new Logger(new MemorySink())).load()).machines).toEqual([machine({ installed })]);
  });

  it('sets a corrupt file aside, says where, and marks the history lost (every machine held until re-armed)', async () => {
    await writeFile(path.join(dir, 'machines.json'), '{"version":1,"machines":[{"name":"node-1"');
    const sink = new MemorySink();
    const loaded = await new HistoryStore(dir, new Logger(sink), () => new Date(T0)).load();
    expect(loaded.machines).toEqual([]);
    expect(loaded.lost).toEqual({ at: at(0), keptAs: path.join(dir, 'machines.json.corrupt-2026-12-01T10-00-00-000Z'), why: expect.stringMatching(/JSON/) });
    expect((await readdir(dir)).sort()).toEqual(['machines.json.corrupt-2026-12-01T10-00-00-000Z']);
    expect(await readFile(path.join(dir, 'machines.json.corrupt-2026-12-01T10-00-00-000Z'), 'utf8')).toBe('{"version":1,"machines":[{"name":"node-1"');
    expect(sink.lines.some((l) => l.includes('machine history unreadable: set aside; every machine boots its disk until re-armed'))).toBe(true);
  });

  it('rejects documents it did not write, naming the entry', () => {
    expect(() => parseHistory('{"version":3,"machines":[]}')).toThrow('not a version 1 or 2 machine history');
    expect(() => parseHistory(JSON.stringify({ version: 1, machines: [{ name: '../x', group: 'g', profile: 'p', fetched: {}, events: [] }] }))).toThrow('machines[0] has no valid name, group and profile');
    expect(() => parseHistory(JSON.stringify({ version: 1, machines: [machine({ installed: 'yes' as never })] }))).toThrow('machines[0] (node-1): installed must be {at, via}');
    expect(() => parseHistory(JSON.stringify({ version: 2, machines: [machine({ hold: 'yes' as never })] }))).toThrow('machines[0] (node-1): hold must be {since, why}');
    expect(() => parseHistory(JSON.stringify({ version: 2, machines: [machine({ credentials: [{ issuedAt: at(0) }] as never })] }))).toThrow('credentials must be a list of {sha256, issuedAt}');
    expect(() => parseHistory(JSON.stringify({ version: 2, lost: 'x', machines: [] }))).toThrow('lost must be {at, keptAs, why}');
    expect(() => parseHistory(JSON.stringify({ version: 2, lost: { keptAs: 'x' }, machines: [] }))).toThrow('lost must be {at, keptAs, why}');
    expect(() => parseHistory(JSON.stringify({ version: 2, machines: [machine({ installing: { at: 'x' } as never })] }))).toThrow('machines[0] (node-1): installing must be {since}');
    expect(() => parseHistory(JSON.stringify({ version: 2, machines: [machine({ hold: { why: 'x' } as never })] }))).toThrow('machines[0] (node-1): hold must be {since, why}');
    expect(() => parseHistory(JSON.stringify({ version: 2, machines: [machine({ installed: { via: 'x' } as never })] }))).toThrow('machines[0] (node-1): installed must be {at, via}');
    expect(() => parseHistory(JSON.stringify({ version: 2, machines: [{ ...machine(), events: {} }] }))).toThrow('machines[0] (node-1): has no fetched/events records');
    expect(() => parseHistory(JSON.stringify({ version: 2, machines: [{ ...machine(), fetched: 'x' }] }))).toThrow('machines[0] (node-1): has no fetched/events records');
    expect(() => parseHistory(JSON.stringify({ version: 2, machines: [machine({ credentials: {} as never })] }))).toThrow('credentials must be a list');
    expect(() => parseHistory(JSON.stringify({ version: 2, machines: [machine({ credentials: [{ sha256: 1, issuedAt: 'x' }] as never })] }))).toThrow('credentials must be a list');
    expect(() => parseHistory(JSON.stringify({ version: 2, machines: [{ name: 'n', group: 1, profile: 'p' }] }))).toThrow('machines[0] has no valid name, group and profile');
    expect(() => parseHistory(JSON.stringify({ version: 2, machines: [null] }))).toThrow('machines[0] has no valid name, group and profile');
    expect(() => parseHistory(JSON.stringify({ version: 2, machines: {} }))).toThrow('not a version 1 or 2 machine history');
    expect(() => parseHistory('null')).toThrow('not a version 1 or 2 machine history');
    // What it accepts: both versions, the lost marker kept, nothing added.
    expect(parseHistory(JSON.stringify({ version: 1, machines: [machine()] }))).toEqual({ machines: [machine()] });
    const lost = { at: at(1), keptAs: 'k', why: 'w' };
    expect(parseHistory(JSON.stringify({ version: 2, lost, machines: [] }))).toEqual({ machines: [], lost });
  });
});
