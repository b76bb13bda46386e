/**
 * Raw parsed YAML (or a kernel command line's map) -> the canonical camelCase config, the way
 * Harvester's mapper pipeline reads it (harvester/harvester-installer pkg/config/schemas.go, rename.go, coerce.go): every accepted spelling renamed to the json
 * tag, then values coerced (strings to bool/int, scalar to list, map values to strings). Beyond
 * Harvester, nothing is dropped silently: unknown keys, legacy keys and impossible values become
 * findings that point at the user's own key.
 */
import { fieldTree, type FieldNode } from './generated/harvester-config.fields.js';
import { spellingsOf, closest, toSnakeCase } from './spellings.js';
import { removedKey, IGNORED_WHEN_SET } from './legacy.js';
import { FindingList, joinPath, joinPointer, type Origins } from './findings.js';
import { escapePointer, type PositionIndex } from './parse-yaml.js';
import { parseInterfaceSpec } from './interface-spec.js';
import { setOwn } from '../lib/own-keys.js';
import type { Finding, HarvesterConfig } from './types.js';

export interface SourceInfo {
  /** Shown in findings: a path, URL, `<stdin>`, `<cmdline>`. */
  name: string;
  /** A kernel command line: values are strings, interfaces may use the `hwAddr:MAC` forms, maps may be dotted. */
  cmdline?: boolean;
  positions?: PositionIndex;
}

export interface NormalisedSource {
  config: HarvesterConfig;
  origins: Origins;
  errors: Finding[];
  warnings: Finding[];
  /** The source is not a mapping at all: nothing else is worth checking. */
  fatal?: boolean;
}

const TRUE_WORDS = new Set(['true', 't', 'yes', 'y']);
const FALSE_WORDS = new Set(['false', 'f', 'no', 'n', '']);
/** Values Harvester lowercases before use (harvester/harvester-installer pkg/console/install_panels.go addInstallPanel). */
const LOWERCASED = new Set(['/install/managementInterface/method', '/install/vipMode']);
/** A webhook's method, which Harvester upper-cases (harvester/harvester-installer pkg/console/webhooks.go prepareWebhook). */
const UPPERCASED = /^\/install\/webhooks\/\d+\/method$/;

interface Ctx {
  src: SourceInfo;
  origins: Origins;
  out: FindingList;
}

