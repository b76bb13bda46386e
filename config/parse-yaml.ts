/**
 * YAML text -> plain value plus the line:column of every key and value, so each finding can point
 * into the file. Positions are keyed by JSON pointer over the user's own keys (before renaming).
 */
import { LineCounter, parseAllDocuments, isAlias, isMap, isScalar, isSeq, isPair, type Document, type Node } from 'yaml';
import type { Finding } from './types.js';

export interface Position {
  line: number;
  column: number;
}

export interface PositionIndex {
  /** Position of the value at a pointer (of the key for a null value). */
  value: Map<string, Position>;
  /** Position of the key that introduced a pointer. */
  key: Map<string, Position>;
  /** Source text of plain numeric scalars (`0644` stays "0644" for string fields). */
  numberText: Map<string, string>;
}

export interface ParsedYaml {
  value: unknown;
  positions: PositionIndex;
  errors: Finding[];
  warnings: Finding[];
}

/** Nesting deeper than this is not a config; refusing it keeps the walkers off the stack limit. */
export const MAX_DEPTH = 64;
const MAX_ALIAS_COUNT = 1000;
const DEEP_MESSAGE = `the YAML is nested more than ${MAX_DEPTH} levels deep; this is not a Harvester config`;

export function escapePointer(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

export function emptyPositions(): PositionIndex {
  return { value: new Map(), key: new Map(), numberText: new Map() };
}

type At = (offset: number) => Position;

export function parseYamlWithPositions(text: string, source: string): ParsedYaml {
  const lineCounter = new LineCounter();
  const positions = emptyPositions();
  const at: At = (offset) => {
    const p = lineCounter.linePos(offset);
    return { line: p.line, column: p.col };
  };
  const fail = (errors: Finding[], warnings: Finding[] = []): ParsedYaml => ({ value: undefined, positions, errors, warnings });
  const parsed = parseDocuments(text, lineCounter, source);
  if ('error' in parsed) return fail([parsed.error]);
  const docs = parsed.docs;
  if (docs.length === 0) return { value: null, positions, errors: [], warnings: [] };
  const doc = docs[0];
  const warnings = extraDocumentsWarning(docs, source, at);
  const errors = documentErrors(doc, text, source);
  if (errors.length > 0) return fail(errors, warnings);
  if (!indexPositions(doc.contents, positions, at)) return fail([{ severity: 'error', path: '', source, message: DEEP_MESSAGE }], warnings);
  const value = plainValue(doc, source);
  if ('error' in value) return fail([value.error], warnings);
  return { value: value.value, positions, errors: [], warnings };
}

/** The documents of the text, or why the text is not YAML at all. */
function parseDocuments(text: string, lineCounter: LineCounter, source: string): { docs: Document.Parsed[] } | { error: Finding } {
  try {
    const docs = parseAllDocuments(text, { lineCounter, prettyErrors: true, merge: true, uniqueKeys: true, strict: false }) as Document.Parsed[];
    return { docs: Array.isArray(docs) ? docs : [docs as unknown as Document.Parsed] };
  } catch (err) {
    const msg = (err as Error).message;
    return { error: { severity: 'error', path: '', source, message: /call stack/i.test(msg) ? DEEP_MESSAGE : `not YAML: ${firstLine(msg)}` } };
  }
}

/** A file of several documents: only the first is read, and the operator is told so. */
function extraDocumentsWarning(docs: Document.Parsed[], source: string, at: At): Finding[] {
  if (docs.length <= 1) return [];
  const pos = docs[1].range ? at(docs[1].range[0]) : undefined;
  return [
    {
      severity: 'warning',
      path: '',
      source,
      ...pos,
      message: `the file holds ${docs.length} YAML documents; only the first is read`,
      hint: "remove the '---' separators or split the file",
    },
  ];
}

/** The first document's syntax errors, a duplicate key named by its text. */
function documentErrors(doc: Document.Parsed, text: string, source: string): Finding[] {
  // The parser can run out of stack at more than one place of the same nesting, how many depends on
  // the stack already in use: one finding, whatever the caller's depth.
  const deep = doc.errors.find((e) => /call stack/i.test(e.message));
  if (deep) return [{ severity: 'error', path: '', source, line: deep.linePos?.[0]?.line, column: deep.linePos?.[0]?.col, message: DEEP_MESSAGE }];
  return doc.errors.map((e) => {
    const p = e.linePos?.[0];
    let message = `not valid YAML: ${firstLine(e.message)}`;
    if (e.code === 'DUPLICATE_KEY') {
      const key = /^\s*["']?([^"':\n]*)/.exec(text.slice(e.pos[0], e.pos[0] + 200))?.[1]?.trim();
      message = `not valid YAML: duplicate key${key ? ` ${JSON.stringify(key)}` : ''} (keys must be unique)`;
    }
    return { severity: 'error', path: '', source, line: p?.line, column: p?.col, message } satisfies Finding;
  });
}

/** Records the position of every key and value under the document's root; false when it is nested past MAX_DEPTH. */
function indexPositions(root: unknown, positions: PositionIndex, at: At): boolean {
  let tooDeep = false;
  const walk = (node: unknown, ptr: string, depth: number): void => {
    if (depth > MAX_DEPTH) {
      tooDeep = true;
      return;
    }
    if (isAlias(node)) {
      // Positions inside an alias are the anchor's; not descending keeps alias bombs linear.
      if (node.range) positions.value.set(ptr, at(node.range[0]));
      return;
    }
    if (!node || typeof node !== 'object') return;
    const n = node as Node;
    if (n.range && !positions.value.has(ptr)) positions.value.set(ptr, at(n.range[0]));
    if (isScalar(n)) {
      if (typeof n.value === 'number' && n.source !== undefined && n.type === 'PLAIN') positions.numberText.set(ptr, String(n.source));
      return;
    }
    if (isMap(n)) {
      for (const pair of n.items) if (isPair(pair)) walkPair(pair.key as Node | null, pair.value, ptr, depth);
      return;
    }
    if (isSeq(n)) n.items.forEach((item, i) => walk(item, `${ptr}/${i}`, depth + 1));
  };
  const walkPair = (keyNode: Node | null, value: unknown, ptr: string, depth: number): void => {
    const keyText = isScalar(keyNode) ? String(keyNode.value) : keyNode ? String((keyNode as { toJSON?: () => unknown }).toJSON?.() ?? '') : '';
    if (keyText === '<<') {
      walk(value, ptr, depth + 1);
      return;
    }
    const child = `${ptr}/${escapePointer(keyText)}`;
    if (keyNode && keyNode.range) {
      const kp = at(keyNode.range[0]);
      positions.key.set(child, kp);
      if (value === null || value === undefined) positions.value.set(child, kp);
    }
    walk(value, child, depth + 1);
  };
  walk(root, '', 0);
  return !tooDeep;
}

/** The document as plain data, aliases expanded up to MAX_ALIAS_COUNT. */
function plainValue(doc: Document.Parsed, source: string): { value: unknown } | { error: Finding } {
  try {
    return { value: doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT }) };
  } catch (err) {
    const msg = (err as Error).message;
    return { error: { severity: 'error', path: '', source, message: /call stack/i.test(msg) ? DEEP_MESSAGE : `not valid YAML: ${firstLine(msg)}` } };
  }
}

function firstLine(s: string): string {
  return s
    .split('\n')[0]
    .replace(/ at line \d+, column \d+:?$/, '')
    .trim();
}
