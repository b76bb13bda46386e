#!/usr/bin/env node
// Rewrites test/durations.json (the longest-first order of test/sequencer.ts) from vitest JSON
// reports: `vitest run --reporter=json --outputFile.json=r.json`, then
// `node test/update-durations.mjs r.json [more.json]`. Files a report does not name keep their
// entry; files that no longer exist are dropped.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const table = path.join(root, 'test/durations.json');
const reports = process.argv.slice(2);
if (reports.length === 0) {
  console.error('usage: node test/update-durations.mjs <vitest json report>...');
  process.exit(2);
}
const files = existsSync(table) ? JSON.parse(readFileSync(table, 'utf8')).files : {};
for (const report of reports) {
  for (const r of JSON.parse(readFileSync(report, 'utf8')).testResults) {
    const rel = path.relative(root, r.name);
    const project = rel.startsWith('test/integration/') ? 'integration' : 'unit';
    files[`${project}:${rel}`] = Math.round(r.endTime - r.startTime);
  }
}
for (const key of Object.keys(files)) if (!existsSync(path.join(root, key.slice(key.indexOf(':') + 1)))) delete files[key];
const sorted = Object.fromEntries(Object.entries(files).sort(([a], [b]) => (a < b ? -1 : 1)));
writeFileSync(table, `${JSON.stringify({ note: 'wall ms per test file on the 2-CPU build machine; written by test/update-durations.mjs', files: sorted }, null, 2)}\n`);
console.log(`${Object.keys(sorted).length} files in ${path.relative(root, table)}`);
