/**
 * The fleet's pure decisions: the install claim (one install per arm across servers), the hold of
 * an install orphaned by a stopped server, and the compare-and-swap transaction a machine's change
 * becomes in etcd (which keys are compared at which revision, what is written, under which lease).
 * The expected transactions are written out by hand from etcd's JSON gateway format.
 */
import { describe, expect, it } from 'vitest';
import { CLAIM, claimInstall, lostSuccessHold, orphanedInstall } from '../../../pxe/install-claim.js';
import { addsCredential, keyKind, keys, machineOf, planWrite, storedOf, type StoredMachine } from '../../../pxe/etcd-layout.js';
import { b64, prefixEnd } from '../../../pxe/etcd-client.js';
import type { CredentialRecord, MachineActivity } from '../../../pxe/history-document.js';

const T0 = Date.parse('2026-12-01T10:00:00Z');
const iso = (ms: number): string => new Date(ms).toISOString();

describe('claimInstall: one install per arm across servers', () => {
  it('claims a machine nobody claimed, and renews its own claim at any age', () => {
    expect(claimInstall(undefined, 'a', T0)).toEqual({ ok: true, claim: { server: 'a', at: iso(T0) } });
    expect(claimInstall({ server: 'a', at: iso(T0 - 1) }, 'a', T0)).toEqual({ ok: true, claim: { server: 'a', at: iso(T0) } });
  });

  it("respects another server's claim for exactly the window, and says who and how long ago", () => {
    const last = { server: 'rack-b', at: iso(T0) };
    const inside = claimInstall(last, 'rack-a', T0 + CLAIM.windowMs - 1);
    expect(inside).toEqual({ ok: false, why: `hvpxe rack-b handed this machine its installer 59 s ago (one install per arm): this boot goes to the disk; a machine that is not installing comes back to the network within 60 s and gets it` });
    expect(claimInstall(last, 'rack-a', T0)).toMatchObject({ ok: false });
    expect(claimInstall(last, 'rack-a', T0 + CLAIM.windowMs)).toEqual({ ok: true, claim: { server: 'rack-a', at: iso(T0 + CLAIM.windowMs) } });
  });

  it('takes a claim from the future (a server whose clock runs ahead) as stale, not as a lock', () => {
    expect(claimInstall({ server: 'b', at: iso(T0 + 1) }, 'a', T0).ok).toBe(true);
  });

  it('has a one-minute window', () => {
    expect(CLAIM.windowMs).toBe(60_000);
  });
});

describe('orphanedInstall: an install whose server is gone cannot report, so it is held', () => {
  const installing = { since: iso(T0), via: 'b' };
  it('holds a machine installing through a server that is not live, and says which', () => {
    expect(orphanedInstall({ installing }, new Set(['a']), 'a')).toBe(`hvpxe b, which served its config at ${iso(T0)}, is not running: the install's outcome could not be reported, so whether it finished is unknown`);
  });
  it('leaves alone a live server, this server, a single server (no via), a finished or held machine, and one not installing', () => {
    expect(orphanedInstall({ installing }, new Set(['a', 'b']), 'a')).toBeUndefined();
    expect(orphanedInstall({ installing }, new Set(), 'b')).toBeUndefined();
    expect(orphanedInstall({ installing: { since: iso(T0) } }, new Set(), 'a')).toBeUndefined();
    expect(orphanedInstall({ installing, installed: { at: iso(T0), via: 'x' } }, new Set(), 'a')).toBeUndefined();
    expect(orphanedInstall({ installing, hold: { since: iso(T0), why: 'x' } }, new Set(), 'a')).toBeUndefined();
    expect(orphanedInstall({}, new Set(), 'a')).toBeUndefined();
    expect(orphanedInstall(undefined, new Set(), 'a')).toBeUndefined();
  });
});

const P = '/hvpxe/f';
const cred = (sha: string, extra: Partial<CredentialRecord> = {}): CredentialRecord => ({ sha256: sha, issuedAt: iso(T0), via: 'ipxe', ...extra });
const machine = (extra: Partial<MachineActivity> = {}): MachineActivity => ({ name: 'n1', group: 'g', profile: 'p', fetched: { artifacts: {} }, events: [], ...extra });
const mod = (key: string, rev: number): unknown => ({ key: b64(key), target: 'MOD', result: 'EQUAL', mod_revision: String(rev) });
const readBack = [{ request_range: { key: b64(`${P}/machines/n1`) } }, { request_range: { key: b64(`${P}/credentials/n1/`), range_end: b64(`${P}/credentials/n10`) } }];

function stored(doc: MachineActivity, rev: number, creds: Array<[CredentialRecord, number, string]> = []): StoredMachine {
  const { credentials: _c, ...d } = doc;
  return { doc: d, rev, creds: new Map(creds.map(([rec, r, lease]) => [rec.sha256, { rec, rev: r, lease }])) };
}

