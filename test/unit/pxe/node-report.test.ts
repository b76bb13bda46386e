/**
 * Node-report tokens and post-install events (pxe/node-report.ts): who gets a token (a running
 * install's boot credential, once), which token a post needs (the machine's, by its hash), what a
 * node event may carry, and that keeping one never changes a machine's boot decision.
 */
import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { applyNodeEvent, checkReportToken, checkTokenRequest, newReportToken, nodeEventSummary, parseNodeEvent } from '../../../pxe/node-report.js';
import { decideBoot } from '../../../pxe/boot-decision.js';
import type { CredentialRecord, MachineActivity } from '../../../pxe/history-document.js';
import { REPORT_TOKEN_RE } from '../../../config/hvpxe-protocol.js';
import { Redactor } from '../../../lib/redact.js';

const T0 = Date.parse('2026-12-01T10:00:00Z');
const sha = (s: string): string => createHash('sha256').update(s).digest('hex');
const A = 'A'.repeat(43);
const B = 'B'.repeat(43);
const rec = (credential: string, over: Partial<CredentialRecord> = {}): CredentialRecord => ({ sha256: sha(credential), issuedAt: new Date(T0).toISOString(), via: 'ipxe', ...over });

describe('newReportToken', () => {
  it('is hvnr_ and 32 random bytes, different every time, kept only as its sha256', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const t = newReportToken();
      expect(t.token).toMatch(REPORT_TOKEN_RE);
      expect(Buffer.from(t.token.slice(5), 'base64url')).toHaveLength(32);
      expect(t.sha256).toBe(sha(t.token));
      seen.add(t.token);
    }
    expect(seen.size).toBe(20);
  });
});

describe('checkTokenRequest: only a running install, once per boot credential', () => {
  const served = rec(A, { configAt: new Date(T0 + 60_000).toISOString() });
  it.each([
    ['no credential', [served], null, false, 'missing'],
    ['another machine\'s (or forged) credential', [served], B, false, 'unknown'],
    ['a boot whose config was never served', [rec(A)], A, false, 'no config served'],
    ['a second request with the same credential', [{ ...served, reportTokenAt: 'x' }], A, false, 'already issued'],
    ['an enrolled machine whose boot did not prove its TPM', [served], A, true, 'not attested'],
    ['a credential older than the events lifetime', [served], A, false, 'expired'],
  ] as const)('refuses %s', (_what, records, credential, attested, reason) => {
    const now = reason === 'expired' ? T0 + 25 * 3600_000 : T0 + 120_000;
    expect(checkTokenRequest(records as readonly CredentialRecord[], credential, now, attested)).toEqual({ ok: false, reason });
  });
  it('accepts the running install\'s credential (attested when enrolled)', () => {
    expect(checkTokenRequest([served], A, T0 + 120_000, false)).toMatchObject({ ok: true });
    expect(checkTokenRequest([{ ...served, attestedAt: 'y' }], A, T0 + 120_000, true)).toMatchObject({ ok: true });
  });
});

describe('checkReportToken: the machine\'s own token, by its hash', () => {
  const t = newReportToken();
  const a = { reportToken: { sha256: t.sha256, issuedAt: 'x' } };
  it('accepts it as a bearer', () => expect(checkReportToken(a, `Bearer ${t.token}`)).toEqual({ ok: true }));
  it.each([
    ['no header', undefined, 'missing'],
    ['another scheme', `Basic ${t.token}`, 'missing'],
    ['a boot credential', `Bearer ${A}`, 'malformed'],
    ['another token of the right form', `Bearer ${newReportToken().token}`, 'unknown'],
  ])('refuses %s', (_w, header, reason) => expect(checkReportToken(a, header)).toEqual({ ok: false, reason }));
  it('refuses everything for a machine that has no token', () => expect(checkReportToken({}, `Bearer ${t.token}`)).toEqual({ ok: false, reason: 'unknown' }));
});

describe('parseNodeEvent', () => {
  const r = new Redactor().add('s3cret-value');
  it('keeps the known fields, bounded and redacted', () => {
    const p = parseNodeEvent(JSON.stringify({ event: 'FALLBACK', at: '2026-12-03T07:00:00+01:00', message: `x s3cret-value ${'y'.repeat(500)}`, running: 'v2', failed: 'v3', extra: 'dropped', installed: true }), r);
    expect(p.ok).toBe(true);
    if (!p.ok) return;
    expect(p.event).toMatchObject({ event: 'FALLBACK', at: '2026-12-03T06:00:00.000Z', running: 'v2', failed: 'v3' });
    expect(p.event.message).not.toContain('s3cret-value');
    expect(p.event.message!.length).toBe(200);
    expect(Object.keys(p.event).sort()).toEqual(['at', 'event', 'failed', 'message', 'running']);
  });
  it.each([
    ['an install outcome', { event: 'SUCCEEDED', at: '2026-12-03T07:00:00Z' }],
    ['hvinstall\'s install event', { type: 'install', phase: 'succeeded', at: '2026-12-03T07:00:00Z' }],
    ['no time', { event: 'FALLBACK' }],
    ['a list', [1]],
  ])('refuses %s', (_w, body) => expect(parseNodeEvent(JSON.stringify(body), r).ok).toBe(false));
  it('refuses a body that is not JSON', () => expect(parseNodeEvent('FALLBACK', r)).toEqual({ ok: false, why: 'not JSON' }));
});

