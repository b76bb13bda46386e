/**
 * TPM2_MakeCredential done in software (TPM 2.0 Part 1 24 "Credential Protection", Part 3
 * MakeCredential; what `tpm2_makecredential -T none` computes): a secret that only the TPM holding
 * an endorsement key can recover, and only for an object with a given name.
 *
 *   seed            random, the EK name algorithm's digest size; RSA-OAEP(SHA-256, label "IDENTITY\0") to the EK
 *   symKey          KDFa(SHA-256, seed, "STORAGE", AK name, "", EK symmetric key bits)
 *   encIdentity     AES-CFB(symKey, IV 0, TPM2B_DIGEST(secret))
 *   hmacKey         KDFa(SHA-256, seed, "INTEGRITY", "", "", 256)
 *   outerHMAC       HMAC-SHA-256(hmacKey, encIdentity || AK name)
 *   TPM2B_ID_OBJECT  TPM2B_DIGEST(outerHMAC) || encIdentity
 *
 * sealCredential takes the seed (pure, and what the tests check byte for byte against tpm2-tools);
 * makeCredential draws it.
 */
import { constants, createCipheriv, createHmac, publicEncrypt, randomBytes } from 'node:crypto';
import { ekKey, type RsaEkPublic } from './public-area.js';

const DIGEST_BYTES = 32;

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

/** A TPM2B: its size, then its bytes. */
export function tpm2b(b: Buffer): Buffer {
  return Buffer.concat([u16(b.length), b]);
}

/** KDFa with HMAC-SHA-256 (TPM 2.0 Part 1 11.4.10.2, SP 800-108 counter mode); `label` without its NUL. */
export function kdfa(key: Buffer, label: string, contextU: Buffer, contextV: Buffer, bits: number): Buffer {
  const out: Buffer[] = [];
  for (let i = 1; out.length * DIGEST_BYTES * 8 < bits; i++) {
    out.push(createHmac('sha256', key).update(Buffer.concat([u32(i), Buffer.from(`${label}\0`), contextU, contextV, u32(bits)])).digest());
  }
  return Buffer.concat(out).subarray(0, Math.ceil(bits / 8));
}

/** The TPM2B_ID_OBJECT for a secret, from a known seed. Pure. */
export function sealCredential(seed: Buffer, ek: Pick<RsaEkPublic, 'symmetricKeyBits'>, objectName: Buffer, secret: Buffer): Buffer {
  if (secret.length === 0 || secret.length > DIGEST_BYTES) throw new Error(`a credential is 1 to ${DIGEST_BYTES} bytes, not ${secret.length}`);
  const symKey = kdfa(seed, 'STORAGE', objectName, Buffer.alloc(0), ek.symmetricKeyBits);
  const cipher = createCipheriv(`aes-${ek.symmetricKeyBits}-cfb`, symKey, Buffer.alloc(16));
  const encIdentity = Buffer.concat([cipher.update(tpm2b(secret)), cipher.final()]);
  const hmacKey = kdfa(seed, 'INTEGRITY', Buffer.alloc(0), Buffer.alloc(0), DIGEST_BYTES * 8);
  const outerHmac = createHmac('sha256', hmacKey).update(Buffer.concat([encIdentity, objectName])).digest();
  return Buffer.concat([tpm2b(outerHmac), encIdentity]);
}

/** The seed sealed to the EK (the TPM2B_ENCRYPTED_SECRET's contents). */
export function encryptSeed(ek: RsaEkPublic, seed: Buffer): Buffer {
  return publicEncrypt({ key: ekKey(ek), padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256', oaepLabel: Buffer.from('IDENTITY\0') }, seed);
}

/** TPM2_MakeCredential: the TPM2B_ID_OBJECT and TPM2B_ENCRYPTED_SECRET (each with its size) that only the EK's TPM opens. */
export function makeCredential(ek: RsaEkPublic, objectName: Buffer, secret: Buffer): { idObject: Buffer; encryptedSecret: Buffer } {
  const seed = randomBytes(DIGEST_BYTES);
  return { idObject: tpm2b(sealCredential(seed, ek, objectName, secret)), encryptedSecret: tpm2b(encryptSeed(ek, seed)) };
}
