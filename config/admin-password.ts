/**
 * The rules of install.admin_password (hvinstall, beyond Harvester), shared by the validator and
 * the renderer (installer/render/admin-password.ts, which explains how the hash reaches Rancher).
 * Rancher's fixed hashing parameters: rancher/rancher pkg/auth/providers/local/pbkdf2/pbkdf2.go.
 */
export const RANCHER_PBKDF2_ITERATIONS = 210000;
export const RANCHER_PBKDF2_KEY_BYTES = 32;
export const RANCHER_PBKDF2_SALT_BYTES = 32;
/** Rancher's password-min-length default; its webhook checks it only on clear text, so hvinstall does. */
export const MIN_ADMIN_PASSWORD_LENGTH = 12;
export const ADMIN_PASSWORD_HASH_PREFIX = '$pbkdf2-sha3-512$';

export function isAdminPasswordHash(value: string): boolean {
  return value.startsWith(ADMIN_PASSWORD_HASH_PREFIX);
}

/**
 * Why a value cannot be the admin password, or undefined when it can: a clear text of at least
 * 12 characters that is not the user name, or a well-formed `$pbkdf2-sha3-512$` hash. bcrypt hashes
 * are refused: Rancher's webhook would hash them again as clear text.
 */
export function adminPasswordProblem(value: string): string | undefined {
  if (isAdminPasswordHash(value)) {
    const m = /^\$pbkdf2-sha3-512\$i=(\d+)\$([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2})$/.exec(value);
    if (!m) return 'a $pbkdf2-sha3-512$ hash has the form $pbkdf2-sha3-512$i=210000$<salt base64>$<key base64>';
    if (Number(m[1]) !== RANCHER_PBKDF2_ITERATIONS) return `Rancher checks passwords with ${RANCHER_PBKDF2_ITERATIONS} iterations, not ${m[1]}`;
    if (Buffer.from(m[2]!, 'base64').length < 16) return 'the salt must be at least 16 bytes (Rancher uses 32)';
    if (Buffer.from(m[3]!, 'base64').length !== RANCHER_PBKDF2_KEY_BYTES) return `the key must be ${RANCHER_PBKDF2_KEY_BYTES} bytes`;
    return undefined;
  }
  if (/^\$2[aby]?\$/.test(value)) return "bcrypt hashes cannot be used: Rancher's webhook hashes them again as if they were the password";
  if ([...value].length < MIN_ADMIN_PASSWORD_LENGTH) return `the password must be at least ${MIN_ADMIN_PASSWORD_LENGTH} characters (Rancher's password-min-length)`;
  if (value === 'admin') return 'the password cannot be the same as the user name';
  return undefined;
}

