/**
 * The edges of hvpxe's decisions, each case a wrong product the other tests let pass (found by the
 * pxe mutation scope, docs/testing.md): malformed history entries, exact boundaries, inputs missing
 * a field, what is dropped or kept when records pile up.
 */
import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { decideBoot, loopOf, LOOP_WINDOW_MS, reportsFailure, reportsSuccess, withLocalBoot } from '../../../pxe/boot-decision.js';
import { parseHistory, serialiseHistory, type MachineActivity } from '../../../pxe/history-document.js';
import { checkCredential, withIssued } from '../../../pxe/credentials.js';
import type { CredentialRecord } from '../../../pxe/history-document.js';
import { jsonDepth, summariseEventBody } from '../../../pxe/event-body.js';
import { fleetConflicts, fleetFacts } from '../../../pxe/fleet-conflicts.js';
import { errorPacket, negotiate, oackPacket, parseClientPacket, parseRequest } from '../../../pxe/tftp-protocol.js';
import { authorised } from '../../../pxe/admin.js';
import { buildCatalog, defaultMachine, machineByName, parseProfiles, requestIdentifies } from '../../../pxe/profiles.js';
import { Redactor } from '../../../lib/redact.js';
import { profilesText } from './helpers.js';

const T0 = Date.parse('2026-12-01T10:00:00Z');
const iso = (ms: number): string => new Date(T0 + ms).toISOString();
const machine = (over: Record<string, unknown> = {}): Record<string, unknown> => ({ name: 'node-1', group: 'rack1', profile: 'hv', fetched: { artifacts: {} }, events: [], ...over });
const doc = (m: Record<string, unknown>): string => JSON.stringify({ version: 2, machines: [m] });

describe('parseHistory refuses every malformed field', () => {
  it.each([
    [{ name: 123 }, 'machines[0] has no valid name, group and profile'],
    [{ name: ['node-1'] }, 'machines[0] has no valid name, group and profile'],
    [{ profile: 5 }, 'machines[0] has no valid name, group and profile'],
    [{ installed: null }, 'machines[0] (node-1): installed must be {at, via}'],
    [{ installing: null }, 'machines[0] (node-1): installing must be {since}'],
    [{ installing: 'x' }, 'machines[0] (node-1): installing must be {since}'],
    [{ installing: { since: 5 } }, 'machines[0] (node-1): installing must be {since}'],
    [{ hold: null }, 'machines[0] (node-1): hold must be {since, why}'],
    [{ hold: 'x' }, 'machines[0] (node-1): hold must be {since, why}'],
    [{ hold: { since: 5 } }, 'machines[0] (node-1): hold must be {since, why}'],
    [{ credentials: [null] }, 'machines[0] (node-1): credentials must be a list of {sha256, issuedAt}'],
    [{ credentials: [{ sha256: 'a', issuedAt: 'b' }, { sha256: 'a' }] }, 'machines[0] (node-1): credentials must be a list of {sha256, issuedAt}'],
    [{ credentials: [{ sha256: 'a', issuedAt: 5 }] }, 'machines[0] (node-1): credentials must be a list of {sha256, issuedAt}'],
  ])('%j', (over, message) => {
    expect(() => parseHistory(doc(machine(over)))).toThrow(message);
  });

  it('takes well-formed optional fields', () => {
    const m = machine({ installing: { since: 'a' }, hold: { since: 'b', why: 'c' }, credentials: [{ sha256: 'a', issuedAt: 'b', via: 'ipxe' }], installed: { at: 'x', via: 'y' } });
    expect(parseHistory(doc(m)).machines).toEqual([m]);
  });

  it('writes a document that ends with a newline and reads back', () => {
    const text = serialiseHistory([machine() as unknown as MachineActivity], undefined, new Date(T0));
    expect(text.endsWith('}\n')).toBe(true);
    expect(JSON.parse(text)).toEqual({ version: 2, savedAt: iso(0), machines: [machine()] });
  });
});

