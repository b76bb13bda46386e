/**
 * Runs the precompiled schema validator (no schema compilation at run time) over a normalised
 * config and turns ajv's errors into findings, with Harvester's message where the schema names one
 * (`x-message`, e.g. `unknown mode: asdf`) and a "did you mean" for near-miss enum values. A node
 * marked `x-severity: warning` gives warnings (Harvester installs anyway); one marked
 * `x-only-in-mode` is checked only in that install.mode (Harvester checks it only there).
 */
import { validate } from './generated/harvester-config.validator.js';
import { FindingList, joinPointer } from './findings.js';
import { closest, toSnakeCase } from './spellings.js';
import type { ErrorObject } from 'ajv';

interface VerboseError extends ErrorObject {
  propertyName?: string;
}

const TYPE_WORDS: Record<string, string> = {
  string: 'a string',
  boolean: 'true or false',
  integer: 'a whole number',
  number: 'a number',
  array: 'a list',
  object: 'a mapping',
};

function show(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v) : JSON.stringify(v) ?? String(v);
}

function fill(template: string, value: unknown): string {
  return template.replace(/\{value\}/g, typeof value === 'string' ? value : String(value));
}

export function schemaFindings(config: unknown, out: FindingList): void {
  if (validate(config)) return;
  const seen = new Set<string>();
  for (const e of (validate.errors ?? []) as VerboseError[]) {
    // `if` only says which branch failed; the branch's own errors follow. propertyNames is reported through its enum error.
    if (e.keyword === 'if' || e.keyword === 'propertyNames') continue;
    const parent = (e.parentSchema ?? {}) as Record<string, unknown>;
    const xMessage = typeof parent['x-message'] === 'string' ? (parent['x-message'] as string) : undefined;
    const xHint = typeof parent['x-hint'] === 'string' ? (parent['x-hint'] as string) : undefined;
    const onlyInMode = parent['x-only-in-mode'];
    if (typeof onlyInMode === 'string' && (config as { install?: { mode?: string } }).install?.mode !== onlyInMode) continue;
    const severity = parent['x-severity'] === 'warning' ? 'warning' : 'error';
    let ptr = e.instancePath;
    let message: string;
    let hint = xHint;
    switch (e.keyword) {
      case 'enum': {
        const allowed = (e.params as { allowedValues: unknown[] }).allowedValues;
        if (e.propertyName !== undefined) {
          ptr = joinPointer(ptr, e.propertyName);
          message = xMessage ? fill(xMessage, e.propertyName) : `unknown key ${show(e.propertyName)}`;
          const guess = closest(e.propertyName, allowed.map(String));
          hint = guess ? `did you mean ${show(guess)}?` : `allowed: ${allowed.join(', ')}`;
        } else {
          const choices = allowed.filter((a) => a !== '').join(', ');
          const guess = typeof e.data === 'string' ? closest(e.data, allowed.map(String)) : undefined;
          // Harvester's own words where it has them (docs/config.md promises them), the choices in the hint.
          message = xMessage ? fill(xMessage, e.data) : `must be one of ${choices} (got ${show(e.data)})`;
          hint = [guess ? `did you mean ${show(guess)}?` : xMessage ? `use one of ${choices}` : undefined, xHint].filter(Boolean).join('; ') || undefined;
        }
        break;
      }
      case 'const':
      case 'pattern':
      case 'format':
      case 'maxLength':
      case 'minimum':
      case 'maximum':
        message = xMessage ? fill(xMessage, e.data) : genericMessage(e);
        break;
      case 'required': {
        const missing = (e.params as { missingProperty: string }).missingProperty;
        ptr = joinPointer(ptr, missing);
        message = `${toSnakeCase(missing)} is required`;
        break;
      }
      case 'type':
        message = `must be ${TYPE_WORDS[String((e.params as { type: string }).type)] ?? (e.params as { type: string }).type} (got ${show(e.data)})`;
        break;
      case 'additionalProperties':
        // The normaliser drops unknown keys before this point; reaching here means a bug, not user input.
        ptr = joinPointer(ptr, (e.params as { additionalProperty: string }).additionalProperty);
        message = 'unknown key';
        break;
      default:
        message = genericMessage(e);
    }
    const key = `${ptr}\u0000${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.add(severity, ptr, message, hint);
  }
}

function genericMessage(e: ErrorObject): string {
  return `${e.message ?? 'is invalid'} (got ${show(e.data)})`;
}
