/**
 * SHA-512 crypt (`$6$`), the glibc algorithm (Ulrich Drepper's "Unix crypt using SHA-256 and
 * SHA-512", the one `openssl passwd -6` and /etc/shadow use), on node:crypto. Harvester's TUI stores
 * os.password this way; yip writes the hash into /etc/shadow unchanged.
 */
import { createHash } from 'node:crypto';

export const CRYPT_ALPHABET = './0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const ROUNDS_DEFAULT = 5000;
const ROUNDS_MIN = 1000;
const ROUNDS_MAX = 999_999_999;
const SALT_MAX = 16;

/** True for a value that already is a crypt hash Harvester accepts as os.password ($6$, $5$, $1$, $apr1$). */
export function isCryptHash(value: string): boolean {
  return /^\$(6|5|1|apr1)\$[^$]*\$[./0-9A-Za-z]+$/.test(value) || /^\$(6|5)\$rounds=\d+\$[^$]*\$[./0-9A-Za-z]+$/.test(value);
}

function sha512(...parts: Buffer[]): Buffer {
  const h = createHash('sha512');
  for (const p of parts) h.update(p);
  return h.digest();
}

/** `len` bytes of `block` repeated. */
function repeatTo(block: Buffer, len: number): Buffer {
  const out = Buffer.alloc(len);
  for (let i = 0; i < len; i += block.length) block.copy(out, i, 0, Math.min(block.length, len - i));
  return out;
}

/** The byte order glibc uses when encoding the 64-byte digest: triples, high byte first. */
const PERMUTATION: Array<[number, number, number]> = [
  [0, 21, 42], [22, 43, 1], [44, 2, 23], [3, 24, 45], [25, 46, 4], [47, 5, 26], [6, 27, 48],
  [28, 49, 7], [50, 8, 29], [9, 30, 51], [31, 52, 10], [53, 11, 32], [12, 33, 54], [34, 55, 13],
  [56, 14, 35], [15, 36, 57], [37, 58, 16], [59, 17, 38], [18, 39, 60], [40, 61, 19], [62, 20, 41],
];

function b64From24(b2: number, b1: number, b0: number, n: number): string {
  let w = (b2 << 16) | (b1 << 8) | b0;
  let s = '';
  for (let i = 0; i < n; i++) {
    s += CRYPT_ALPHABET[w & 0x3f];
    w >>>= 6;
  }
  return s;
}

/**
 * Hashes `password` with `salt` (at most 16 characters are used, as glibc does). `rounds` other than
 * the default 5000 is written as `rounds=N$`, clamped to glibc's 1000..999999999.
 */
export function sha512Crypt(password: string, salt: string, rounds?: number): string {
  if (salt.includes('$')) throw new Error('sha512Crypt: a salt cannot contain "$"');
  const P = Buffer.from(password, 'utf8');
  const S = Buffer.from(salt, 'utf8').subarray(0, SALT_MAX);
  const customRounds = rounds !== undefined;
  const r = customRounds ? Math.min(ROUNDS_MAX, Math.max(ROUNDS_MIN, Math.floor(rounds))) : ROUNDS_DEFAULT;

  const B = sha512(P, S, P);
  const a = createHash('sha512').update(P).update(S);
  a.update(repeatTo(B, P.length));
  for (let n = P.length; n > 0; n >>= 1) a.update(n & 1 ? B : P);
  const A = a.digest();

  const dp = createHash('sha512');
  for (let i = 0; i < P.length; i++) dp.update(P);
  const Pseq = repeatTo(dp.digest(), P.length);

  const ds = createHash('sha512');
  for (let i = 0; i < 16 + A[0]!; i++) ds.update(S);
  const Sseq = repeatTo(ds.digest(), S.length);

  let C = A;
  for (let i = 0; i < r; i++) {
    const c = createHash('sha512');
    c.update(i & 1 ? Pseq : C);
    if (i % 3) c.update(Sseq);
    if (i % 7) c.update(Pseq);
    c.update(i & 1 ? C : Pseq);
    C = c.digest();
  }

  let encoded = '';
  for (const [x, y, z] of PERMUTATION) encoded += b64From24(C[x]!, C[y]!, C[z]!, 4);
  encoded += b64From24(0, 0, C[63]!, 2);
  const saltStr = S.toString('utf8');
  return `$6$${customRounds ? `rounds=${r}$` : ''}${saltStr}$${encoded}`;
}

/** A crypt salt of `length` characters of the crypt alphabet, taken from `bytes` (e.g. a seed's digest). */
export function cryptSaltFrom(bytes: Uint8Array, length = SALT_MAX): string {
  let s = '';
  for (let i = 0; i < length; i++) s += CRYPT_ALPHABET[bytes[i % bytes.length]! & 0x3f];
  return s;
}
