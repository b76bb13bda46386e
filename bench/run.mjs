// `make bench`: runs every bench/*.bench.mjs (or the ones named: node bench/run.mjs validate preload)
// one after another, each in its own process so they do not disturb each other. Each bench prints
// its figures as ratios against a baseline it measures in the same run, and exits non-zero when it
// misses its target.
import { readdir } from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const dir = path.dirname(fileURLToPath(import.meta.url));
const only = process.argv.slice(2);
const files = (await readdir(dir))
  .filter((f) => f.endsWith('.bench.mjs'))
  .filter((f) => only.length === 0 || only.includes(f.replace('.bench.mjs', '')))
  .sort();
let failed = 0;
for (const f of files) {
  process.stdout.write(`\n== ${f.replace('.bench.mjs', '')} ==\n`);
  const r = spawnSync(process.execPath, [path.join(dir, f)], { stdio: 'inherit' });
  if (r.status !== 0) {
    failed++;
    process.stdout.write(`-- ${f}: missed its target or failed (exit ${r.status ?? r.signal})\n`);
  }
}
process.stdout.write(`\n${files.length - failed} passed, ${failed} failed\n`);
process.exit(failed ? 1 : 0);
