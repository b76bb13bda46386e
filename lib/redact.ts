/**
 * Secret redaction for logs, events and printed configs. Secrets are found two ways:
 * by key name anywhere in a structure, and by value (registered secret strings are
 * replaced wherever they appear inside any string, e.g. inside a command line or URL).
 */
import { setOwn } from './own-keys.js';

export const REDACTED = '<redacted>';

const SECRET_KEY = /^(token|password|passphrase|passwd|secret|auth|identitytoken|identity_token|basicauth|basic_auth|authorization|private[_-]?key|key_file|keyfile|tls[_-]?key|agent[_-]?token|server[_-]?token|client[_-]?secret|admin_?password)$/i;

/** True when a key's value is a secret by name alone. */
export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key.replace(/-/g, '_'));
}

export class Redactor {
  private readonly secrets = new Set<string>();

  /** Registers secret values; short values (< 4 chars) are ignored to avoid redacting noise. */
  add(...values: Array<string | undefined | null>): this {
    for (const v of values) if (typeof v === 'string' && v.length >= 4) this.secrets.add(v);
    return this;
  }

  /** Registers every string under secret-named keys of a structure (a config, say). */
  addFrom(value: unknown): this {
    walk(value, (key, v) => {
      if (key !== undefined && isSecretKey(key)) collectStrings(v, (s) => this.add(s));
    });
    return this;
  }

  redactString(s: string): string {
    let out = s;
    // Longest first so a secret containing another is replaced whole.
    for (const secret of [...this.secrets].sort((a, b) => b.length - a.length)) {
      if (out.includes(secret)) out = out.split(secret).join(REDACTED);
    }
    // user:password@ in URLs
    return out.replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^/\s:@]+:)[^@\s/]+@/gi, `$1${REDACTED}@`);
  }

  /** Deep copy with secret-named keys replaced and registered secret values scrubbed. */
  redact<T>(value: T): T {
    return redactValue(value, this) as T;
  }
}

function redactValue(value: unknown, r: Redactor, key?: string): unknown {
  if (key !== undefined && isSecretKey(key) && value !== null && value !== undefined && value !== '') {
    return typeof value === 'object' ? redactObject(value, r, true) : REDACTED;
  }
  if (typeof value === 'string') return r.redactString(value);
  if (Array.isArray(value)) return value.map((v) => redactValue(v, r));
  if (value && typeof value === 'object') return redactObject(value, r, false);
  return value;
}

function redactObject(value: object, r: Redactor, allSecret: boolean): unknown {
  if (Array.isArray(value)) return value.map((v) => (allSecret ? REDACTED : redactValue(v, r)));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    setOwn(out, k, allSecret && (typeof v !== 'object' || v === null) ? REDACTED : redactValue(v, r, k));
  }
  return out;
}

function walk(value: unknown, visit: (key: string | undefined, v: unknown) => void, key?: string): void {
  visit(key, value);
  if (Array.isArray(value)) value.forEach((v) => walk(v, visit));
  else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) walk(v, visit, k);
}

function collectStrings(value: unknown, out: (s: string) => void): void {
  if (typeof value === 'string') out(value);
  else if (Array.isArray(value)) value.forEach((v) => collectStrings(v, out));
  else if (value && typeof value === 'object') Object.values(value).forEach((v) => collectStrings(v, out));
}
