/**
 * Boot credentials: every install script hvpxe serves (iPXE or grub) carries a fresh random
 * credential bound to that machine; the config URL and the event URL it puts on the kernel command
 * line require it. The config is served once per credential and within CREDENTIAL.configTtlMs of
 * the script; events are taken while the credential is one of the machine's current boots (within
 * CREDENTIAL.eventsTtlMs, an install's length). For a machine enrolled by its TPM's endorsement key,
 * the credential must also have been attested (tpm/attestation.ts) before the config is released.
 *
 * Only the credential's sha256 is kept (in the history, so a restart does not orphan a running
 * install); the credential itself lives in the served script and the machine's memory. Several
 * boots stay current at once, so a script requested by someone else does not revoke the install
 * that is running (its SUCCEEDED would be refused and the finished node reinstalled). Pure apart
 * from newCredential's randomness.
 */
import { createHash, randomBytes } from 'node:crypto';
import { BOOT_CREDENTIAL_RE } from '../config/hvpxe-protocol.js';
import type { CredentialRecord } from './history-document.js';

export const CREDENTIAL = {
  bytes: 32,
  /** From the script to the config fetch: the live system boots, fetches its root image, then its config. */
  configTtlMs: 60 * 60_000,
  /** From the script to the install's last event: downloading an ISO and installing can take hours. */
  eventsTtlMs: 24 * 60 * 60_000,
  /** Credentials kept per machine whose config was not fetched (older ones are dropped). */
  unusedKept: 4,
  /** Credentials kept per machine whose config was fetched (their installs may still report). */
  usedKept: 4,
} as const;

export function credentialHash(credential: string): string {
  return createHash('sha256').update(credential).digest('hex');
}

/** A fresh credential (base64url, 43 characters) and its hash. */
export function newCredential(): { credential: string; sha256: string } {
  const credential = randomBytes(CREDENTIAL.bytes).toString('base64url');
  return { credential, sha256: credentialHash(credential) };
}

function age(r: CredentialRecord, now: number): number {
  return now - Date.parse(r.issuedAt);
}

/** The machine's records after issuing one: expired ones dropped, unused and used ones bounded, newest kept. Pure. */
export function withIssued(records: readonly CredentialRecord[] | undefined, issued: CredentialRecord, now: number): CredentialRecord[] {
  const live = [...(records ?? []), issued].filter((r) => age(r, now) <= CREDENTIAL.eventsTtlMs);
  const used = live.filter((r) => r.configAt).slice(-CREDENTIAL.usedKept);
  const unused = live.filter((r) => !r.configAt).slice(-CREDENTIAL.unusedKept);
  return live.filter((r) => used.includes(r) || unused.includes(r));
}

export type CredentialUse = 'config' | 'events' | 'attest';

export type CredentialCheck =
  | { ok: true; record: CredentialRecord }
  | { ok: false; reason: 'missing' | 'malformed' | 'unknown' | 'expired' | 'used' | 'not attested' };

/** Words for the console and /machines, by refusal reason. */
export const REFUSAL_TEXT: Record<Exclude<CredentialCheck, { ok: true }>['reason'], string> = {
  missing: 'no boot credential: only the URL in the script hvpxe served to this machine works',
  malformed: 'not a boot credential',
  unknown: "not a boot credential hvpxe gave this machine (another machine's, or an older boot's)",
  expired: 'the boot credential expired: boot the machine again for a new one',
  used: 'the config was already served for this boot credential: boot the machine again for a new one',
  'not attested': 'this machine is enrolled by its TPM and has not proven it for this boot',
};

/**
 * Whether `credential` lets a request use `use` for this machine now. `attested`: the machine is
 * enrolled by its TPM, so its config and its events need an attested credential (someone with its
 * MAC but not its TPM gets a script, but can neither fetch the config nor report a finished
 * install). Pure.
 */
export function checkCredential(records: readonly CredentialRecord[] | undefined, credential: string | null | undefined, use: CredentialUse, now: number, attested = false): CredentialCheck {
  if (!credential) return { ok: false, reason: 'missing' };
  if (!BOOT_CREDENTIAL_RE.test(credential)) return { ok: false, reason: 'malformed' };
  const sha256 = credentialHash(credential);
  const record = records?.find((r) => r.sha256 === sha256);
  if (!record) return { ok: false, reason: 'unknown' };
  const ttl = use === 'events' ? CREDENTIAL.eventsTtlMs : CREDENTIAL.configTtlMs;
  if (age(record, now) > ttl) return { ok: false, reason: 'expired' };
  // An enrolled machine's config and events come only from the boot that proved its TPM.
  if (use !== 'attest' && attested && !record.attestedAt) return { ok: false, reason: 'not attested' };
  if (use === 'events') return { ok: true, record };
  if (record.configAt) return { ok: false, reason: 'used' };
  return { ok: true, record };
}
