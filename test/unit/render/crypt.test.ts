import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { cryptSaltFrom, isCryptHash, sha512Crypt } from '../../../installer/render/crypt.js';
import { fuzzRuns, fuzzSeed } from '../../fuzz-seed.js';

function opensslPasswd6(password: string, salt: string): string {
  return execFileSync('openssl', ['passwd', '-6', '-salt', salt, '-stdin'], { input: password + '\n' }).toString().trim();
}

describe('sha512Crypt', () => {
  it('matches the glibc test vector with custom rounds', () => {
    // From Drepper's reference (glibc crypt/sha512c-test.c).
    expect(sha512Crypt('Hello world!', 'saltstringsaltstring', 10000)).toBe(
      '$6$rounds=10000$saltstringsaltst$OW1/O6BYHV6BcXZu8QVeXbDWra3Oeqh0sbHbbMCVNSnCM/UrjmM0Dp8vOuZeHBy/YTBmSK6H9qs/y3RnOaw5v.',
    );
  });

  it('matches the glibc test vector with the default rounds', () => {
    expect(sha512Crypt('Hello world!', 'saltstring')).toBe(
      '$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1',
    );
  });

  it.each([
    ['hello world', 'saltsaltsaltsalt'],
    ['p@ss w0rd with spaces', 'abc'],
    ['ünïcødé', 'Zz./09'],
    ['x'.repeat(200), 'longpasswordsalt'],
    ['short', 'averyveryverylongsaltthatistruncated'],
  ])('agrees with openssl passwd -6 for %j / %j', (password, salt) => {
    expect(sha512Crypt(password, salt)).toBe(opensslPasswd6(password, salt));
  });

  it('refuses a salt with a dollar sign', () => {
    expect(() => sha512Crypt('x', 'a$b')).toThrow(/cannot contain "\$"/);
  });

  it('recognises crypt hashes and rejects clear text', () => {
    expect(isCryptHash(sha512Crypt('a', 'b'))).toBe(true);
    expect(isCryptHash('$1$abc$0123456789abcdefghijkl')).toBe(true);
    expect(isCryptHash('$6$rounds=10000$saltstringsaltst$OW1/O6BYHV6BcXZu8QVe')).toBe(true);
    expect(isCryptHash('password123')).toBe(false);
    expect(isCryptHash('$6$nohashpart')).toBe(false);
  });

  it('makes salts from the crypt alphabet only', () => {
    expect(cryptSaltFrom(new Uint8Array([0, 1, 63, 64, 255]), 5)).toBe('./z.z');
    expect(cryptSaltFrom(new Uint8Array(32).fill(200))).toMatch(/^[./0-9A-Za-z]{16}$/);
  });
});

describe('sha512Crypt against openssl on generated inputs', () => {
  it('agrees for arbitrary passwords and salts', async () => {
    const fc = (await import('fast-check')).default;
    const saltChar = fc.constantFrom(...'./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'.split(''));
    fc.assert(
      fc.property(
        // openssl reads the password up to the newline and refuses an empty one (prints <NULL>).
        fc.string({ minLength: 1, maxLength: 80, unit: 'binary' }).filter((s) => !s.includes('\n') && !s.includes('\r') && !s.includes('\0')),
        fc.array(saltChar, { minLength: 1, maxLength: 16 }).map((a) => a.join('')),
        (password, salt) => sha512Crypt(password, salt) === opensslPasswd6(password, salt),
      ),
      { numRuns: fuzzRuns(40), seed: fuzzSeed('sha512Crypt agrees with openssl passwd -6') },
    );
  });
});