describe('applyNodeEvent never changes what the machine boots next', () => {
  const base = (): MachineActivity => ({ name: 'n', group: 'g', profile: 'p', fetched: { artifacts: {} }, events: [], localBoots: ['2026-12-01T09:00:00Z'] });
  it.each([
    ['installed', { installed: { at: 'T', via: 'SUCCEEDED webhook' } }],
    ['installing', { installing: { since: 'T' } }],
    ['held', { hold: { since: 'T', why: 'w' } }],
    ['never installed', {}],
  ])('%s: the same decision and record, plus the report', (_w, over) => {
    const a: MachineActivity = { ...base(), ...over };
    const before = structuredClone(a);
    const e = { event: 'FALLBACK' as const, at: '2026-12-03T07:00:00.000Z', failed: 'v3', running: 'v2' };
    applyNodeEvent(a, e, '2026-12-03T07:00:01.000Z', (x) => x);
    expect(decideBoot(a, 'local', T0)).toEqual(decideBoot(before, 'local', T0));
    const { events, nodeReport, ...rest } = a;
    const { events: _e, ...restBefore } = before;
    expect(rest).toEqual(restBefore);
    expect(events).toHaveLength(1);
    expect(nodeReport).toEqual({ event: 'FALLBACK', at: '2026-12-03T07:00:01.000Z', summary: nodeEventSummary(e) });
    expect(nodeReport!.summary).toBe('node upgrade fell back from v3, runs v2');
  });
});

describe('redaction', () => {
  it('redacts a node-report token wherever it appears in a log line', () => {
    const t = newReportToken().token;
    expect(new Redactor().redactString(`posting with ${t} now`)).not.toContain(t.slice(5));
  });
});

describe("the installer's side: the token URL and the grant it accepts", () => {
  it('derives the token URL from the events URL, credential kept; none without a credential or /events/', async () => {
    const { reportTokenUrl } = await import('../../../installer/remote/node-report.js');
    expect(reportTokenUrl(`http://10.0.0.1:8080/events/node-1?credential=${A}`)).toBe(`http://10.0.0.1:8080/report-token/node-1?credential=${A}`);
    expect(reportTokenUrl('http://10.0.0.1:8080/events/node-1')).toBeUndefined();
    expect(reportTokenUrl(`http://10.0.0.1:8080/hooks/node-1?credential=${A}`)).toBeUndefined();
    expect(reportTokenUrl(undefined)).toBeUndefined();
  });
  it('accepts only a grant for the same server and machine, with a token of the right form', async () => {
    const { checkGrant } = await import('../../../installer/remote/node-report.js');
    const events = `http://10.0.0.1:8080/events/node-1?credential=${A}`;
    const good = { url: 'http://10.0.0.1:8080/node-events/node-1', token: newReportToken().token, machine: 'node-1', events: ['FALLBACK'] };
    expect(checkGrant(good, events)).toEqual(good);
    expect(checkGrant({ ...good, url: 'http://evil.example/node-events/node-1' }, events)).toBeUndefined();
    expect(checkGrant({ ...good, url: 'http://10.0.0.1:8080/node-events/node-2' }, events)).toBeUndefined();
    expect(checkGrant({ ...good, token: B }, events)).toBeUndefined();
    expect(checkGrant('x', events)).toBeUndefined();
  });
});

describe('the etcd store keeps the token and the report in the machine record (etcd-layout.ts)', () => {
  it('writes them with the record, not under a credential lease, and reads them back', async () => {
    const { planWrite, storedOf, machineOf } = await import('../../../pxe/etcd-layout.js');
    const t = newReportToken();
    const a: MachineActivity = { name: 'node-1', group: 'g', profile: 'p', fetched: { artifacts: {} }, events: [], reportToken: { sha256: t.sha256, issuedAt: 'T', via: 's1' }, nodeReport: { event: 'FALLBACK', at: 'T2', summary: 's' } };
    const plan = planWrite('/hv', undefined, a, '7')!;
    const puts = plan.success.flatMap((op) => ('request_put' in op ? [op.request_put] : []));
    expect(puts).toHaveLength(1);
    expect(puts[0]!.lease).toBeUndefined();
    const doc = Buffer.from(puts[0]!.value, 'base64').toString();
    expect(Buffer.from(puts[0]!.key, 'base64').toString()).toBe('/hv/machines/node-1');
    const back = machineOf(storedOf('/hv', { key: '/hv/machines/node-1', value: doc, modRevision: 3, createRevision: 3, lease: '0' }, [])!);
    expect(back.reportToken).toEqual(a.reportToken);
    expect(back.nodeReport).toEqual(a.nodeReport);
    expect(checkReportToken(back, `Bearer ${t.token}`)).toEqual({ ok: true });
  });
});
