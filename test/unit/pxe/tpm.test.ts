/**
 * hvpxe's TPM2_MakeCredential against tpm2-tools' (the oracle): with a software RSA key standing in
 * for an EK, `tpm2_makecredential -T none` seals a secret; its seed, recovered with the private key,
 * fed to our sealCredential must give its TPM2B_ID_OBJECT byte for byte, and our encrypted seed must
 * open with the same OAEP label. Also: public areas parsed and refused, names, the EK's enrolment
 * hash, and the challenge/answer bookkeeping. (A real TPM opening our credential: the swtpm test in
 * test/integration/pxe/tpm-attest.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { constants, createDecipheriv, createHash, createHmac, generateKeyPairSync, privateDecrypt, type KeyObject } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { EK_ATTRIBUTES, ekSha256, objectName, parseRsaEk, TPM_ALG } from '../../../pxe/tpm/public-area.js';
import { encryptSeed, kdfa, makeCredential, sealCredential, tpm2b } from '../../../pxe/tpm/make-credential.js';
import { ATTEST, Attestations, parseAttestMessage } from '../../../pxe/tpm/attestation.js';

let dir: string;
let key: KeyObject;
/** The software EK's public area (built in each test: a failure in it must fail a test, not a hook). */
let ekModulus: Buffer;
const ekPubOf = (): Buffer => ekArea(ekModulus);

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

