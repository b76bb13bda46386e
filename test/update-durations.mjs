#!/usr/bin/env node
// Rewrites test/durations.json (the longest-first order of test/sequencer.ts) from the timing
// files test/file-timing.ts writes: `HV_TEST_TIMING=$PWD/t.tsv vitest run …`, then
// `node test/update-durations.mjs t.tsv [more.tsv]`. Their wall time runs from a file's first hook
// to its last, so a file whose work is in beforeAll (a guest booted once for all its tests) counts
// in full, which the JSON reporter's first-test-to-last-test span does not. Files the timings do
// not name keep their entry; files that no longer exist are dropped.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const table = path.join(root, 'test/durations.json');
const inputs = process.argv.slice(2);
if (inputs.length === 0) {
  console.error('usage: node test/update-durations.mjs <HV_TEST_TIMING file>...');
  process.exit(2);
}
const files = existsSync(table) ? JSON.parse(readFileSync(table, 'utf8')).files : {};
for (const input of inputs) {
  for (const line of readFileSync(input, 'utf8').split('\n').filter(Boolean)) {
    const [rel, wall] = line.split('\t');
    const project = rel.startsWith('test/integration/') ? 'integration' : 'unit';
    files[`${project}:${rel}`] = Math.round(Number(wall) * 1000);
  }
}
for (const key of Object.keys(files)) if (!existsSync(path.join(root, key.slice(key.indexOf(':') + 1)))) delete files[key];
const sorted = Object.fromEntries(Object.entries(files).sort(([a], [b]) => (a < b ? -1 : 1)));
writeFileSync(table, `${JSON.stringify({ note: 'wall ms per test file (first hook to last) on the 2-CPU build machine; written by test/update-durations.mjs', files: sorted }, null, 2)}\n`);
console.log(`${Object.keys(sorted).length} files in ${path.relative(root, table)}`);
