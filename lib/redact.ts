/**
 * Secret redaction for logs, events and printed configs. Secrets are found two ways:
 * by key name anywhere in a structure, and by value (registered secret strings are
 * replaced wherever they appear inside any string, e.g. inside a command line or URL).
 */
import { setOwn } from './own-keys.js';
import { redactUrlsIn } from './url-secrets.js';

export const REDACTED = '<redacted>';

const SECRET_KEY = /^(token|password|passphrase|passwd|secret|auth|identity[_-]?token|basic[_-]?auth|authorization|private[_-]?key|key[_-]?file|tls[_-]?key|agent[_-]?token|server[_-]?token|client[_-]?secret|admin[_-]?password|secret[_-]?access[_-]?key|session[_-]?token|credential)$/i;

/** True when a key's value is a secret by name alone. */
export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key);
}

export class Redactor {
  private readonly secrets = new Set<string>();

  /** Registers secret values; short values (< 4 chars) are ignored to avoid redacting noise. */
  add(...values: Array<string | undefined | null>): this {
    for (const v of values) if (typeof v === 'string' && v.length >= 4) this.secrets.add(v);
    return this;
  }

  /** Registers every string under secret-named keys of a structure. */
  addFrom(value: unknown): this {
    return this.add(...stringsUnderSecretKeys(value));
  }

  redactString(s: string): string {
    let out = s;
    // Longest first so a secret containing another is replaced whole.
    for (const secret of [...this.secrets].sort((a, b) => b.length - a.length)) out = out.split(secret).join(REDACTED);
    // user:password@ in URLs (also where the rest would not parse as a URL)
    out = out.replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^/\s:@]+:)[^@\s/]+@/gi, `$1${REDACTED}@`);
    // hvpxe's node-report tokens (config/hvpxe-protocol.ts REPORT_TOKEN_RE), wherever one appears.
    out = out.replace(/\bhvnr_[A-Za-z0-9_-]{43}/g, REDACTED);
    // Query tokens, signatures and webhook path secrets in any URL, registered or not.
    return redactUrlsIn(out);
  }

  /** Deep copy with secret-named keys replaced and registered secret values scrubbed. */
  redact<T>(value: T): T {
    return redactValue(value, this) as T;
  }
}

/** Bytes (a Buffer, a typed array): logged as their length, never walked index by index. */
function isBinary(value: unknown): value is ArrayBufferView | ArrayBuffer {
  return ArrayBuffer.isView(value) || value instanceof ArrayBuffer;
}

function redactValue(value: unknown, r: Redactor, key?: string): unknown {
  // Walking a Buffer would make one entry per byte (an image chunk exhausts the heap).
  if (isBinary(value)) return `<${value.byteLength} bytes>`;
  // An empty or absent secret stays as it is: "<redacted>" would claim there was one.
  if (key !== undefined && isSecretKey(key) && value !== null && value !== undefined && value !== '') return redactAll(value);
  if (typeof value === 'string') return r.redactString(value);
  if (value && typeof value === 'object') return copyShape(value, (v, k) => redactValue(v, r, k));
  return value;
}

/** Everything under a secret-named key, at any depth: the shape kept, every value replaced. */
function redactAll(value: unknown): unknown {
  return value && typeof value === 'object' && !isBinary(value) ? copyShape(value, (v) => redactAll(v)) : REDACTED;
}

/** A copy of an array or object with each value mapped (object keys passed along; array items get none). */
function copyShape(value: object, map: (v: unknown, key?: string) => unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => map(v));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) setOwn(out, k, map(v, k));
  return out;
}

/** Every string found under a secret-named key of a structure, at any depth. */
export function stringsUnderSecretKeys(value: unknown): string[] {
  const out: string[] = [];
  walk(value, (key, v) => {
    if (key !== undefined && isSecretKey(key)) collectStrings(v, (s) => out.push(s));
  });
  return out;
}

/** Visits every value with the key it sits under (array indices name no secret, so they pass as keys too). */
function walk(value: unknown, visit: (key: string | undefined, v: unknown) => void, key?: string): void {
  visit(key, value);
  if (value && typeof value === 'object' && !isBinary(value)) for (const [k, v] of Object.entries(value)) walk(v, visit, k);
}

/** Every string in a value, at any depth (arrays are objects here: their items are their values). */
function collectStrings(value: unknown, out: (s: string) => void): void {
  if (typeof value === 'string') out(value);
  else if (value && typeof value === 'object' && !isBinary(value)) Object.values(value).forEach((v) => collectStrings(v, out));
}
