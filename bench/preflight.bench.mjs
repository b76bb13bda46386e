// `hvinstall preflight --json` on a fixture sysroot, end to end (node start, imports, fact gathering
// from the tree, checks, JSON), against `node -e 0` measured in the same run as the baseline.
// Target: the median run completes in under a second. Needs `make build` (runs dist/).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cli = path.join(root, 'dist/installer/cli.js');
const sysroot = path.join(root, 'test/fixtures/sysroot/prod-nvme');
const RUNS = 9;
const TARGET_MS = 1000;

if (!existsSync(cli)) {
  console.error(`preflight bench: ${cli} is missing; run 'make build' first`);
  process.exit(2);
}

function time(args, expectStatus) {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== expectStatus) {
    console.error(`preflight bench: node ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
    process.exit(2);
  }
  return { ms, stdout: r.stdout };
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

// Interleave baseline and subject so machine load affects both alike.
const base = [];
const subject = [];
let report;
for (let i = 0; i < RUNS; i++) {
  base.push(time(['-e', '0'], 0).ms);
  const r = time([cli, 'preflight', '--json', '--profile', 'production', '--sysroot', sysroot], 0);
  subject.push(r.ms);
  report = r.stdout;
}
const j = JSON.parse(report);
if (j.summary.fail !== 0 || j.disks.length !== 3) {
  console.error('preflight bench: unexpected report for the prod-nvme fixture');
  process.exit(2);
}
const b = median(base);
const s = median(subject);
console.log(`node -e 0 (baseline):            median ${b.toFixed(1)} ms over ${RUNS} runs`);
console.log(`hvinstall preflight --json:      median ${s.toFixed(1)} ms (${(s / b).toFixed(2)}x baseline; ${(s - b).toFixed(1)} ms above node start)`);
console.log(`target: median < ${TARGET_MS} ms -> ${s < TARGET_MS ? 'met' : 'MISSED'}`);
process.exit(s < TARGET_MS ? 0 : 1);
