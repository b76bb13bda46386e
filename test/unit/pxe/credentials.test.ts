/**
 * Boot credentials: what each use (config, events, attestation) accepts, the single use of the
 * config, the lifetimes, which records are kept, and the words a refusal gets.
 */
import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { checkCredential, CREDENTIAL, credentialHash, newCredential, REFUSAL_TEXT, withIssued } from '../../../pxe/credentials.js';
import type { CredentialRecord } from '../../../pxe/history-document.js';
import { BOOT_CREDENTIAL_RE, withBootCredential } from '../../../config/hvpxe-protocol.js';

const T0 = Date.parse('2026-12-01T10:00:00Z');
const iso = (ms: number): string => new Date(T0 + ms).toISOString();
const MIN = 60_000;

function record(credential: string, over: Partial<CredentialRecord> = {}): CredentialRecord {
  return { sha256: createHash('sha256').update(credential).digest('hex'), issuedAt: iso(0), via: 'ipxe', ...over };
}

const A = 'A'.repeat(43);
const B = 'B'.repeat(43);

describe('newCredential', () => {
  it('is 32 random bytes in base64url, different every time, kept only as its sha256', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 50; i++) {
      const c = newCredential();
      expect(c.credential).toMatch(BOOT_CREDENTIAL_RE);
      expect(Buffer.from(c.credential, 'base64url')).toHaveLength(32);
      expect(c.sha256).toBe(createHash('sha256').update(c.credential).digest('hex'));
      expect(credentialHash(c.credential)).toBe(c.sha256);
      seen.add(c.credential);
    }
    expect(seen.size).toBe(50);
  });

  it('goes into a URL as the credential query parameter', () => {
    expect(withBootCredential('http://h/config/n.yaml', A)).toBe(`http://h/config/n.yaml?credential=${A}`);
    expect(withBootCredential('http://h/x?a=1', A)).toBe(`http://h/x?a=1&credential=${A}`);
  });
});

describe('checkCredential', () => {
  const records = [record(A)];

  it('refuses a missing, malformed or unknown credential, whatever the use', () => {
    for (const use of ['config', 'events', 'attest'] as const) {
      expect(checkCredential(records, undefined, use, T0)).toEqual({ ok: false, reason: 'missing' });
      expect(checkCredential(records, '', use, T0)).toEqual({ ok: false, reason: 'missing' });
      expect(checkCredential(records, 'short', use, T0)).toEqual({ ok: false, reason: 'malformed' });
      expect(checkCredential(records, `${A}=`, use, T0)).toEqual({ ok: false, reason: 'malformed' });
      expect(checkCredential(records, 'A'.repeat(42) + '/', use, T0)).toEqual({ ok: false, reason: 'malformed' });
      expect(checkCredential(records, B, use, T0)).toEqual({ ok: false, reason: 'unknown' });
      expect(checkCredential(undefined, A, use, T0)).toEqual({ ok: false, reason: 'unknown' });
    }
  });

  it('serves the config once, within the config lifetime', () => {
    expect(checkCredential(records, A, 'config', T0 + CREDENTIAL.configTtlMs)).toEqual({ ok: true, record: records[0] });
    expect(checkCredential(records, A, 'config', T0 + CREDENTIAL.configTtlMs + 1)).toEqual({ ok: false, reason: 'expired' });
    expect(checkCredential([record(A, { configAt: iso(MIN) })], A, 'config', T0 + 2 * MIN)).toEqual({ ok: false, reason: 'used' });
  });

  it('takes events for the whole install, before and after the config, until the events lifetime', () => {
    const used = [record(A, { configAt: iso(MIN) })];
    expect(checkCredential(records, A, 'events', T0)).toMatchObject({ ok: true });
    expect(checkCredential(used, A, 'events', T0 + CREDENTIAL.eventsTtlMs)).toMatchObject({ ok: true });
    expect(checkCredential(used, A, 'events', T0 + CREDENTIAL.eventsTtlMs + 1)).toEqual({ ok: false, reason: 'expired' });
    expect(CREDENTIAL.eventsTtlMs).toBeGreaterThan(CREDENTIAL.configTtlMs);
  });

  it('an enrolled machine gets its config only for an attested credential; attestation itself needs an unused one', () => {
    expect(checkCredential(records, A, 'config', T0, true)).toEqual({ ok: false, reason: 'not attested' });
    const attested = [record(A, { attestedAt: iso(MIN) })];
    expect(checkCredential(attested, A, 'config', T0 + MIN, true)).toMatchObject({ ok: true });
    expect(checkCredential(records, A, 'attest', T0)).toMatchObject({ ok: true });
    expect(checkCredential([record(A, { configAt: iso(MIN) })], A, 'attest', T0 + MIN)).toEqual({ ok: false, reason: 'used' });
    expect(checkCredential(records, A, 'attest', T0 + CREDENTIAL.configTtlMs + 1)).toEqual({ ok: false, reason: 'expired' });
    // attested=false (not enrolled): an unattested credential is enough.
    expect(checkCredential(records, A, 'config', T0, false)).toMatchObject({ ok: true });
    // Events of an enrolled machine: only from the boot that proved its TPM (an impostor cannot report a finished install).
    expect(checkCredential(records, A, 'events', T0, true)).toEqual({ ok: false, reason: 'not attested' });
    expect(checkCredential(attested, A, 'events', T0 + MIN, true)).toMatchObject({ ok: true });
    expect(checkCredential(records, A, 'events', T0, false)).toMatchObject({ ok: true });
  });

  it('finds the credential among several current boots', () => {
    expect(checkCredential([record(B), record(A)], A, 'config', T0)).toEqual({ ok: true, record: record(A) });
  });

  it('has words for every refusal', () => {
    expect(Object.keys(REFUSAL_TEXT).sort()).toEqual(['expired', 'malformed', 'missing', 'not attested', 'unknown', 'used']);
    expect(REFUSAL_TEXT.used).toBe('the config was already served for this boot credential: boot the machine again for a new one');
  });
});

