/**
 * The fixture corpus: every test/fixtures/config/{valid,invalid}/NAME.yaml (with NAME.cmdline merged
 * over it when present, or NAME.cmdline alone) must produce exactly the findings in
 * NAME.expected.json. Regenerate after a deliberate change with HV_UPDATE_FIXTURES=1 and review the diff.
 */
import { describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../../config/index.js';
import type { Finding } from '../../../config/types.js';

const root = path.resolve(__dirname, '../../fixtures/config');
const update = process.env.HV_UPDATE_FIXTURES === '1';

interface Expected {
  valid: boolean;
  errors: Array<Omit<Finding, 'severity' | 'source'>>;
  warnings: Array<Omit<Finding, 'severity' | 'source'>>;
}

function strip(f: Finding): Omit<Finding, 'severity' | 'source'> {
  const out: Omit<Finding, 'severity' | 'source'> = { path: f.path, message: f.message };
  if (f.line !== undefined) out.line = f.line;
  if (f.column !== undefined) out.column = f.column;
  if (f.hint !== undefined) out.hint = f.hint;
  return out;
}

function cases(dir: string): string[] {
  const names = new Set<string>();
  for (const f of readdirSync(path.join(root, dir))) {
    const m = /^(.*)\.(yaml|cmdline)$/.exec(f);
    if (m) names.add(m[1]);
  }
  return [...names].sort();
}

const all = [...cases('valid').map((n) => ['valid', n] as const), ...cases('invalid').map((n) => ['invalid', n] as const)];

describe('config fixture corpus', () => {
  it('has at least 60 fixtures, valid ones and invalid ones', () => {
    expect(all.length).toBeGreaterThanOrEqual(60);
    expect(all.filter(([d]) => d === 'valid').length).toBeGreaterThanOrEqual(15);
  });

  it.each(all)('%s/%s', async (dir, name) => {
    const base = path.join(root, dir, name);
    const yaml = existsSync(`${base}.yaml`) ? `${base}.yaml` : undefined;
    const cmdline = existsSync(`${base}.cmdline`) ? readFileSync(`${base}.cmdline`, 'utf8') : undefined;
    const r = await loadConfig(yaml, { cmdline });
    const got: Expected = { valid: r.valid, errors: r.errors.map(strip), warnings: r.warnings.map(strip) };
    const expectedFile = `${base}.expected.json`;
    if (update) writeFileSync(expectedFile, JSON.stringify(got, null, 2) + '\n');
    const expected = JSON.parse(readFileSync(expectedFile, 'utf8')) as Expected;
    expect(got).toEqual(expected);
    expect(r.valid).toBe(dir === 'valid');
    if (dir === 'invalid') expect(r.errors.length).toBeGreaterThan(0);
  });
});
