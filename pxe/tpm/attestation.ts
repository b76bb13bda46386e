/**
 * hvpxe's side of TPM 2.0 attestation (the protocol: config/hvpxe-protocol.ts). A machine enrolled
 * by its endorsement key asks for a challenge with its boot credential; hvpxe checks the EK against
 * the enrolled sha256 and seals a fresh secret to it, bound to the AK's name (make-credential.ts).
 * The machine's TPM alone can open it; the secret coming back proves this boot runs on that TPM, and
 * the boot credential is then marked attested (credentials.ts releases the config only then).
 * A challenge lives two minutes and takes one answer; a wrong answer burns it.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { AttestChallenge, AttestProof, AttestRequest } from '../../config/hvpxe-protocol.js';
import { ekSha256, objectName, parseRsaEk } from './public-area.js';
import { makeCredential } from './make-credential.js';

export const ATTEST = { challengeTtlMs: 2 * 60_000, secretBytes: 32, pendingKept: 1000, maxField: 4096 } as const;

interface Pending {
  challenge: string;
  secret: Buffer;
  expires: number;
}

export type AttestOutcome<T> = { ok: true; value: T } | { ok: false; reason: 'malformed' | 'tpm mismatch' | 'no challenge' | 'wrong secret'; detail: string };

/** Whether a message's field is base64 of a sensible length. */
function base64Field(o: Record<string, unknown>, k: string): boolean {
  const v = o[k];
  return typeof v === 'string' && v.length <= ATTEST.maxField && /^[A-Za-z0-9+/]+=*$/.test(v);
}

/** The message in a body, or why it is not one. Pure. */
export function parseAttestMessage(body: Buffer): AttestRequest | AttestProof | undefined {
  let o: unknown;
  try {
    o = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  // Object(): null and scalars become objects without these fields.
  const m = Object(o) as Record<string, unknown>;
  if (m.step === 'challenge' && base64Field(m, 'ekPublic') && base64Field(m, 'akPublic')) return { step: 'challenge', ekPublic: m.ekPublic as string, akPublic: m.akPublic as string };
  if (m.step === 'proof' && typeof m.challenge === 'string' && base64Field(m, 'secret')) return { step: 'proof', challenge: m.challenge, secret: m.secret as string };
  return undefined;
}

export class Attestations {
  /** Open challenges by the sha256 of the boot credential they were asked with. */
  private readonly pending = new Map<string, Pending>();

  /** Challenges not yet answered (expired ones go at the next challenge; at most ATTEST.pendingKept). */
  get open(): number {
    return this.pending.size;
  }

  /** A challenge for an EK that must hash to `enrolled`. */
  challenge(credentialSha256: string, enrolled: string, req: AttestRequest, now: number): AttestOutcome<AttestChallenge> {
    let ekHash: string;
    let sealed: { idObject: Buffer; encryptedSecret: Buffer };
    const secret = randomBytes(ATTEST.secretBytes);
    try {
      const ek = parseRsaEk(Buffer.from(req.ekPublic, 'base64'));
      ekHash = ekSha256(ek);
      if (ekHash !== enrolled) return { ok: false, reason: 'tpm mismatch', detail: `the machine's TPM has endorsement key sha256 ${ekHash}, not the enrolled ${enrolled}` };
      sealed = makeCredential(ek, objectName(Buffer.from(req.akPublic, 'base64'), 'AK public area'), secret);
    } catch (err) {
      return { ok: false, reason: 'malformed', detail: (err as Error).message };
    }
    const challenge = randomBytes(16).toString('hex');
    this.pending.delete(credentialSha256);
    this.pending.set(credentialSha256, { challenge, secret, expires: now + ATTEST.challengeTtlMs });
    for (const [k, p] of this.pending) if (this.pending.size > ATTEST.pendingKept || p.expires < now) this.pending.delete(k);
    return { ok: true, value: { challenge, idObject: sealed.idObject.toString('base64'), encryptedSecret: sealed.encryptedSecret.toString('base64') } };
  }

  /** Checks the secret sent back; the challenge is used up whatever the answer. */
  prove(credentialSha256: string, proof: AttestProof, now: number): AttestOutcome<true> {
    const p = this.pending.get(credentialSha256);
    this.pending.delete(credentialSha256);
    if (!p || p.challenge !== proof.challenge || p.expires < now) return { ok: false, reason: 'no challenge', detail: 'no open challenge for this boot credential (expired, answered already, or never asked)' };
    const secret = Buffer.from(proof.secret, 'base64');
    if (secret.length !== p.secret.length || !timingSafeEqual(secret, p.secret)) return { ok: false, reason: 'wrong secret', detail: 'the secret sent back is not the one sealed to the enrolled TPM' };
    return { ok: true, value: true };
  }
}