describe('withIssued', () => {
  it('keeps at most four unused and four used credentials, newest last, and drops expired ones', () => {
    let recs: CredentialRecord[] = [];
    for (let i = 0; i < 10; i++) recs = withIssued(recs, record(`u${i}`.padEnd(43, 'x'), { issuedAt: iso(i) }), T0 + 10);
    expect(recs).toHaveLength(CREDENTIAL.unusedKept);
    expect(recs.map((r) => r.issuedAt)).toEqual([iso(6), iso(7), iso(8), iso(9)]);
    // Used ones (an install may still report with them) are not pushed out by a stream of new scripts.
    const used = [0, 1, 2, 3, 4].map((i) => record(`c${i}`.padEnd(43, 'y'), { issuedAt: iso(i), configAt: iso(i + 1) }));
    let mixed = used;
    for (let i = 0; i < 20; i++) mixed = withIssued(mixed, record(`n${i}`.padEnd(43, 'z'), { issuedAt: iso(100 + i) }), T0 + 200);
    expect(mixed.filter((r) => r.configAt).map((r) => r.issuedAt)).toEqual([iso(1), iso(2), iso(3), iso(4)]);
    expect(mixed.filter((r) => !r.configAt)).toHaveLength(CREDENTIAL.unusedKept);
    const later = withIssued(mixed, record(B, { issuedAt: iso(CREDENTIAL.eventsTtlMs + 50) }), T0 + CREDENTIAL.eventsTtlMs + 50);
    expect(later.filter((r) => r.configAt)).toEqual([]);
    expect(later.at(-1)!.sha256).toBe(record(B).sha256);
  });
});

describe('the credential rules, as the operator reads them', () => {
  it('has these lifetimes and bounds', () => {
    expect(CREDENTIAL).toEqual({ bytes: 32, configTtlMs: 60 * 60_000, eventsTtlMs: 24 * 60 * 60_000, unusedKept: 4, usedKept: 4 });
  });

  it('says each refusal in these words', () => {
    expect(REFUSAL_TEXT).toEqual({
      missing: 'no boot credential: only the URL in the script hvpxe served to this machine works',
      malformed: 'not a boot credential',
      unknown: "not a boot credential hvpxe gave this machine (another machine's, or an older boot's)",
      expired: 'the boot credential expired: boot the machine again for a new one',
      used: 'the config was already served for this boot credential: boot the machine again for a new one',
      'not attested': 'this machine is enrolled by its TPM and has not proven it for this boot',
    });
  });

  it('keeps a record exactly as old as the events lifetime, drops one a millisecond older', () => {
    const edge = record(A, { issuedAt: iso(0) });
    expect(withIssued([edge], record(B, { issuedAt: iso(1) }), T0 + CREDENTIAL.eventsTtlMs)).toHaveLength(2);
    expect(withIssued([edge], record(B, { issuedAt: iso(1) }), T0 + CREDENTIAL.eventsTtlMs + 1)).toHaveLength(1);
  });
});
