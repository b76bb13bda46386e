/**
 * TPM 2.0 public areas (TPM2B_PUBLIC, TPM 2.0 Part 2 12.2.5) as a TPM and tpm2-tools marshal them:
 * parsing an endorsement key's (RSA, the TCG default template) and an object's name (nameAlg ||
 * H(TPMT_PUBLIC), Part 1 16). Everything is checked against its length; a malformed area throws.
 * Pure.
 */
import { createHash, createPublicKey } from 'node:crypto';

export const TPM_ALG = { RSA: 0x0001, SHA256: 0x000b, NULL: 0x0010, AES: 0x0006, CFB: 0x0043, ECC: 0x0023 } as const;

/** The attributes a TCG EK template sets: fixedTPM, fixedParent, sensitiveDataOrigin, adminWithPolicy, restricted, decrypt. */
export const EK_ATTRIBUTES = 0x000300b2;

export interface RsaEkPublic {
  nameAlg: number;
  attributes: number;
  /** AES key bits of the EK's symmetric definition (what protects a credential's inner wrapper). */
  symmetricKeyBits: number;
  keyBits: number;
  exponent: number;
  modulus: Buffer;
}

/** A big-endian reader over a buffer that refuses to read past its end. */
class Reader {
  private pos = 0;
  constructor(
    private readonly buf: Buffer,
    private readonly what: string,
  ) {}
  private need(n: number): void {
    if (this.pos + n > this.buf.length) throw new Error(`${this.what}: truncated at byte ${this.pos}`);
  }
  u16(): number {
    this.need(2);
    const v = this.buf.readUInt16BE(this.pos);
    this.pos += 2;
    return v;
  }
  u32(): number {
    this.need(4);
    const v = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }
  sized(): Buffer {
    const n = this.u16();
    this.need(n);
    const v = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return v;
  }
  end(): void {
    if (this.pos !== this.buf.length) throw new Error(`${this.what}: ${this.buf.length - this.pos} bytes after the end`);
  }
}

/** The TPMT_PUBLIC inside a TPM2B_PUBLIC (its size checked). */
export function publicArea(tpm2bPublic: Buffer, what: string): Buffer {
  const r = new Reader(tpm2bPublic, what);
  const area = r.sized();
  r.end();
  if (area.length < 4) throw new Error(`${what}: empty public area`);
  return area;
}

/** An object's name: nameAlg || sha256(TPMT_PUBLIC); only SHA-256 names are accepted. */
export function objectName(tpm2bPublic: Buffer, what: string): Buffer {
  const area = publicArea(tpm2bPublic, what);
  const nameAlg = area.readUInt16BE(2);
  if (nameAlg !== TPM_ALG.SHA256) throw new Error(`${what}: name algorithm 0x${nameAlg.toString(16)} (SHA-256 expected)`);
  return Buffer.concat([area.subarray(2, 4), createHash('sha256').update(area).digest()]);
}

/** Parses an RSA endorsement key's public area; throws unless it is one credential activation can use. */
export function parseRsaEk(tpm2bPublic: Buffer): RsaEkPublic {
  const what = 'EK public area';
  const r = new Reader(publicArea(tpm2bPublic, what), what);
  const type = r.u16();
  if (type !== TPM_ALG.RSA) throw new Error(`${what}: type 0x${type.toString(16)} (an RSA key expected, as tpm2_createek -G rsa makes it)`);
  const nameAlg = r.u16();
  const attributes = r.u32();
  r.sized(); // authPolicy
  const symAlg = r.u16();
  if (symAlg !== TPM_ALG.AES) throw new Error(`${what}: symmetric algorithm 0x${symAlg.toString(16)} (AES expected: a storage key)`);
  const symmetricKeyBits = r.u16();
  const mode = r.u16();
  const scheme = r.u16();
  if (scheme !== TPM_ALG.NULL) r.u16();
  const keyBits = r.u16();
  const exponent = r.u32() || 65537;
  const modulus = r.sized();
  r.end();
  if (nameAlg !== TPM_ALG.SHA256) throw new Error(`${what}: name algorithm 0x${nameAlg.toString(16)} (SHA-256 expected)`);
  if (mode !== TPM_ALG.CFB || (symmetricKeyBits !== 128 && symmetricKeyBits !== 256)) throw new Error(`${what}: symmetric definition AES-${symmetricKeyBits} mode 0x${mode.toString(16)} (AES-128 or -256 CFB expected)`);
  if ((attributes & EK_ATTRIBUTES) !== EK_ATTRIBUTES) throw new Error(`${what}: attributes 0x${attributes.toString(16)} are not an endorsement key's (restricted decrypt, fixedTPM)`);
  if (modulus.length * 8 !== keyBits || keyBits < 2048) throw new Error(`${what}: a ${modulus.length * 8}-bit modulus for ${keyBits} key bits (2048 or more expected)`);
  return { nameAlg, attributes, symmetricKeyBits, keyBits, exponent, modulus: Buffer.from(modulus) };
}

function base64url(b: Buffer): string {
  return b.toString('base64url');
}

function exponentBytes(e: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(e);
  let i = 0;
  while (i < 3 && b[i] === 0) i++;
  return b.subarray(i);
}

/** The EK as a node public key. */
export function ekKey(ek: RsaEkPublic): ReturnType<typeof createPublicKey> {
  return createPublicKey({ key: { kty: 'RSA', n: base64url(ek.modulus), e: base64url(exponentBytes(ek.exponent)) }, format: 'jwk' });
}

/** What a machine is enrolled by (profiles.yaml `tpm_ek_sha256`): sha256 of the EK's SubjectPublicKeyInfo, DER. */
export function ekSha256(ek: RsaEkPublic): string {
  return createHash('sha256').update(ekKey(ek).export({ type: 'spki', format: 'der' })).digest('hex');
}
