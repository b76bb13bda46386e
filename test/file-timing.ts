/**
 * With HV_TEST_TIMING=<file>, each test file appends one line to that file: its path, wall
 * seconds and CPU seconds (this worker process and the children it waited for, from
 * /proc/self/stat), from its first hook to its last. A file whose CPU is far below its wall time
 * waits (on disks, daemons, guests, sleeps); one near it is bound by the CPUs. Off when unset.
 * Each file runs in a process of its own (the forks pool isolates files), so the counters are its.
 */
import { appendFileSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';

const out = process.env.HV_TEST_TIMING;
const TICKS_PER_SECOND = 100;

function cpuSeconds(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  // Fields after the command name (which may hold spaces): utime stime cutime cstime are 14-17.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields.slice(11, 15).reduce((sum, f) => sum + Number(f), 0) / TICKS_PER_SECOND;
}

if (out) {
  let wall0 = 0;
  let cpu0 = 0;
  beforeAll(() => {
    wall0 = performance.now();
    cpu0 = cpuSeconds();
  });
  afterAll(() => {
    const file = path.relative(process.cwd(), expect.getState().testPath ?? 'unknown');
    appendFileSync(out, `${file}\t${((performance.now() - wall0) / 1000).toFixed(1)}\t${(cpuSeconds() - cpu0).toFixed(1)}\n`);
  });
}
