/**
 * The shape of the tree (docs/architecture.md): the three programs stand on node/, config/ and lib/
 * and never import each other, the shared layers never import upwards, and nothing imports in a
 * circle. Imports are read with TypeScript's own pre-processor (static, type-only, re-exports and
 * dynamic `import()`), not with anything of the product's.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const repo = path.resolve(import.meta.dirname, '../..');
const PRODUCT = ['lib', 'config', 'node', 'installer', 'agent', 'pxe', 'iso-build'];

/** Which top-level folders each may import (besides itself). */
const MAY_IMPORT: Record<string, string[]> = {
  lib: [],
  config: ['lib'],
  node: ['config', 'lib'],
  installer: ['node', 'config', 'lib'],
  agent: ['node', 'config', 'lib'],
  pxe: ['config', 'lib'],
  'iso-build': ['lib'],
};
/** The one import outside the rule, with its reason in docs/architecture.md. */
const EXCEPTIONS = new Set(['pxe/signed-chain.ts -> iso-build/signed-boot.ts']);

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(path.join(repo, dir), { withFileTypes: true })) {
    const rel = path.posix.join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(rel));
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) out.push(rel);
  }
  return out;
}

function importGraph(): Map<string, string[]> {
  const files = PRODUCT.flatMap(sources);
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const info = ts.preProcessFile(readFileSync(path.join(repo, file), 'utf8'), true, true);
    const targets = info.importedFiles
      .map((f) => f.fileName)
      .filter((spec) => spec.startsWith('.'))
      .map((spec) => path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)).replace(/\.js$/, '.ts'))
      .filter((t) => known.has(t));
    graph.set(file, targets);
  }
  return graph;
}

function cycles(graph: Map<string, string[]>): string[][] {
  // Tarjan's strongly connected components: any component of two or more files is a circle.
  let index = 0;
  const stack: string[] = [];
  const onStack = new Set<string>();
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return found;
}

describe('the shape of the tree', () => {
  const graph = importGraph();

  it('reads a graph of the whole product', () => {
    // A parser that found nothing would pass every rule below.
    expect(graph.size).toBeGreaterThan(250);
    expect(graph.get('installer/render/index.ts')).toContain('node/paths.ts');
    expect(graph.get('agent/node-config.ts')).toContain('config/index.ts');
  });

  it('the programs never import each other and the shared layers never import upwards', () => {
    const wrong: string[] = [];
    for (const [file, targets] of graph) {
      const from = file.split('/')[0]!;
      for (const target of targets) {
        const to = target.split('/')[0]!;
        if (to === from || MAY_IMPORT[from]!.includes(to)) continue;
        const edge = `${file} -> ${target}`;
        if (!EXCEPTIONS.has(edge)) wrong.push(edge);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('the one exception still exists (else it goes from the list)', () => {
    for (const edge of EXCEPTIONS) {
      const [file, target] = edge.split(' -> ');
      expect(graph.get(file!)).toContain(target);
    }
  });

  it('has no import circles', () => {
    expect(cycles(graph)).toEqual([]);
  });

  it('finds a circle when there is one', () => {
    // The detector itself, on a graph with a known circle and a known self-import.
    const g = new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['d']], ['e', ['a']]]);
    expect(cycles(g)).toEqual([['a', 'b', 'c'], ['d']]);
  });
});

/** Functions (declarations, methods, arrows, expressions) of more than `limit` lines, as `file:line name (N lines)`. */
function longFunctions(file: string, text: string, limit: number): string[] {
  const src = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const visit = (n: ts.Node): void => {
    if (ts.isFunctionDeclaration(n) || ts.isMethodDeclaration(n) || ts.isArrowFunction(n) || ts.isFunctionExpression(n) || ts.isConstructorDeclaration(n)) {
      const first = src.getLineAndCharacterOfPosition(n.getStart()).line + 1;
      const lines = src.getLineAndCharacterOfPosition(n.getEnd()).line + 2 - first;
      const name = 'name' in n && n.name ? n.name.getText(src) : '(anonymous)';
      if (lines > limit) out.push(`${file}:${first} ${name} (${lines} lines)`);
    }
    ts.forEachChild(n, visit);
  };
  visit(src);
  return out;
}

describe('functions a reader can hold whole', () => {
  it('no function in product code is over 80 lines (generated code aside): a long one becomes named steps', () => {
    const files = PRODUCT.flatMap(sources).filter((f) => !f.includes('/generated/'));
    expect(files.length).toBeGreaterThan(300);
    expect(files.flatMap((f) => longFunctions(f, readFileSync(path.join(repo, f), 'utf8'), 80))).toEqual([]);
  });

  it('finds a long function, an arrow inside one included, and counts its lines', () => {
    const body = Array.from({ length: 80 }, (_, i) => `  const v${i} = ${i};`).join('\n');
    const text = `export function long() {\n${body}\n}\nexport function short() {\n  const f = () => {\n${body}\n  };\n}\n`;
    expect(longFunctions('x.ts', text, 80)).toEqual(['x.ts:1 long (82 lines)', 'x.ts:83 short (84 lines)', 'x.ts:84 (anonymous) (82 lines)']);
    expect(longFunctions('x.ts', 'function ok() {\n  return 1;\n}\n', 80)).toEqual([]);
  });
});