describe('boot decisions at their edges', () => {
  it('success and failure only from their own pair of fields, never from a non-object', () => {
    for (const v of [null, undefined, 0, 'SUCCEEDED', Object.assign(['x'], { event: 'SUCCEEDED' })]) expect(reportsSuccess(v)).toBe(false);
    for (const v of [null, undefined, Object.assign(['x'], { event: 'FAILED' })]) expect(reportsFailure(v)).toBe(false);
    expect(reportsSuccess({ type: 'step', phase: 'succeeded' })).toBe(false);
    expect(reportsSuccess({ type: 'install', phase: 'failed' })).toBe(false);
    expect(reportsFailure({ type: 'install', phase: 'succeeded' })).toBe(false);
  });

  it('counts a local boot exactly the window old, not one a millisecond older', () => {
    const boots = [new Date(T0).toISOString(), new Date(T0).toISOString()];
    expect(loopOf(boots, T0 + LOOP_WINDOW_MS, 1)).toMatch(/^asked for a local boot 3 times/);
    expect(loopOf(boots, T0 + LOOP_WINDOW_MS + 1, 1)).toBeUndefined();
    expect(loopOf(undefined, T0, 2)).toBeUndefined();
    expect(withLocalBoot(undefined, iso(0))).toEqual([iso(0)]);
  });

  it('a machine never seen, under a reinstall profile, installs', () => {
    expect(decideBoot(undefined, 'reinstall', T0)).toEqual({ kind: 'install', why: 'the profile says after_install: reinstall' });
  });
});

describe('credentials at their edges', () => {
  const rec = (c: string, over: Partial<CredentialRecord> = {}): CredentialRecord => ({ sha256: createHash('sha256').update(c).digest('hex'), issuedAt: iso(0), via: 'ipxe', ...over });
  it('attestation itself does not need an attested credential', () => {
    expect(checkCredential([rec('A'.repeat(43))], 'A'.repeat(43), 'attest', T0, true)).toMatchObject({ ok: true });
  });

  it('keeps the four newest unused credentials even when used ones were issued after them', () => {
    const u = [1, 2, 3].map((i) => rec(`u${i}`, { issuedAt: iso(i) }));
    const c = [4, 5].map((i) => rec(`c${i}`, { issuedAt: iso(i), configAt: iso(i) }));
    const out = withIssued([...u, ...c], rec('u6', { issuedAt: iso(6) }), T0 + 10);
    expect(out.map((r) => r.issuedAt)).toEqual([iso(1), iso(2), iso(3), iso(4), iso(5), iso(6)]);
  });
});

describe('event bodies at their edges', () => {
  it('measures the deepest nesting, not the last', () => {
    expect(jsonDepth('[[[]]][]')).toBe(3);
    expect(jsonDepth('{"a":[[{}]],"b":1}')).toBe(4);
  });

  it('keeps a body nested exactly to the limit', () => {
    const s = summariseEventBody(Buffer.from('{"event":"x","a":[[[[[[[]]]]]]]}'), new Redactor());
    expect(jsonDepth('{"event":"x","a":[[[[[[[]]]]]]]}')).toBe(8);
    expect(s).toEqual({ event: 'x', data: { event: 'x', a: '<list of 1>' } });
  });

  it('keeps fields writable plain data', () => {
    const s = summariseEventBody(Buffer.from('{"event":"x"}'), new Redactor());
    expect(Object.getOwnPropertyDescriptor(s.data, 'event')).toEqual({ value: 'x', enumerable: true, writable: true, configurable: true });
  });
});

describe('fleet facts from sparse configs', () => {
  it('reads a config without install, without interfaces, with NICs that name no address', () => {
    expect(fleetFacts('a', {})).toEqual({ machine: 'a', ip: undefined, vip: undefined, mode: undefined, serverHost: undefined, hwAddrs: [] });
    expect(fleetFacts('b', { install: { managementInterface: { interfaces: [{ name: 'eth0' }] } } }).hwAddrs).toEqual([]);
    expect(fleetConflicts([fleetFacts('b', { install: { managementInterface: { interfaces: [{ name: 'eth0' }] } } }), fleetFacts('c', { install: { managementInterface: { interfaces: [{ name: 'eth0' }] } } })])).toEqual([]);
    // A join node's leftover vip is not a VIP it creates.
    expect(fleetFacts('d', { install: { mode: 'join', vip: '10.0.0.100' } }).vip).toBeUndefined();
    expect(fleetFacts('e', { serverUrl: 'https://[fd00::1]:443' }).serverHost).toBe('fd00::1');
  });
});