/** A TPM2B_PUBLIC as the TCG EK template L-1 lays it out, around a given modulus (written here, not by the product). */
function ekArea(modulus: Buffer, over: { type?: number; attributes?: number; symAlg?: number; symBits?: number; mode?: number; nameAlg?: number; scheme?: number[]; keyBits?: number } = {}): Buffer {
  const area = Buffer.concat([
    u16(over.type ?? 0x0001),
    u16(over.nameAlg ?? 0x000b),
    u32(over.attributes ?? 0x000300b2),
    tpm2b(Buffer.alloc(32, 0x83)),
    u16(over.symAlg ?? 0x0006),
    u16(over.symBits ?? 128),
    u16(over.mode ?? 0x0043),
    // TPMT_RSA_SCHEME: TPM_ALG_NULL, or a scheme and its hash algorithm.
    ...(over.scheme ?? [0x0010]).map(u16),
    u16(over.keyBits ?? modulus.length * 8),
    u32(0),
    tpm2b(modulus),
  ]);
  return tpm2b(area);
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hvpxe-tpm-'));
  ({ privateKey: key } = generateKeyPairSync('rsa', { modulusLength: 2048 }));
  ekModulus = Buffer.from(key.export({ format: 'jwk' }).n!, 'base64url');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function openSeed(encryptedSecret: Buffer): Buffer {
  return privateDecrypt({ key, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256', oaepLabel: Buffer.from('IDENTITY\0', 'latin1') }, encryptedSecret);
}

describe('MakeCredential, checked against tpm2_makecredential', () => {
  it('gives the TPM2B_ID_OBJECT tpm2-tools gives for the same seed, byte for byte', async () => {
    const name = Buffer.concat([u16(0x000b), createHash('sha256').update('an attestation key').digest()]);
    const secret = Buffer.from('0123456789abcdef0123456789abcdef');
    await writeFile(path.join(dir, 'ek.pub'), ekPubOf());
    await writeFile(path.join(dir, 'secret'), secret);
    execFileSync('tpm2_makecredential', ['-T', 'none', '-e', path.join(dir, 'ek.pub'), '-s', path.join(dir, 'secret'), '-n', name.toString('hex'), '-o', path.join(dir, 'cred.out')], { stdio: 'pipe' });
    const out = await readFile(path.join(dir, 'cred.out'));
    expect(out.readUInt32BE(0)).toBe(0xbadcc0de);
    const idLen = out.readUInt16BE(8);
    const idObject = out.subarray(10, 10 + idLen);
    const encSecret = out.subarray(12 + idLen, 12 + idLen + out.readUInt16BE(10 + idLen));
    const seed = openSeed(encSecret);
    expect(seed).toHaveLength(32);
    expect(sealCredential(seed, { symmetricKeyBits: 128 }, name, secret).equals(idObject)).toBe(true);
  });

  it('seals its own seed to the EK so that only the private key opens it, with the IDENTITY label', () => {
    const ek = parseRsaEk(ekPubOf());
    const seed = Buffer.alloc(32, 7);
    expect(openSeed(encryptSeed(ek, seed)).equals(seed)).toBe(true);
    const { idObject, encryptedSecret } = makeCredential(ek, Buffer.concat([u16(0x000b), Buffer.alloc(32)]), Buffer.alloc(32, 1));
    expect(encryptedSecret.readUInt16BE(0)).toBe(256);
    expect(idObject.readUInt16BE(0)).toBe(idObject.length - 2);
    // A different seed every time.
    expect(makeCredential(ek, Buffer.alloc(34), Buffer.alloc(32, 1)).idObject.equals(idObject)).toBe(false);
    expect(() => sealCredential(seed, ek, Buffer.alloc(34), Buffer.alloc(33))).toThrow('a credential is 1 to 32 bytes, not 33');
    expect(() => sealCredential(seed, ek, Buffer.alloc(34), Buffer.alloc(0))).toThrow('a credential is 1 to 32 bytes, not 0');
  });

  it('KDFa: the length in bits is part of every block (a longer output is not a longer prefix)', () => {
    const long = kdfa(Buffer.from('k'), 'STORAGE', Buffer.from('u'), Buffer.from('v'), 512);
    expect(long).toHaveLength(64);
    expect(kdfa(Buffer.from('k'), 'STORAGE', Buffer.from('u'), Buffer.from('v'), 128)).toHaveLength(16);
    expect(long.subarray(0, 16).equals(kdfa(Buffer.from('k'), 'STORAGE', Buffer.from('u'), Buffer.from('v'), 128))).toBe(false);
  });
});

describe('public areas', () => {
  it('parses the EK template and hashes the EK as `openssl pkey -pubout -outform der | sha256sum` would', () => {
    const ek = parseRsaEk(ekPubOf());
    expect(ek).toMatchObject({ nameAlg: TPM_ALG.SHA256, attributes: EK_ATTRIBUTES, symmetricKeyBits: 128, keyBits: 2048, exponent: 65537 });
    const der = execFileSync('openssl', ['pkey', '-pubout', '-outform', 'DER'], { input: key.export({ type: 'pkcs8', format: 'pem' }) });
    expect(ekSha256(ek)).toBe(createHash('sha256').update(der).digest('hex'));
  });

  it('hashes an EK with another exponent as openssl does, and takes an AES-256 EK template', () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048, publicExponent: 3 });
    const jwk = privateKey.export({ format: 'jwk' });
    const n = Buffer.from(jwk.n!, 'base64url');
    const area = Buffer.from(ekArea(n));
    // The exponent field (after the modulus size) carries 3; 0 means 65537.
    area.writeUInt32BE(3, area.length - n.length - 2 - 4);
    const ek = parseRsaEk(area);
    expect(ek.exponent).toBe(3);
    const der = execFileSync('openssl', ['pkey', '-pubout', '-outform', 'DER'], { input: privateKey.export({ type: 'pkcs8', format: 'pem' }) });
    expect(ekSha256(ek)).toBe(createHash('sha256').update(der).digest('hex'));
    expect(parseRsaEk(ekArea(n, { symBits: 256 })).symmetricKeyBits).toBe(256);
    expect(() => parseRsaEk(ekArea(n, { symBits: 192 }))).toThrow(/AES-192 mode 0x43 \(AES-128 or -256 CFB expected\)/);
    expect(EK_ATTRIBUTES).toBe(0x000300b2);
    expect(TPM_ALG).toEqual({ RSA: 0x0001, SHA256: 0x000b, NULL: 0x0010, AES: 0x0006, CFB: 0x0043, ECC: 0x0023 });
  });

  it('reads past an RSA scheme and its hash algorithm (RSAES-OAEP with SHA-256) to the key bits and modulus', () => {
    const n = Buffer.from(key.export({ format: 'jwk' }).n!, 'base64url');
    expect(parseRsaEk(ekArea(n, { scheme: [0x0017, 0x000b] }))).toMatchObject({ keyBits: 2048, exponent: 65537, modulus: n });
  });

  it('refuses what credential activation cannot use, saying why', () => {
    const n = Buffer.from(key.export({ format: 'jwk' }).n!, 'base64url');
    expect(() => parseRsaEk(ekArea(n, { type: 0x0023 }))).toThrow('EK public area: type 0x23 (an RSA key expected, as tpm2_createek -G rsa makes it)');
    expect(() => parseRsaEk(ekArea(n, { symAlg: 0x0010 }))).toThrow(/symmetric algorithm 0x10 \(AES expected: a storage key\)/);
    expect(() => parseRsaEk(ekArea(n, { mode: 0x0044 }))).toThrow(/AES-128 mode 0x44/);
    expect(() => parseRsaEk(ekArea(n, { attributes: 0x00060072 }))).toThrow(/are not an endorsement key's/);
    expect(() => parseRsaEk(ekArea(n, { nameAlg: 0x0004 }))).toThrow(/name algorithm 0x4 \(SHA-256 expected\)/);
    expect(() => parseRsaEk(ekArea(n.subarray(0, 128)))).toThrow(/a 1024-bit modulus for 1024 key bits \(2048 or more expected\)/);
    expect(() => parseRsaEk(ekArea(n, { keyBits: 3072 }))).toThrow(/a 2048-bit modulus for 3072 key bits/);
    expect(() => parseRsaEk(ekPubOf().subarray(0, 100))).toThrow(/truncated at byte/);
    expect(() => parseRsaEk(Buffer.concat([ekPubOf(), Buffer.from([0])]))).toThrow(/1 bytes after the end/);
    expect(() => parseRsaEk(Buffer.from([0, 1, 0]))).toThrow(/empty public area/);
  });

  it("names an object nameAlg || sha256(TPMT_PUBLIC) and refuses other name algorithms", () => {
    const area = Buffer.concat([u16(1), u16(0x000b), Buffer.alloc(20, 9)]);
    expect(objectName(tpm2b(area), 'AK').equals(Buffer.concat([u16(0x000b), createHash('sha256').update(area).digest()]))).toBe(true);
    expect(() => objectName(tpm2b(Buffer.concat([u16(1), u16(0x0004), Buffer.alloc(4)])), 'AK')).toThrow('AK: name algorithm 0x4 (SHA-256 expected)');
  });
});

describe('Attestations', () => {
  const cred = 'c'.repeat(64);

  it('refuses an EK other than the enrolled one, naming the one it saw', () => {
    const a = new Attestations();
    const r = a.challenge(cred, 'f'.repeat(64), { step: 'challenge', ekPublic: ekPubOf().toString('base64'), akPublic: tpm2b(Buffer.alloc(40, 1)).toString('base64') }, 0);
    expect(r).toEqual({ ok: false, reason: 'tpm mismatch', detail: `the machine's TPM has endorsement key sha256 ${ekSha256(parseRsaEk(ekPubOf()))}, not the enrolled ${'f'.repeat(64)}` });
  });

  it('answers the enrolled EK with a sealed secret, takes one answer, and only the right one, in time', () => {
    const a = new Attestations();
    const enrolled = ekSha256(parseRsaEk(ekPubOf()));
    const ak = tpm2b(Buffer.concat([u16(1), u16(0x000b), Buffer.alloc(30, 2)]));
    const req = { step: 'challenge' as const, ekPublic: ekPubOf().toString('base64'), akPublic: ak.toString('base64') };
    const c = a.challenge(cred, enrolled, req, 1000);
    if (!c.ok) throw new Error(c.detail);
    // The secret as the TPM recovers it (KDFa checked against tpm2-tools above): open the seed, then the inner wrapper.
    const seed = openSeed(Buffer.from(c.value.encryptedSecret, 'base64').subarray(2));
    const idObject = Buffer.from(c.value.idObject, 'base64').subarray(2);
    const encIdentity = idObject.subarray(2 + idObject.readUInt16BE(0));
    const name = objectName(ak, 'AK');
    const decipher = createDecipheriv('aes-128-cfb', kdfa(seed, 'STORAGE', name, Buffer.alloc(0), 128), Buffer.alloc(16));
    const identity = Buffer.concat([decipher.update(encIdentity), decipher.final()]);
    const secret = identity.subarray(2, 2 + identity.readUInt16BE(0));
    expect(secret).toHaveLength(ATTEST.secretBytes);
    const right = { step: 'proof' as const, challenge: c.value.challenge, secret: secret.toString('base64') };
    const wrong = { ...right, secret: Buffer.alloc(32).toString('base64') };
    expect(a.prove(cred, { ...right, challenge: 'another' }, 1001)).toMatchObject({ ok: false, reason: 'no challenge' });
    const again = a.challenge(cred, enrolled, req, 1000);
    if (!again.ok) throw new Error(again.detail);
    expect(a.prove(cred, { ...wrong, challenge: again.value.challenge }, 1001)).toEqual({ ok: false, reason: 'wrong secret', detail: 'the secret sent back is not the one sealed to the enrolled TPM' });
    // Used up: the answer to it finds no challenge any more.
    expect(a.prove(cred, { ...right, challenge: again.value.challenge }, 1002)).toMatchObject({ ok: false, reason: 'no challenge' });
    // A fresh challenge answered right, in time.
    const third = a.challenge(cred, enrolled, req, 2000);
    if (!third.ok) throw new Error(third.detail);
    const seed3 = openSeed(Buffer.from(third.value.encryptedSecret, 'base64').subarray(2));
    const id3 = Buffer.from(third.value.idObject, 'base64').subarray(2);
    const d3 = createDecipheriv('aes-128-cfb', kdfa(seed3, 'STORAGE', name, Buffer.alloc(0), 128), Buffer.alloc(16));
    const ident3 = Buffer.concat([d3.update(id3.subarray(2 + id3.readUInt16BE(0))), d3.final()]);
    expect(a.prove(cred, { step: 'proof', challenge: third.value.challenge, secret: ident3.subarray(2).toString('base64') }, 2001)).toEqual({ ok: true, value: true });
    const late = a.challenge(cred, enrolled, req, 5000);
    if (!late.ok) throw new Error(late.detail);
    expect(a.prove(cred, { ...wrong, challenge: late.value.challenge }, 5000 + ATTEST.challengeTtlMs + 1)).toMatchObject({ ok: false, reason: 'no challenge' });
    // Another boot credential has no challenge of this one's.
    expect(a.prove('d'.repeat(64), wrong, 0)).toMatchObject({ ok: false, reason: 'no challenge' });
  });

  it('refuses a malformed AK or EK as malformed', () => {
    const a = new Attestations();
    expect(a.challenge(cred, 'x', { step: 'challenge', ekPublic: Buffer.from([0, 1, 2]).toString('base64'), akPublic: 'AA==' }, 0)).toMatchObject({ ok: false, reason: 'malformed' });
  });
});

describe('what Attestations keeps', () => {
  it('one open challenge per boot credential, expired ones dropped, never more than the bound', () => {
    const a = new Attestations();
    const enrolled = ekSha256(parseRsaEk(ekPubOf()));
    const req = { step: 'challenge' as const, ekPublic: ekPubOf().toString('base64'), akPublic: tpm2b(Buffer.concat([u16(1), u16(0x000b), Buffer.alloc(8)])).toString('base64') };
    expect(a.challenge('a'.repeat(64), enrolled, req, 0).ok).toBe(true);
    expect(a.challenge('a'.repeat(64), enrolled, req, 10).ok).toBe(true);
    expect(a.open).toBe(1);
    expect(a.challenge('b'.repeat(64), enrolled, req, ATTEST.challengeTtlMs).ok).toBe(true);
    expect(a.open).toBe(2);
    // Past the first one's lifetime: a new challenge clears it.
    expect(a.challenge('c'.repeat(64), enrolled, req, ATTEST.challengeTtlMs + 11).ok).toBe(true);
    expect(a.open).toBe(2);
    expect(a.challenge('x', 'f'.repeat(64), req, 0).ok).toBe(false);
    expect(a.open).toBe(2);
  });

  it('holds at most ATTEST.pendingKept challenges', () => {
    const a = new Attestations();
    const enrolled = ekSha256(parseRsaEk(ekPubOf()));
    const req = { step: 'challenge' as const, ekPublic: ekPubOf().toString('base64'), akPublic: tpm2b(Buffer.concat([u16(1), u16(0x000b), Buffer.alloc(8)])).toString('base64') };
    for (let i = 0; i <= ATTEST.pendingKept + 5; i++) a.challenge(String(i).padStart(64, '0'), enrolled, req, 0);
    expect(a.open).toBe(ATTEST.pendingKept);
    expect(ATTEST).toEqual({ challengeTtlMs: 120_000, secretBytes: 32, pendingKept: 1000, maxField: 4096 });
  });
});

/** The secret a challenge sealed, recovered as the TPM does (the seed with the private key, then the inner wrapper). */
function secretOf(c: { idObject: string; encryptedSecret: string }, akName: Buffer): Buffer {
  const seed = openSeed(Buffer.from(c.encryptedSecret, 'base64').subarray(2));
  const idObject = Buffer.from(c.idObject, 'base64').subarray(2);
  const d = createDecipheriv('aes-128-cfb', kdfa(seed, 'STORAGE', akName, Buffer.alloc(0), 128), Buffer.alloc(16));
  const identity = Buffer.concat([d.update(idObject.subarray(2 + idObject.readUInt16BE(0))), d.final()]);
  return identity.subarray(2, 2 + identity.readUInt16BE(0));
}

describe('Attestations at their edges', () => {
  const ak = (): Buffer => tpm2b(Buffer.concat([u16(1), u16(0x000b), Buffer.alloc(12, 3)]));
  const req = (): { step: 'challenge'; ekPublic: string; akPublic: string } => ({ step: 'challenge', ekPublic: ekPubOf().toString('base64'), akPublic: ak().toString('base64') });

  it('a right answer at the last moment of the challenge counts, a moment later not', () => {
    const a = new Attestations();
    const enrolled = ekSha256(parseRsaEk(ekPubOf()));
    const c = a.challenge('a'.repeat(64), enrolled, req(), 0);
    if (!c.ok) throw new Error(c.detail);
    // Another machine's challenge exactly when this one ends does not clear it.
    expect(a.challenge('b'.repeat(64), enrolled, req(), ATTEST.challengeTtlMs).ok).toBe(true);
    expect(a.open).toBe(2);
    const secret = secretOf(c.value, objectName(ak(), 'AK'));
    expect(a.prove('a'.repeat(64), { step: 'proof', challenge: c.value.challenge, secret: secret.toString('base64') }, ATTEST.challengeTtlMs)).toEqual({ ok: true, value: true });
    const late = a.challenge('a'.repeat(64), enrolled, req(), 0);
    if (!late.ok) throw new Error(late.detail);
    const lateSecret = secretOf(late.value, objectName(ak(), 'AK')).toString('base64');
    expect(a.prove('a'.repeat(64), { step: 'proof', challenge: late.value.challenge, secret: lateSecret }, ATTEST.challengeTtlMs + 1)).toEqual({
      ok: false,
      reason: 'no challenge',
      detail: 'no open challenge for this boot credential (expired, answered already, or never asked)',
    });
  });

  it('a secret of another length is a wrong answer, not a crash', () => {
    const a = new Attestations();
    const c = a.challenge('a'.repeat(64), ekSha256(parseRsaEk(ekPubOf())), req(), 0);
    if (!c.ok) throw new Error(c.detail);
    expect(a.prove('a'.repeat(64), { step: 'proof', challenge: c.value.challenge, secret: Buffer.alloc(5).toString('base64') }, 1)).toMatchObject({ ok: false, reason: 'wrong secret' });
  });

  it('says which public area is malformed', () => {
    const a = new Attestations();
    const r = a.challenge('a'.repeat(64), ekSha256(parseRsaEk(ekPubOf())), { ...req(), akPublic: Buffer.from([0, 9, 1]).toString('base64') }, 0);
    expect(r).toEqual({ ok: false, reason: 'malformed', detail: 'AK public area: truncated at byte 2' });
  });
});

describe('KDFa over more than one block', () => {
  it('counts its blocks 1, 2, … (SP 800-108), written out here', () => {
    const block = (i: number): Buffer => {
      const n = Buffer.alloc(4);
      n.writeUInt32BE(i);
      const bits = Buffer.alloc(4);
      bits.writeUInt32BE(512);
      return createHmac('sha256', Buffer.from('k')).update(Buffer.concat([n, Buffer.from('STORAGE\0'), Buffer.from('u'), Buffer.from('v'), bits])).digest();
    };
    expect(kdfa(Buffer.from('k'), 'STORAGE', Buffer.from('u'), Buffer.from('v'), 512).equals(Buffer.concat([block(1), block(2)]))).toBe(true);
  });
});

describe('parseAttestMessage', () => {
  it('reads the two messages and nothing else', () => {
    expect(parseAttestMessage(Buffer.from('{"step":"challenge","ekPublic":"AAEC","akPublic":"AAEC"}'))).toEqual({ step: 'challenge', ekPublic: 'AAEC', akPublic: 'AAEC' });
    expect(parseAttestMessage(Buffer.from('{"step":"proof","challenge":"ab","secret":"AAEC"}'))).toEqual({ step: 'proof', challenge: 'ab', secret: 'AAEC' });
    expect(parseAttestMessage(Buffer.from(`{"step":"challenge","ekPublic":"${'A'.repeat(4096)}","akPublic":"AAEC"}`))).toMatchObject({ step: 'challenge' });
    for (const bad of ['null', '5', '"s"', '{"step":"other","ekPublic":"AAEC","akPublic":"AAEC","challenge":"ab","secret":"AAEC"}', '{"step":"challenge","ekPublic":"!AAEC","akPublic":"AAEC"}', '{"step":"challenge","ekPublic":"","akPublic":"AAEC"}', '{"step":"proof","challenge":"ab","secret":"AA EC"}', `{"step":"challenge","ekPublic":"${'A'.repeat(4097)}","akPublic":"AAEC"}`]) {
      expect(parseAttestMessage(Buffer.from(bad))).toBeUndefined();
    }
    for (const bad of ['', 'x', '[]', '{"step":"challenge","ekPublic":"AAEC"}', '{"step":"challenge","ekPublic":"not base64!","akPublic":"AAEC"}', `{"step":"challenge","ekPublic":"${'A'.repeat(5000)}","akPublic":"AAEC"}`, '{"step":"proof","secret":"AAEC"}', '{"step":"other"}']) {
      expect(parseAttestMessage(Buffer.from(bad))).toBeUndefined();
    }
  });
});
