/**
 * Findings and where they point. Every normalised value remembers its origin (source, the path in
 * the user's spelling, line:column); a finding about a canonical pointer is placed through it.
 */
import { fieldTree, type FieldNode } from './generated/harvester-config.fields.js';
import { toSnakeCase } from './spellings.js';
import type { Finding } from './types.js';

export interface Origin {
  source: string;
  /** Dotted path in the user's spelling, e.g. `install.management_interface.interfaces[0].hwAddr`. */
  path: string;
  line?: number;
  column?: number;
  /** Where the key was written (findings about a missing child point here). */
  keyLine?: number;
  keyColumn?: number;
  /** Set from a kernel command line (rather than a file, URL or object). */
  cmdline?: boolean;
}

/** Canonical JSON pointer (json-tag names, e.g. `/install/managementInterface/interfaces/0`) -> origin. */
export type Origins = Map<string, Origin>;

export function pointerSegments(ptr: string): string[] {
  if (ptr === '') return [];
  return ptr
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

export function joinPointer(ptr: string, key: string | number): string {
  return `${ptr}/${String(key).replace(/~/g, '~0').replace(/\//g, '~1')}`;
}

/** Appends a key to a dotted display path; map keys that are not plain words are quoted. */
export function joinPath(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  if (!/^[A-Za-z0-9_-]+$/.test(key)) return `${path}[${JSON.stringify(key)}]`;
  return path ? `${path}.${key}` : key;
}

/** Display path for a canonical pointer nobody wrote (a missing field): struct fields in snake_case. */
export function snakePathOf(ptr: string): string {
  let node: FieldNode | undefined = fieldTree;
  let path = '';
  for (const seg of pointerSegments(ptr)) {
    if (node && (node.k === 'structList' || node.k === 'stringList' || node.k === 'multipath') && /^\d+$/.test(seg)) {
      path = joinPath(path, Number(seg));
      node = node.k === 'stringList' ? undefined : node.i;
    } else if (node?.k === 'struct') {
      path = joinPath(path, toSnakeCase(seg));
      node = node.f?.[seg];
    } else if (node?.k === 'multipath') {
      path = joinPath(path, toSnakeCase(seg));
      node = node.o?.f?.[seg];
    } else if (node?.k === 'structMap') {
      path = joinPath(path, seg);
      node = node.v;
    } else {
      path = /^\d+$/.test(seg) ? joinPath(path, Number(seg)) : joinPath(path, seg);
      node = undefined;
    }
  }
  return path;
}

/** Collects findings, placing each through the origins of the value it is about. */
export class FindingList {
  readonly errors: Finding[] = [];
  readonly warnings: Finding[] = [];

  constructor(
    private readonly origins: Origins,
    private readonly defaultSource?: string,
  ) {}

  /** Where a pointer was written: its own origin, else the path rebuilt from its nearest written ancestor. */
  locate(ptr: string): Origin {
    const own = this.origins.get(ptr);
    if (own) return own;
    const segs = pointerSegments(ptr);
    for (let n = segs.length - 1; n >= 0; n--) {
      const ancestorPtr = n === 0 ? '' : '/' + segs.slice(0, n).map((s) => s.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');
      const anc = this.origins.get(ancestorPtr);
      if (anc) {
        // Rebuild the tail in docs spelling under the user's own spelling of the ancestor.
        const fullSnake = snakePathOf(ptr);
        const ancSnake = snakePathOf(ancestorPtr);
        const tail = fullSnake.slice(ancSnake.length).replace(/^\./, '');
        const path = anc.path ? (tail.startsWith('[') ? anc.path + tail : `${anc.path}.${tail}`) : tail;
        // A missing top-level key has no useful position: 1:1 would only look precise.
        if (ancestorPtr === '') return { source: anc.source, path };
        return { source: anc.source, path, line: anc.keyLine ?? anc.line, column: anc.keyLine !== undefined ? anc.keyColumn : anc.column };
      }
    }
    return { source: this.defaultSource ?? '', path: snakePathOf(ptr) };
  }

  /** The origin recorded for exactly this pointer, if any. */
  originOf(ptr: string): Origin | undefined {
    return this.origins.get(ptr);
  }

  add(severity: 'error' | 'warning', ptr: string, message: string, hint?: string, kind?: Finding['kind']): void {
    const o = this.locate(ptr);
    this.push({ severity, path: o.path, message, hint, kind, source: o.source || this.defaultSource, line: o.line, column: o.column });
  }

  error(ptr: string, message: string, hint?: string): void {
    this.add('error', ptr, message, hint);
  }

  warn(ptr: string, message: string, hint?: string, kind?: Finding['kind']): void {
    this.add('warning', ptr, message, hint, kind);
  }

  push(f: Finding): void {
    const clean: Finding = { severity: f.severity, path: f.path, message: f.message };
    if (f.hint) clean.hint = f.hint;
    if (f.kind) clean.kind = f.kind;
    if (f.source) clean.source = f.source;
    if (f.line !== undefined) clean.line = f.line;
    if (f.column !== undefined) clean.column = f.column;
    (f.severity === 'error' ? this.errors : this.warnings).push(clean);
  }

  /** True when an error is already reported at this pointer's path (to avoid saying the same twice). */
  hasErrorAt(ptr: string): boolean {
    const path = this.locate(ptr).path;
    return this.errors.some((e) => e.path === path);
  }
}

/** Sorts findings by source position, then path, so output is stable. */
export function sortFindings(list: Finding[]): Finding[] {
  return [...list].sort(
    (a, b) =>
      (a.source ?? '').localeCompare(b.source ?? '') ||
      (a.line ?? Infinity) - (b.line ?? Infinity) ||
      (a.column ?? 0) - (b.column ?? 0) ||
      a.path.localeCompare(b.path),
  );
}