function describe(v: unknown): string {
  if (v === null || v === undefined) return 'nothing';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 60 ? v.slice(0, 57) + '...' : v)}`;
  return `${typeof v === 'number' ? 'the number' : 'the value'} ${String(v)}`;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Normalises one source. Pure: the positions come with `src`. */
export function normaliseRaw(raw: unknown, src: SourceInfo): NormalisedSource {
  const origins: Origins = new Map();
  const out = new FindingList(origins, src.name);
  const ctx: Ctx = { src, origins, out };
  origins.set('', { source: src.name, path: '' });
  let config: HarvesterConfig = {};
  let fatal = false;
  if (raw === null || raw === undefined) {
    if (!src.cmdline) {
      rawFinding(ctx, 'error', '', '', 'the config is empty', 'start from an example: scheme_version: 1, token: ..., os: {...}, install: {...}');
      fatal = true;
    }
  } else if (!isPlainObject(raw)) {
    rawFinding(ctx, 'error', '', '', `the config must be a mapping of keys at the top level (got ${describe(raw)})`, 'start from an example: scheme_version: 1, token: ..., os: {...}, install: {...}');
    fatal = true;
  } else {
    config = (normStruct(fieldTree, raw, '', '', '', ctx) ?? {}) as HarvesterConfig;
  }
  return { config, origins, errors: out.errors, warnings: out.warnings, fatal };
}

function position(ctx: Ctx, rawPtr: string, atKey: boolean): { line?: number; column?: number } {
  const p = (atKey ? ctx.src.positions?.key.get(rawPtr) : undefined) ?? ctx.src.positions?.value.get(rawPtr);
  return p ? { line: p.line, column: p.column } : {};
}

function rawFinding(ctx: Ctx, severity: 'error' | 'warning', path: string, rawPtr: string, message: string, hint?: string, atKey = false): void {
  ctx.out.push({ severity, path, message, hint, source: ctx.src.name, ...position(ctx, rawPtr, atKey) });
}

function record(ctx: Ctx, canonPtr: string, userPath: string, rawPtr: string): void {
  const key = ctx.src.positions?.key.get(rawPtr);
  ctx.origins.set(canonPtr, {
    source: ctx.src.name,
    path: userPath,
    ...position(ctx, rawPtr, false),
    keyLine: key?.line,
    keyColumn: key?.column,
    ...(ctx.src.cmdline ? { cmdline: true } : {}),
  });
}

/** Every field name of every struct in the tree, with its canonical location, for "belongs under" hints. */
let fieldIndex: Map<string, string[]> | undefined;
function elsewhere(key: string): string[] {
  if (!fieldIndex) {
    fieldIndex = new Map();
    const visit = (node: FieldNode, path: string) => {
      if (node.k === 'struct' && node.f) {
        for (const [name, child] of Object.entries(node.f)) {
          for (const spelling of spellingsOf(node).keys()) {
            if (spellingsOf(node).get(spelling) !== name) continue;
            const list = fieldIndex!.get(spelling) ?? [];
            const full = path ? `${path}.${toSnakeCase(name)}` : toSnakeCase(name);
            if (!list.includes(full)) list.push(full);
            fieldIndex!.set(spelling, list);
          }
          if (path.split('.').length < 3) visit(child, path ? `${path}.${toSnakeCase(name)}` : toSnakeCase(name));
        }
      }
    };
    visit(fieldTree, '');
  }
  return fieldIndex.get(key) ?? [];
}

function structLocation(canonPtr: string): string {
  // '/install/managementInterface' -> 'install.managementInterface'; list indices and map keys dropped.
  return canonPtr
    .split('/')
    .filter((s) => s && !/^\d+$/.test(s))
    .join('.');
}

function normStruct(
  node: FieldNode,
  value: unknown,
  rawPtr: string,
  canonPtr: string,
  userPath: string,
  ctx: Ctx,
): Record<string, unknown> | undefined {
  if (value === null || value === undefined) return undefined;
  if (!isPlainObject(value)) {
    rawFinding(ctx, 'error', userPath, rawPtr, `must be a mapping of keys (got ${describe(value)})`);
    return undefined;
  }
  const spellings = spellingsOf(node);
  const result: Record<string, unknown> = {};
  const firstSpelling = new Map<string, string>();
  const fields = node.f ?? {};
  for (const [key, v] of Object.entries(value)) {
    const childRaw = `${rawPtr}/${escapePointer(key)}`;
    const childUser = joinPath(userPath, key);
    const canonical = spellings.get(key);
    if (!canonical) {
      unknownKey(node, key, v, childRaw, childUser, canonPtr, ctx);
      continue;
    }
    const prior = firstSpelling.get(canonical);
    if (prior !== undefined) {
      rawFinding(ctx, 'error', childUser, childRaw, `duplicate key: ${JSON.stringify(key)} and ${JSON.stringify(prior)} are the same setting`, `keep only one of them`, true);
      continue;
    }
    firstSpelling.set(canonical, key);
    const childCanon = joinPointer(canonPtr, canonical);
    const normalised = normValue(fields[canonical], v, childRaw, childCanon, childUser, ctx);
    if (normalised !== undefined) {
      result[canonical] = normalised;
      const ignored = Object.hasOwn(IGNORED_WHEN_SET, childCanon) ? IGNORED_WHEN_SET[childCanon] : undefined;
      if (ignored && normalised !== false) rawFinding(ctx, ignored.severity, childUser, childRaw, ignored.message, ignored.hint, true);
    }
  }
  return result;
}

function isEmptyValue(v: unknown): boolean {
  return v === null || v === undefined || v === '' || (Array.isArray(v) && v.length === 0) || (isPlainObject(v) && Object.keys(v).length === 0);
}

function unknownKey(node: FieldNode, key: string, value: unknown, rawPtr: string, userPath: string, canonPtr: string, ctx: Ctx): void {
  const legacy = removedKey(structLocation(canonPtr), key);
  if (legacy) {
    // Harvester's own test data carries an empty `install.networks:` (pkg/config/testdata/userdata.yaml).
    const message = isEmptyValue(value) ? `${legacy.message}; it is empty here, and ignored` : legacy.message;
    rawFinding(ctx, legacy.severity, userPath, rawPtr, message, legacy.hint, true);
    return;
  }
  const names = [...new Set([...spellingsOf(node).values()].map(toSnakeCase))];
  const guess = closest(key, [...spellingsOf(node).keys()]);
  let hint: string | undefined;
  if (guess) hint = `did you mean ${JSON.stringify(toSnakeCase(spellingsOf(node).get(guess)!))}?`;
  else {
    const other = elsewhere(key).filter((p) => p.includes('.') || canonPtr !== '');
    if (other.length > 0) hint = `${key} belongs at ${other.map((p) => p).join(' or ')}`;
    else if (names.length <= 12) hint = `known keys here: ${names.join(', ')}`;
  }
  // Harvester's reader drops keys its structs do not have, so the file installs without it: a
  // warning (docs/config.md, the compatibility rule); `validate --strict` makes warnings fail.
  rawFinding(ctx, 'warning', userPath, rawPtr, `unknown key ${JSON.stringify(key)}: Harvester ignores it`, hint, true);
}

/** One value by its field's kind: each kind has its step below. */
function normValue(node: FieldNode | undefined, v: unknown, rawPtr: string, canonPtr: string, userPath: string, ctx: Ctx): unknown {
  if (!node || v === null || v === undefined) return undefined;
  switch (node.k) {
    case 'string':
      return normString(v, rawPtr, canonPtr, userPath, ctx);
    case 'bool':
      return recordedIfSet(toBool(v, rawPtr, userPath, ctx), rawPtr, canonPtr, userPath, ctx);
    case 'int':
      return recordedIfSet(toInt(v, rawPtr, userPath, ctx), rawPtr, canonPtr, userPath, ctx);
    case 'stringList':
      return normStringList(v, rawPtr, canonPtr, userPath, ctx);
    case 'stringMap':
    case 'stringListMap':
      return normStringMap(node.k, v, rawPtr, canonPtr, userPath, ctx);
    case 'struct': {
      const s = normStruct(node, v, rawPtr, canonPtr, userPath, ctx);
      return s === undefined || Object.keys(s).length === 0 ? undefined : recordedIfSet(s, rawPtr, canonPtr, userPath, ctx);
    }
    case 'structList':
      return normStructList(node, v, rawPtr, canonPtr, userPath, ctx);
    case 'structMap':
      return normStructMap(node, v, rawPtr, canonPtr, userPath, ctx);
    case 'multipath':
      return normMultipath(node, v, rawPtr, canonPtr, userPath, ctx);
  }
}

/** A value that was set is recorded at its canonical place (for positions and provenance). */
function recordedIfSet<T>(value: T | undefined, rawPtr: string, canonPtr: string, userPath: string, ctx: Ctx): T | undefined {
  if (value !== undefined) record(ctx, canonPtr, userPath, rawPtr);
  return value;
}

function normString(v: unknown, rawPtr: string, canonPtr: string, userPath: string, ctx: Ctx): string | undefined {
  const s = toStringValue(v, rawPtr, userPath, ctx);
  if (s === undefined || s === '') return undefined;
  record(ctx, canonPtr, userPath, rawPtr);
  return LOWERCASED.has(canonPtr) ? s.toLowerCase() : UPPERCASED.test(canonPtr) ? s.toUpperCase() : s;
}

/** A list of strings; a scalar is a one-element list (Harvester's []string coercion), an empty one then nothing. */
function normStringList(v: unknown, rawPtr: string, canonPtr: string, userPath: string, ctx: Ctx): string[] | undefined {
  const list = Array.isArray(v) ? v : [v];
  const outList: string[] = [];
  list.forEach((item, i) => {
    const itemRaw = Array.isArray(v) ? `${rawPtr}/${i}` : rawPtr;
    const itemUser = Array.isArray(v) ? joinPath(userPath, i) : userPath;
    if (item === null || item === undefined) {
      rawFinding(ctx, 'warning', itemUser, itemRaw, 'empty list entry ignored');
      return;
    }
    const s = toStringValue(item, itemRaw, itemUser, ctx);
    if (s === undefined) return;
    if (!Array.isArray(v) && s === '') return;
    record(ctx, joinPointer(canonPtr, outList.length), itemUser, itemRaw);
    outList.push(s);
  });
  return outList.length === 0 ? undefined : recordedIfSet(outList, rawPtr, canonPtr, userPath, ctx);
}

/** A mapping of keys to strings or to lists of strings; from the command line its keys may be dotted. */
function normStringMap(kind: 'stringMap' | 'stringListMap', v: unknown, rawPtr: string, canonPtr: string, userPath: string, ctx: Ctx): Record<string, unknown> | undefined {
  if (!isPlainObject(v)) {
    rawFinding(ctx, 'error', userPath, rawPtr, `must be a mapping of keys to ${kind === 'stringMap' ? 'strings' : 'lists of strings'} (got ${describe(v)})`);
    return undefined;
  }
  const entries = ctx.src.cmdline ? flattenDotted(v) : Object.entries(v).map(([k, val]) => [k, val, `${rawPtr}/${escapePointer(k)}`] as const);
  const m: Record<string, unknown> = {};
  for (const [k, val, raw] of entries) {
    const entryRaw = ctx.src.cmdline ? rawPtr : raw;
    const entryUser = joinPath(userPath, k);
    if (kind === 'stringMap') {
      const s = val === null || val === undefined ? '' : toStringValue(val, entryRaw, entryUser, ctx);
      if (s === undefined) continue;
      setOwn(m, k, s);
    } else {
      const items = Array.isArray(val) ? val : val === null || val === undefined ? [] : [val];
      const strs: string[] = [];
      for (const item of items) {
        const s = toStringValue(item, entryRaw, entryUser, ctx);
        if (s !== undefined) strs.push(s);
      }
      setOwn(m, k, strs);
    }
    record(ctx, joinPointer(canonPtr, k), entryUser, entryRaw);
  }
  return Object.keys(m).length === 0 ? undefined : recordedIfSet(m, rawPtr, canonPtr, userPath, ctx);
}

const INTERFACES = '/install/managementInterface/interfaces';

/** A list of structs; management interfaces from the command line may also be a bare string (interface-spec.ts). */
function normStructList(node: FieldNode, v: unknown, rawPtr: string, canonPtr: string, userPath: string, ctx: Ctx): unknown[] | undefined {
  const isInterfaces = canonPtr === INTERFACES;
  let list: unknown[];
  if (Array.isArray(v)) list = v;
  else if (isInterfaces && ctx.src.cmdline) list = [v];
  else {
    rawFinding(ctx, 'error', userPath, rawPtr, `must be a list (got ${describe(v)})`, isPlainObject(v) ? `write each entry as a list item: "- ${Object.keys(v)[0] ?? 'key'}: ..."` : undefined);
    return undefined;
  }
  const outList: unknown[] = [];
  list.forEach((item, i) => {
    const itemRaw = Array.isArray(v) ? `${rawPtr}/${i}` : rawPtr;
    const itemUser = Array.isArray(v) ? joinPath(userPath, i) : userPath;
    const itemCanon = joinPointer(canonPtr, outList.length);
    if (isInterfaces && typeof item === 'string') {
      const spec = interfaceSpecItem(item, itemRaw, itemCanon, itemUser, ctx);
      if (spec) outList.push(spec);
      return;
    }
    if (item === null || item === undefined) {
      rawFinding(ctx, 'warning', itemUser, itemRaw, 'empty list entry ignored');
      return;
    }
    const s = normStruct(node.i!, item, itemRaw, itemCanon, itemUser, ctx);
    if (s === undefined) return;
    record(ctx, itemCanon, itemUser, itemRaw);
    outList.push(s);
  });
  return outList.length === 0 ? undefined : recordedIfSet(outList, rawPtr, canonPtr, userPath, ctx);
}

/** A management interface written as a string: only the command line's forms (`hwAddr:<MAC>`, `<nic>`, …). */
function interfaceSpecItem(item: string, itemRaw: string, itemCanon: string, itemUser: string, ctx: Ctx): Record<string, string> | undefined {
  if (!ctx.src.cmdline) {
    rawFinding(ctx, 'error', itemUser, itemRaw, `must be a mapping {name, hwAddr} (got ${describe(item)})`, `in a file write "- name: ${item}" or "- hwAddr: ${item}"; the bare form is only read from the kernel command line`);
    return undefined;
  }
  const parsed = parseInterfaceSpec(item);
  if ('error' in parsed) {
    // Harvester's ReadConfig fails on it and drops the whole command line (no automatic install).
    rawFinding(ctx, 'error', itemUser, itemRaw, parsed.error, 'write hwAddr:<MAC>, <MAC>, name:<nic> or <nic>, comma-separated for both');
    return undefined;
  }
  const spec = parsed.spec;
  record(ctx, itemCanon, itemUser, itemRaw);
  for (const k of Object.keys(spec)) record(ctx, joinPointer(itemCanon, k), itemUser, itemRaw);
  return spec as Record<string, string>;
}

function normStructMap(node: FieldNode, v: unknown, rawPtr: string, canonPtr: string, userPath: string, ctx: Ctx): Record<string, unknown> | undefined {
  if (!isPlainObject(v)) {
    rawFinding(ctx, 'error', userPath, rawPtr, `must be a mapping (got ${describe(v)})`);
    return undefined;
  }
  const m: Record<string, unknown> = {};
  for (const [k, val] of Object.entries(v)) {
    const entryRaw = `${rawPtr}/${escapePointer(k)}`;
    const entryUser = joinPath(userPath, k);
    const entryCanon = joinPointer(canonPtr, k);
    const s = val === null || val === undefined ? {} : normStruct(node.v!, val, entryRaw, entryCanon, entryUser, ctx);
    if (s === undefined) continue;
    record(ctx, entryCanon, entryUser, entryRaw);
    setOwn(m, k, s);
  }
  return Object.keys(m).length === 0 ? undefined : recordedIfSet(m, rawPtr, canonPtr, userPath, ctx);
}

/** multiPathConfig's two shapes (harvester/harvester-installer pkg/config/config.go): a list, or the blacklist mapping. */
function normMultipath(node: FieldNode, v: unknown, rawPtr: string, canonPtr: string, userPath: string, ctx: Ctx): unknown {
  if (Array.isArray(v)) return normValue({ k: 'structList', i: node.i }, v, rawPtr, canonPtr, userPath, ctx);
  if (isPlainObject(v)) return normValue(node.o, v, rawPtr, canonPtr, userPath, ctx);
  rawFinding(ctx, 'error', userPath, rawPtr, `must be a list of {vendor, product} or a mapping with blacklist/blacklist_wwids/blacklist_exceptions/blacklist_exception_wwids (got ${describe(v)})`);
  return undefined;
}

function toStringValue(v: unknown, rawPtr: string, userPath: string, ctx: Ctx): string | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'number') {
    const text = ctx.src.positions?.numberText.get(rawPtr);
    if (text !== undefined && /^0\d+$/.test(text)) {
      rawFinding(ctx, 'warning', userPath, rawPtr, `${text} is an unquoted number; Harvester's YAML reader takes it as octal ${parseInt(text, 8)}`, `quote it: "${text}"`);
      return text;
    }
    return text ?? String(v);
  }
  if (typeof v === 'boolean') return String(v);
  if (typeof v === 'bigint') return v.toString();
  rawFinding(ctx, 'error', userPath, rawPtr, `must be a string (got ${describe(v)})`);
  return undefined;
}