describe('planWrite: a change as one compare-and-swap transaction', () => {
  it('creates a machine only if its key does not exist yet (mod revision 0)', () => {
    const a = machine();
    const { credentials: _c, ...doc } = a;
    expect(planWrite(P, undefined, a, undefined)).toEqual({
      compare: [mod(`${P}/machines/n1`, 0)],
      success: [{ request_put: { key: b64(`${P}/machines/n1`), value: b64(JSON.stringify(doc)) } }],
      failure: readBack,
    });
  });

  it('creates a machine with its first credential: both must not exist yet, the credential under the lease', () => {
    const a = machine({ credentials: [cred('c1')] });
    const { credentials: _c, ...doc } = a;
    expect(planWrite(P, undefined, a, '42')).toEqual({
      compare: [mod(`${P}/machines/n1`, 0), mod(`${P}/credentials/n1/c1`, 0)],
      success: [{ request_put: { key: b64(`${P}/machines/n1`), value: b64(JSON.stringify(doc)) } }, { request_put: { key: b64(`${P}/credentials/n1/c1`), value: b64(JSON.stringify(cred('c1'))), lease: '42' } }],
      failure: readBack,
    });
  });

  it('writes nothing when nothing changed', () => {
    const a = machine({ credentials: [cred('c1')] });
    expect(planWrite(P, stored(a, 7, [[cred('c1'), 5, '99']]), a, '42')).toBeUndefined();
  });

  it('puts a new credential under the new lease and compares every key the change was decided on', () => {
    const before = stored(machine({ credentials: [cred('c1')] }), 7, [[cred('c1'), 5, '99']]);
    const after = machine({ lastSeen: iso(T0), credentials: [cred('c1'), cred('c2')] });
    const plan = planWrite(P, before, after, '42')!;
    expect(plan.compare).toEqual([mod(`${P}/machines/n1`, 7), mod(`${P}/credentials/n1/c1`, 5), mod(`${P}/credentials/n1/c2`, 0)]);
    const { credentials: _c, ...doc } = after;
    expect(plan.success).toEqual([
      { request_put: { key: b64(`${P}/machines/n1`), value: b64(JSON.stringify(doc)) } },
      { request_put: { key: b64(`${P}/credentials/n1/c2`), value: b64(JSON.stringify(cred('c2'))), lease: '42' } },
    ]);
  });

  it('keeps the lease of a credential it changes (a put without one would detach it), and the record alone is not rewritten', () => {
    const before = stored(machine({ credentials: [cred('c1')] }), 7, [[cred('c1'), 5, '99']]);
    const used = cred('c1', { configAt: iso(T0 + 1) });
    const plan = planWrite(P, before, machine({ credentials: [used] }), undefined)!;
    expect(plan.success).toEqual([{ request_put: { key: b64(`${P}/credentials/n1/c1`), value: b64(JSON.stringify(used)), lease: '99' } }]);
    expect(plan.compare).toEqual([mod(`${P}/machines/n1`, 7), mod(`${P}/credentials/n1/c1`, 5)]);
  });

  it('deletes a dropped credential only at the revision it was read at; a credential without a lease is put without one', () => {
    const before = stored(machine({ credentials: [cred('c1'), cred('c2')] }), 7, [[cred('c1'), 5, '0'], [cred('c2'), 6, '99']]);
    const plan = planWrite(P, before, machine({ credentials: [cred('c1', { attestedAt: iso(T0) })] }), undefined)!;
    expect(plan.compare).toEqual([mod(`${P}/machines/n1`, 7), mod(`${P}/credentials/n1/c1`, 5), mod(`${P}/credentials/n1/c2`, 6)]);
    expect(plan.success).toEqual([
      { request_put: { key: b64(`${P}/credentials/n1/c1`), value: b64(JSON.stringify(cred('c1', { attestedAt: iso(T0) }))) } },
      { request_delete_range: { key: b64(`${P}/credentials/n1/c2`) } },
    ]);
  });

  it('knows when a change adds a credential (a lease is needed first)', () => {
    const before = stored(machine({ credentials: [cred('c1')] }), 7, [[cred('c1'), 5, '99']]);
    expect(addsCredential(before, machine({ credentials: [cred('c1')] }))).toBe(false);
    expect(addsCredential(before, machine({ credentials: [cred('c1'), cred('c2')] }))).toBe(true);
    expect(addsCredential(undefined, machine({ credentials: [cred('c1')] }))).toBe(true);
    expect(addsCredential(undefined, machine())).toBe(false);
  });
});

