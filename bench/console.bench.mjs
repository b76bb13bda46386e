// `hvinstall console` cold start to its first screen, against `node -e 0` measured in the same run
// (the floor: starting Node itself), both on a pseudo-terminal (node-pty), on this host: the live
// initramfs has no pty harness, so the guest's own figure is the e2e stage's (docs/e2e.md). The
// console reads a fixture machine (--sysroot, as cheap as the real /sys) and shows its first page;
// the time runs from spawn to the page title on the screen. Also the console process's memory
// (VmRSS and VmHWM from /proc) at the first screen and at the confirmation page, after every page's
// checks have run. Target: the first screen within 2.5x the floor, memory under 150 MiB.
import { readFileSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn } from 'node-pty';
import xterm from '@xterm/headless';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cli = path.join(root, 'dist/installer/cli.js');
const RUNS = Number(process.env.BENCH_RUNS ?? 15);
const RATIO_TARGET = 2.5;
const MEMORY_TARGET_MIB = 150;
const tmp = mkdtempSync(path.join(os.tmpdir(), 'hvconsole-bench-'));
const args = ['console', '--dry-run', '--sysroot', path.join(root, 'test/fixtures/sysroot/prod-nvme'), '--write-config', path.join(tmp, 'c.yaml'), '--log', path.join(tmp, 'log'), '--cmdline-file', '/dev/null'];

function once(file, argv, until) {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const p = spawn(file, argv, { cols: 80, rows: 25, name: 'xterm', env: { ...process.env, TERM: 'xterm' } });
    let out = '';
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error(`${file} ${argv.join(' ')}: nothing within 30 s:\n${out}`));
    }, 30_000);
    p.onData((d) => {
      out += d;
      if (until && out.includes(until)) {
        clearTimeout(timer);
        resolve({ ms: Number(process.hrtime.bigint() - start) / 1e6, pty: p });
      }
    });
    p.onExit(() => {
      if (until) return;
      clearTimeout(timer);
      resolve({ ms: Number(process.hrtime.bigint() - start) / 1e6 });
    });
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function memory(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (k) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rssMiB: kib('VmRSS') / 1024, hwmMiB: kib('VmHWM') / 1024 };
}

const stop = (p) => new Promise((r) => { p.onExit(() => r()); p.kill('SIGKILL'); });

// Warm the page cache for both.
await once(process.execPath, ['-e', '0']);
await stop((await once(process.execPath, [cli, ...args], 'Choose installation mode')).pty);

const floor = [];
const consoleMs = [];
for (let i = 0; i < RUNS; i++) {
  floor.push((await once(process.execPath, ['-e', '0'])).ms);
  const r = await once(process.execPath, [cli, ...args], 'Choose installation mode');
  consoleMs.push(r.ms);
  await stop(r.pty);
}

// Memory: one console walked to the confirmation page (every check has run, the validator and
// preflight are loaded), by typing what an operator would.
const r = await once(process.execPath, [cli, ...args], 'Choose installation mode');
const p = r.pty;
const first = memory(p.pid);
// The console sends only what changed: read the screen through a terminal emulator, as the tests do.
const term = new xterm.Terminal({ cols: 80, rows: 25, allowProposedApi: true });
p.onData((d) => term.write(d));
term.write('\x1b[H\x1b[2J');
const shown = () => {
  const b = term.buffer.active;
  return Array.from({ length: term.rows }, (_, i) => b.getLine(i)?.translateToString(true) ?? '').join(' ');
};
const waitFor = async (text) => {
  for (let i = 0; i < 300 && !shown().includes(text); i++) await new Promise((res) => setTimeout(res, 50));
  if (!shown().includes(text)) throw new Error(`console bench: no "${text}" on the screen`);
};
const type = async (keys, next) => {
  for (const k of keys) {
    p.write(k);
    await new Promise((res) => setTimeout(res, 80));
  }
  if (next) await waitFor(next);
};
p.write('\x0c'); // Ctrl-L: a full repaint into the emulator
await waitFor('Choose installation mode');
await type(['\r'], 'Configure the password');
await type(['Passw0rd!', '\r', 'Passw0rd!', '\r'], 'Choose installation target');
await type(['\r', '\r', '\r'], 'Configure network');
await type(['\r', '\r', '\r', '\r'], 'Configure cluster network');
await type(['\r', '\r', '\r'], 'Configure hostname');
await type(['node-1', '\r'], 'Configure DNS servers');
await type(['\r'], 'Configure VIP');
await type(['\x1b[B', '\r', '10.0.0.100', '\r'], 'Configure cluster token');
await type(['a-token', '\r'], 'Configure NTP servers');
await type(['\x15', '\r', '\r'], 'Optional: configure proxy');
await type(['\r'], 'Optional: import SSH keys');
await type(['\r'], 'Optional: remote Harvester config');
await type(['\r'], 'Continue?');
const atSummary = memory(p.pid);
await stop(p);

const f = median(floor);
const c = median(consoleMs);
const ratio = c / f;
console.log(`on this host, a pty each, ${RUNS} interleaved runs`);
console.log(`node -e 0 (floor)                    median ${f.toFixed(1)} ms`);
console.log(`hvinstall console to its first page  median ${c.toFixed(1)} ms, ratio ${ratio.toFixed(2)}x (target <= ${RATIO_TARGET}x)`);
console.log(`console memory at the first page     RSS ${first.rssMiB.toFixed(1)} MiB, peak ${first.hwmMiB.toFixed(1)} MiB`);
console.log(`console memory at the confirmation   RSS ${atSummary.rssMiB.toFixed(1)} MiB, peak ${atSummary.hwmMiB.toFixed(1)} MiB (target < ${MEMORY_TARGET_MIB} MiB)`);
if (ratio > RATIO_TARGET || atSummary.hwmMiB >= MEMORY_TARGET_MIB) {
  console.log('console bench: MISSED the target');
  process.exit(1);
}
console.log('console bench: within target');
process.exit(0);
