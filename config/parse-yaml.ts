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

export function parseYamlWithPositions(text: string, source: string): ParsedYaml {
  const lineCounter = new LineCounter();
  const errors: Finding[] = [];
  const warnings: Finding[] = [];
  const positions = emptyPositions();
  const at = (offset: number): Position => {
    const p = lineCounter.linePos(offset);
    return { line: p.line, column: p.col };
  };
  let docs: Document.Parsed[];
  try {
    docs = parseAllDocuments(text, { lineCounter, prettyErrors: true, merge: true, uniqueKeys: true, strict: false }) as Document.Parsed[];
  } catch (err) {
    const msg = (err as Error).message;
    errors.push({ severity: 'error', path: '', source, message: /call stack/i.test(msg) ? DEEP_MESSAGE : `not YAML: ${firstLine(msg)}` });
    return { value: undefined, positions, errors, warnings };
  }
  if (!Array.isArray(docs)) docs = [docs as unknown as Document.Parsed];
  if (docs.length === 0) return { value: null, positions, errors, warnings };
  const doc = docs[0];
  if (docs.length > 1) {
    const pos = docs[1].range ? at(docs[1].range[0]) : undefined;
    warnings.push({
      severity: 'warning',
      path: '',
      source,
      ...pos,
      message: `the file holds ${docs.length} YAML documents; only the first is read`,
      hint: "remove the '---' separators or split the file",
    });
  }
  for (const e of doc.errors) {
    const p = e.linePos?.[0];
    let message = /call stack/i.test(e.message) ? DEEP_MESSAGE : `not valid YAML: ${firstLine(e.message)}`;
    if (e.code === 'DUPLICATE_KEY') {
      const key = /^\s*["']?([^"':\n]*)/.exec(text.slice(e.pos[0], e.pos[0] + 200))?.[1]?.trim();
      message = `not valid YAML: duplicate key${key ? ` ${JSON.stringify(key)}` : ''} (keys must be unique)`;
    }
    errors.push({ severity: 'error', path: '', source, line: p?.line, column: p?.col, message });
  }
  if (errors.length > 0) return { value: undefined, positions, errors, warnings };

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
      for (const pair of n.items) {
        if (!isPair(pair)) continue;
        const keyNode = pair.key as Node | null;
        const keyText = isScalar(keyNode) ? String(keyNode.value) : keyNode ? String((keyNode as { toJSON?: () => unknown }).toJSON?.() ?? '') : '';
        if (keyText === '<<') {
          walk(pair.value, ptr, depth + 1);
          continue;
        }
        const child = `${ptr}/${escapePointer(keyText)}`;
        if (keyNode && (keyNode as Node).range) {
          const kp = at((keyNode as Node).range![0]);
          positions.key.set(child, kp);
          if (pair.value === null || pair.value === undefined) positions.value.set(child, kp);
        }
        walk(pair.value, child, depth + 1);
      }
      return;
    }
    if (isSeq(n)) n.items.forEach((item, i) => walk(item, `${ptr}/${i}`, depth + 1));
  };
  walk(doc.contents, '', 0);
  if (tooDeep) {
    errors.push({ severity: 'error', path: '', source, message: DEEP_MESSAGE });
    return { value: undefined, positions, errors, warnings };
  }

  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (err) {
    const msg = (err as Error).message;
    errors.push({ severity: 'error', path: '', source, message: /call stack/i.test(msg) ? DEEP_MESSAGE : `not valid YAML: ${firstLine(msg)}` });
    return { value: undefined, positions, errors, warnings };
  }
  return { value, positions, errors, warnings };
}

function firstLine(s: string): string {
  return s
    .split('\n')[0]
    .replace(/ at line \d+, column \d+:?$/, '')
    .trim();
}