describe('the keys of a fleet', () => {
  it('names machines, credentials and servers under the prefix', () => {
    expect(keys.machine(P, 'node-1.rack')).toBe('/hvpxe/f/machines/node-1.rack');
    expect(keys.credential(P, 'n1', 'ab')).toBe('/hvpxe/f/credentials/n1/ab');
    expect(keys.server(P, 'a:8080')).toBe('/hvpxe/f/servers/a:8080');
    expect([keys.machines(P), keys.credentials(P), keys.credentialsOf(P, 'n1'), keys.servers(P)]).toEqual(['/hvpxe/f/machines/', '/hvpxe/f/credentials/', '/hvpxe/f/credentials/n1/', '/hvpxe/f/servers/']);
    expect(keyKind(P, '/hvpxe/f/machines/node-1.rack')).toEqual({ kind: 'machine', name: 'node-1.rack' });
    expect(keyKind(P, '/hvpxe/f/credentials/n1/ab')).toEqual({ kind: 'credential', name: 'n1', sha256: 'ab' });
    expect(keyKind(P, '/hvpxe/f/servers/a:8080')).toEqual({ kind: 'server', server: 'a:8080' });
  });

  it('ignores what is not ours: another prefix, deeper or shallower keys, empty names', () => {
    for (const k of ['/hvpxe/fleet2/machines/n1', '/hvpxe/g/machines/n1', '/hvpxe/g/credentials/n1/ab', '/hvpxe/f', '/hvpxe/f/machines/', '/hvpxe/f/machines/n1/x', '/hvpxe/f/credentials/n1', '/hvpxe/f/credentials/n1/ab/c', '/hvpxe/f/servers/', '/hvpxe/f/servers/a/b', '/hvpxe/f/other/x', '/hvpxe/fmachines/n1']) {
      expect(keyKind(P, k), k).toBeUndefined();
    }
  });

  it('ends a prefix range at the next key (etcd clientv3 GetPrefixRangeEnd)', () => {
    expect(Buffer.from(prefixEnd('/a/'), 'base64').toString()).toBe('/a0');
    expect(Buffer.from(prefixEnd('/hvpxe/f/machines/'), 'base64').toString()).toBe('/hvpxe/f/machines0');
    expect(Buffer.from(prefixEnd('a'), 'base64').toString()).toBe('b');
  });

  it('reads a machine back with its credentials oldest first, and copies (a change never touches the stored copy)', () => {
    const kv = (key: string, value: unknown, rev: number, lease = '0'): { key: string; value: string; modRevision: number; createRevision: number; lease: string } => ({ key, value: JSON.stringify(value), modRevision: rev, createRevision: 1, lease });
    const { credentials: _c, ...doc } = machine();
    const late = cred('c2', { issuedAt: iso(T0 + 5) });
    const s = storedOf(P, kv(`${P}/machines/n1`, doc, 9), [kv(`${P}/credentials/n1/c2`, late, 8, '5'), kv(`${P}/credentials/n1/c1`, cred('c1'), 7, '5'), kv(`${P}/servers/x`, {}, 3), kv('/hvpxe/g/credentials/n1/c3', cred('c3'), 6)])!;
    expect(s.rev).toBe(9);
    expect([...s.creds.keys()]).toEqual(['c2', 'c1']);
    expect(s.creds.get('c2')).toEqual({ rec: late, rev: 8, lease: '5' });
    const a = machineOf(s);
    expect(a.credentials).toEqual([cred('c1'), late]);
    a.credentials![0].configAt = 'x';
    a.events.push({ at: 'x', event: 'x', data: {} });
    expect(s.creds.get('c1')!.rec.configAt).toBeUndefined();
    expect(s.doc.events).toEqual([]);
    expect(machineOf({ ...s, creds: new Map() })).not.toHaveProperty('credentials');
    expect(storedOf(P, undefined, [])).toBeUndefined();
  });
});

describe('lostSuccessHold: a success report the store could not take holds the machine', () => {
  const installing = { since: iso(T0), via: 'a' };
  const at = iso(T0 + 60_000);
  it('holds a machine still installing, and says when the report came and why it is lost', () => {
    expect(lostSuccessHold({ installing }, at)).toBe(`its install reported success at ${at} while the machine store could not be written, and that report is lost: whether it finished is unknown`);
    expect(lostSuccessHold({ installing, rearmedAt: iso(T0) }, at)).toBeDefined();
  });
  it('leaves alone a machine installed or held meanwhile, re-armed at or after the report, or not installing', () => {
    expect(lostSuccessHold({ installing, installed: { at, via: 'b' } }, at)).toBeUndefined();
    expect(lostSuccessHold({ installing, hold: { since: at, why: 'x' } }, at)).toBeUndefined();
    expect(lostSuccessHold({ installing, rearmedAt: at }, at)).toBeUndefined();
    expect(lostSuccessHold({ installing, rearmedAt: iso(T0 + 61_000) }, at)).toBeUndefined();
    expect(lostSuccessHold({}, at)).toBeUndefined();
    expect(lostSuccessHold(undefined, at)).toBeUndefined();
  });
});
