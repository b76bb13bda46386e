/**
 * Robustness: thousands of random mutations of valid configs (values, keys, types, raw text, kernel
 * command lines) never crash the validator and always yield a well-formed result. What the result
 * says is checked by semantic-property.test.ts.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { validateRawConfig, validateSources } from '../../../config/validate.js';
import { normaliseYamlText } from '../../../config/load.js';
import { parseCmdline } from '../../../config/cmdline.js';
import { normaliseRaw } from '../../../config/normalise.js';
import type { ValidationResult } from '../../../config/types.js';
import { fuzzRuns, fuzzSeed } from '../../fuzz-seed.js';

const dir = path.resolve(__dirname, '../../fixtures/config/valid');
const texts = readdirSync(dir)
  .filter((f) => f.endsWith('.yaml'))
  .sort()
  .map((f) => readFileSync(path.join(dir, f), 'utf8'));
const objects = texts.map((t) => (parseAllDocuments(t) as Array<{ toJS(): unknown }>)[0].toJS());

function assertStructured(r: ValidationResult): void {
  expect(typeof r.valid).toBe('boolean');
  expect(Array.isArray(r.errors)).toBe(true);
  expect(Array.isArray(r.warnings)).toBe(true);
  expect(r.valid).toBe(r.errors.length === 0);
  for (const f of [...r.errors, ...r.warnings]) {
    expect(typeof f.path).toBe('string');
    expect(typeof f.message).toBe('string');
    expect(f.message.length).toBeGreaterThan(0);
    expect(['error', 'warning']).toContain(f.severity);
    if (f.line !== undefined) expect(Number.isInteger(f.line) && f.line >= 1).toBe(true);
  }
  expect(typeof r.config).toBe('object');
  JSON.stringify(r.config);
}

type Path = Array<string | number>;

function paths(v: unknown, prefix: Path = [], out: Path[] = []): Path[] {
  out.push(prefix);
  if (Array.isArray(v)) v.forEach((x, i) => paths(x, [...prefix, i], out));
  else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) paths(x, [...prefix, k], out);
  return out;
}

function mutate(root: unknown, at: Path, op: { kind: 'set' | 'delete' | 'rename' | 'add'; value: unknown; key: string }): unknown {
  const copy = structuredClone(root) as Record<string | number, unknown>;
  if (at.length === 0) return op.kind === 'set' ? op.value : copy;
  let parent: Record<string | number, unknown> = copy;
  for (const seg of at.slice(0, -1)) parent = parent[seg] as Record<string | number, unknown>;
  const last = at[at.length - 1];
  if (op.kind === 'set') parent[last] = op.value;
  else if (op.kind === 'delete') {
    if (Array.isArray(parent)) parent.splice(Number(last), 1);
    else delete parent[last];
  } else if (op.kind === 'rename' && !Array.isArray(parent)) {
    parent[op.key] = parent[last];
    delete parent[last];
  } else if (op.kind === 'add') {
    const target = parent[last];
    if (target && typeof target === 'object' && !Array.isArray(target)) (target as Record<string, unknown>)[op.key] = op.value;
    else parent[last] = op.value;
  }
  return copy;
}

const interesting = fc.oneof(
  fc.anything({ maxDepth: 3 }),
  fc.constantFrom('', 'true', 'yes', 'on', '1', '0644', '-1', '1e9', '999999999999999999999', '<YOUR_TOKEN>', 'ssh-rsa ...', 'dhcp', 'static', 'none', 'https://x:6443/p', '10.0.0.300', '52:54:00:zz', '/tmp/x', 'a/b/c', '{{ .Nope }}', null),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.string({ unit: 'binary', maxLength: 40 }),
);
const keys = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('__proto__', 'constructor', 'serverUrl', 'server_url', 'networks', 'interface', 'vip', 'hostname', 'wipedisks', 'default_route', 'os', 'install'));

describe('validator never crashes', () => {
  it('on random structural mutations of valid configs', () => {
    fc.assert(
      fc.property(
        fc.nat(objects.length - 1),
        fc.array(fc.tuple(fc.nat(), fc.constantFrom('set', 'delete', 'rename', 'add'), interesting, keys), { minLength: 1, maxLength: 4 }),
        (i, ops) => {
          let v = objects[i];
          for (const [pick, kind, value, key] of ops) {
            const ps = paths(v);
            v = mutate(v, ps[pick % ps.length], { kind: kind as 'set', value, key });
          }
          assertStructured(validateRawConfig(v));
        },
      ),
      { numRuns: fuzzRuns(3000), seed: fuzzSeed('structural mutations of valid configs') },
    );
  });

  it('on random edits of the YAML text', () => {
    fc.assert(
      fc.property(
        fc.nat(texts.length - 1),
        fc.array(fc.tuple(fc.nat(), fc.nat(8), fc.string({ unit: fc.constantFrom(...' :-[]{}"\'#&*!|>\n\t\\,?%@`aZ9.'.split('')), maxLength: 6 })), { minLength: 1, maxLength: 5 }),
        (i, edits) => {
          let t = texts[i];
          for (const [pos, del, ins] of edits) {
            const p = pos % (t.length + 1);
            t = t.slice(0, p) + ins + t.slice(p + del);
          }
          const n = normaliseYamlText(t, 'fuzz.yaml');
          const r = n.source ? validateSources([n.source], {}, { warnings: n.warnings }) : { valid: false, errors: n.errors, warnings: n.warnings, config: {} };
          if (!n.source) expect(n.errors.length).toBeGreaterThan(0);
          assertStructured(r);
        },
      ),
      { numRuns: fuzzRuns(1500), seed: fuzzSeed('random edits of the YAML text') },
    );
  });

  it('on random kernel command lines', () => {
    const word = fc.oneof(
      fc.constantFrom('harvester.install.mode=create', 'harvester.install.management_interface.interfaces=ens3', 'harvester.os.labels.a.b=c', 'harvester.install', 'harvester.=', 'harvester.os.sysctls.x=', '"', 'harvester.install.vip="1.2.3.4 5"'),
      fc.string({ maxLength: 20 }).map((s) => `harvester.${s}`),
      fc.tuple(fc.constantFrom('harvester.install.', 'harvester.os.', 'harvester.'), fc.string({ maxLength: 10 }), fc.string({ maxLength: 10 })).map(([a, b, c]) => `${a}${b}=${c}`),
    );
    fc.assert(
      fc.property(fc.array(word, { maxLength: 12 }), (words) => {
        const p = parseCmdline(words.join(' '));
        const n = normaliseRaw(p.raw, { name: '<cmdline>', cmdline: true, positions: p.positions });
        assertStructured(validateSources([n], {}, { errors: p.errors, warnings: p.warnings }));
      }),
      { numRuns: fuzzRuns(1500), seed: fuzzSeed('random kernel command lines') },
    );
  });
});