describe('TFTP packets at their edges', () => {
  it('a request or a packet too short to carry an opcode', () => {
    expect(parseRequest(Buffer.from([0]))).toBeUndefined();
    expect(parseRequest(Buffer.from([0, 1]))).toBeUndefined();
    expect(parseRequest(Buffer.from([0, 1, 0x61, 0]))).toBeUndefined();
    expect(parseRequest(Buffer.from('\u0000\u0001a\u0000octet\u0000x', 'latin1'))).toBeUndefined();
    expect(parseClientPacket(Buffer.from([4]))).toEqual({ kind: 'other' });
    expect(parseClientPacket(Buffer.from([0, 5]))).toEqual({ kind: 'error', message: '' });
    expect(parseClientPacket(Buffer.from('\u0000\u0005\u0000\u0000disk full\u0000trailing junk', 'latin1'))).toEqual({ kind: 'error', message: 'disk full' });
  });

  it('packets are latin1 on the wire, one byte a character', () => {
    expect([...errorPacket(0, 'é')]).toEqual([0, 5, 0, 0, 0xe9, 0]);
    expect([...oackPacket(new Map([['é', '1']]))]).toEqual([0, 6, 0xe9, 0, 0x31, 0]);
  });

  it('an option given empty is no option', () => {
    expect(negotiate(new Map([['blksize', '']]), 1).reply).toEqual(new Map());
    expect(negotiate(new Map([['timeout', '']]), 1).reply).toEqual(new Map());
  });
});

describe('the bearer check at its edges', () => {
  it('the scheme must start the header', () => {
    const req = (authorization: string): http.IncomingMessage => ({ headers: { authorization } }) as http.IncomingMessage;
    expect(authorised(req('xBearer token-token-token-1'), 'token-token-token-1')).toBe(false);
    expect(authorised(req('Bearer token-token-token-1'), 'token-token-token-1')).toBe(true);
  });
});

describe('the catalogue at its edges', () => {
  it('keeps the enrolled EK, lower case; names problems after profiles.yaml by default', async () => {
    const text = profilesText().replace('{ hostname: node-1, mac: "52:54:00:00:00:01", role: management }', `{ hostname: node-1, mac: "52:54:00:00:00:01", role: management, tpm_ek_sha256: "${'AB'.repeat(32)}" }`);
    const cat = buildCatalog(await parseProfiles(text));
    expect(machineByName(cat, 'node-1')!.tpmEkSha256).toBe('ab'.repeat(32));
    expect(machineByName(cat, 'node-2')!.tpmEkSha256).toBeUndefined();
    const dup = await parseProfiles(profilesText('  - name: g2\n    profile: hv\n    machines: [{ hostname: node-9, uuid: "11111111-2222-3333-4444-555555555555" }, { hostname: node-1 }]\n'));
    expect(() => buildCatalog(dup)).toThrow(/^profiles\.yaml: 3 problems:/);
    expect(() => buildCatalog(dup)).toThrow("machines 'node-3' (group rack1) and 'node-9' (group g2) have the same UUID 11111111-2222-3333-4444-555555555555");
    expect(() => buildCatalog(dup)).toThrow("machines 'node-1' (group rack1) and 'node-1' (group g2) have the same hostname node-1");
  });

  it('a static ip needs both a gateway and DNS servers', async () => {
    for (const extra of ['gateway: 10.0.0.1', 'dns: [10.0.0.1]']) {
      const file = await parseProfiles(profilesText(`  - name: g2\n    profile: hv\n    machines: [{ hostname: node-9, mac: "52:54:00:00:00:09", ip: 10.0.0.9/24, ${extra} }]\n`));
      expect(() => buildCatalog(file)).toThrow('groups.g2.machines[0]: a static ip needs gateway and dns');
    }
  });

  it('default-group names: only the group, a dash and twelve hex digits; nothing without a default group', async () => {
    const cat = buildCatalog(await parseProfiles(profilesText()));
    for (const name of ['sparey525400000001', 'spare-5254000000011', 'spare-x525400000001', 'spare525400000001']) expect(machineByName(cat, name)).toBeUndefined();
    expect(defaultMachine(cat.defaultGroup!, '52:54:00:00:00:01').spec).toEqual({ mac: '52:54:00:00:00:01' });
    const none = buildCatalog(await parseProfiles(profilesText().replace('    default: true\n', '')));
    expect(machineByName(none, 'spare-525400000001')).toBeUndefined();
  });

  it('a machine with a MAC only is identified by its MAC alone', async () => {
    const cat = buildCatalog(await parseProfiles(profilesText()));
    const n1 = machineByName(cat, 'node-1')!;
    expect(requestIdentifies(n1, { mac: '52:54:00:00:00:99' })).toBe(false);
    expect(requestIdentifies(n1, { mac: '52:54:00:00:00:99', uuid: '11111111-2222-3333-4444-555555555555' })).toBe(false);
  });
});