function toBool(v: unknown, rawPtr: string, userPath: string, ctx: Ctx): boolean | undefined {
  if (typeof v === 'boolean') return v;
  if (typeof v === 'string' || typeof v === 'number') {
    const word = String(v).trim().toLowerCase();
    if (TRUE_WORDS.has(word)) return true;
    if (!FALSE_WORDS.has(word)) {
      rawFinding(ctx, 'warning', userPath, rawPtr, `${JSON.stringify(String(v))} is read as false (Harvester takes only true, t, yes or y as true)`, 'write true or false');
    }
    return false;
  }
  rawFinding(ctx, 'error', userPath, rawPtr, `must be true or false (got ${describe(v)})`);
  return undefined;
}

function toInt(v: unknown, rawPtr: string, userPath: string, ctx: Ctx): number | undefined {
  if (typeof v === 'number') {
    if (Number.isSafeInteger(v)) return v;
    rawFinding(ctx, 'error', userPath, rawPtr, `must be a whole number (got ${String(v)})`);
    return undefined;
  }
  if (typeof v === 'string') {
    const t = v.trim();
    if (t === '' || t === 'nil') return undefined;
    if (/^[+-]?\d{1,15}$/.test(t)) return Number(t);
    rawFinding(ctx, 'error', userPath, rawPtr, `must be a whole number (got ${JSON.stringify(v)})`);
    return undefined;
  }
  rawFinding(ctx, 'error', userPath, rawPtr, `must be a whole number (got ${describe(v)})`);
  return undefined;
}

/** A command line splits `os.sysctls.net.ipv4.ip_forward=1` on every dot: join the map key back. */
function flattenDotted(v: Record<string, unknown>, prefix = ''): Array<readonly [string, unknown, string]> {
  const out: Array<readonly [string, unknown, string]> = [];
  for (const [k, val] of Object.entries(v)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (isPlainObject(val)) out.push(...flattenDotted(val, key));
    else out.push([key, val, ''] as const);
  }
  return out;
}
