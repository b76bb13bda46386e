// `hvinstall validate` cold-process wall time on a 150-line config, against `node -e 0` measured in
// the same run (the floor: starting Node itself). Target: the median within 150 ms of the floor.
// Runs interleave the two commands so machine load affects both alike. Uses the built launcher (dist/).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { existsSync } from 'node:fs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const launcher = path.join(root, 'bin/hvinstall');
const config = path.join(root, 'test/fixtures/config/valid/bench-150-lines.yaml');
const RUNS = Number(process.env.BENCH_RUNS ?? 21);
const TARGET_MS = 150;

if (!existsSync(path.join(root, 'dist/installer/cli.js'))) {
  console.error('validate bench: dist/ is missing; run make build first');
  process.exit(2);
}

function time(cmd, args) {
  const start = process.hrtime.bigint();
  const r = spawnSync(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (r.status !== 0) {
    console.error(`validate bench: ${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
    process.exit(2);
  }
  return ms;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// Warm the page cache for both (the first spawn of anything pays for disk reads).
time(process.execPath, ['-e', '0']);
time(launcher, ['validate', config]);

const floor = [];
const validate = [];
for (let i = 0; i < RUNS; i++) {
  floor.push(time(process.execPath, ['-e', '0']));
  validate.push(time(launcher, ['validate', config]));
}
const f = median(floor);
const v = median(validate);
const over = v - f;
console.log(`config: ${path.relative(root, config)} (150 lines), ${RUNS} interleaved runs each`);
console.log(`node -e 0 (floor)           median ${f.toFixed(1)} ms`);
console.log(`hvinstall validate          median ${v.toFixed(1)} ms`);
console.log(`over the floor              ${over.toFixed(1)} ms (target <= ${TARGET_MS} ms), ratio ${(v / f).toFixed(2)}x`);
if (over > TARGET_MS) {
  console.log('validate bench: MISSED the target');
  process.exit(1);
}
console.log('validate bench: within target');
