// hvpxe artifact serving vs nginx (Debian) on the same directory, same run: 50 concurrent curl
// clients each download a 256 MiB artifact. Target: hvpxe throughput >= 1.0x nginx's, with flat
// memory (hvpxe's RSS growth stays far below the bytes served). Needs `make build`, nginx and curl.
// Servers are started here on 127.0.0.1 with private configs and stopped by PID.
//
// The host's two CPUs are shared with other work whose load comes and goes within seconds, so the
// rounds are paired: each pair runs both servers back to back (which goes first alternates), the
// ratio is taken within a pair, and the figure is the median of the pairs' ratios. The CPU each
// side used per GiB (server user/system, the curl clients, and everything else on the host) is
// printed with it: where the time goes, and how much the rest of the host took meanwhile.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, mkdir, open, readdir, readFile, rm, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { children, curlOnce, freePort, stop, track } from './processes.mjs';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLIENTS = Number(process.env.PXE_BENCH_CLIENTS ?? 50);
const SIZE_MIB = Number(process.env.PXE_BENCH_MIB ?? 256);
const ROUNDS = Number(process.env.PXE_BENCH_ROUNDS ?? 5);
const TARGET = 1.0;
// "Flat": RSS may grow by buffers for the clients in flight, never with the bytes served.
const MAX_RSS_GROWTH_MIB = 192;

async function waitFor(url, ms = 60_000) {
  const start = Date.now();
  for (;;) {
    try {
      const r = await fetch(url, { method: 'HEAD' });
      if (r.ok) return;
    } catch {
      // not up yet
    }
    if (Date.now() - start > ms) throw new Error(`${url} did not come up within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const TICK = 100; // USER_HZ: /proc's CPU times are in 1/100 s on Linux

/** CPU seconds (user, system) of a process and its threads, from /proc/PID/stat. */
async function procCpu(pid) {
  const s = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  // fields 14/15 (utime/stime) and 16/17 (waited-for children's) of proc(5), counted from after the name
  return { user: Number(f[11] ?? 0) / TICK, sys: Number(f[12] ?? 0) / TICK, cuser: Number(f[13] ?? 0) / TICK, csys: Number(f[14] ?? 0) / TICK };
}

/** A server's processes: nginx's master and its workers, hvpxe's one process. */
async function serverPids(pid) {
  const kids = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => '');
  return [pid, ...kids.split(' ').filter(Boolean).map(Number)];
}

/** Busy CPU seconds of the whole host (all CPUs), from /proc/stat. */
async function hostBusy() {
  const f = (await readFile('/proc/stat', 'utf8')).split('\n')[0].split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal
  return (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) / TICK;
}

async function cpuSnapshot(serverPid) {
  let user = 0;
  let sys = 0;
  const threads = new Map(); // tid -> CPU seconds: the busiest thread shows whether one thread is the limit
  for (const p of await serverPids(serverPid)) {
    const c = await procCpu(p);
    user += c.user;
    sys += c.sys;
    for (const tid of await readdir(`/proc/${p}/task`).catch(() => [])) {
      const t = await procCpu(`${p}/task/${tid}`);
      threads.set(tid, t.user + t.sys);
    }
  }
  const me = await procCpu(process.pid);
  return { user, sys, threads, clients: me.cuser + me.csys, host: await hostBusy() };
}

/** CLIENTS concurrent downloads; returns aggregate bytes/s and the CPU seconds each side used. */
async function round(url, serverPid) {
  const before = await cpuSnapshot(serverPid);
  const start = process.hrtime.bigint();
  const sizes = await Promise.all(Array.from({ length: CLIENTS }, () => curlOnce(url)));
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  const after = await cpuSnapshot(serverPid);
  const bytes = sizes.reduce((a, b) => a + b, 0);
  if (bytes !== CLIENTS * SIZE_MIB * 1048576) throw new Error(`short downloads from ${url}: ${bytes} bytes`);
  const d = (k) => after[k] - before[k];
  const cpu = { user: d('user'), sys: d('sys'), clients: d('clients') };
  cpu.busiest = Math.max(0, ...[...after.threads].map(([tid, t]) => t - (before.threads.get(tid) ?? 0))) / secs;
  // Everything else the host's CPUs did meanwhile: this bench's own process and the other work on the machine.
  cpu.other = Math.max(0, d('host') - cpu.user - cpu.sys - cpu.clients);
  return { bytes, secs, rate: bytes / secs, cpu };
}

/** CPU seconds per GiB served, one side's rounds together. */
function cpuLine(rs) {
  const gib = rs.reduce((a, r) => a + r.bytes, 0) / 1073741824;
  const sum = (k) => rs.reduce((a, r) => a + r.cpu[k], 0) / gib;
  const busiest = Math.max(...rs.map((r) => r.cpu.busiest));
  return `server ${sum('user').toFixed(2)} user + ${sum('sys').toFixed(2)} sys (busiest thread ${(busiest * 100).toFixed(0)} % of a CPU), curl clients ${sum('clients').toFixed(2)}, rest of host ${sum('other').toFixed(2)}`;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function rssMiB(pid) {
  const s = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(s)?.[1] ?? 0);
  return kb / 1024;
}

const fmt = (r) => `${(r / 1048576).toFixed(0)} MiB/s`;

const dir = await mkdtemp(path.join(tmpdir(), 'hv-pxe-bench-'));
let hv;
let nginx;
let code = 1;
try {
  await chmod(dir, 0o755); // nginx workers run unprivileged
  const root = path.join(dir, 'root');
  await mkdir(root, { mode: 0o755 });
  // The artifact: SIZE_MIB of random data, hashed as it is written.
  const big = path.join(root, 'artifact.img');
  const hash = createHash('sha256');
  const fh = await open(big, 'w', 0o644);
  for (let i = 0; i < SIZE_MIB; i++) {
    const chunk = randomBytes(1048576);
    hash.update(chunk);
    await fh.write(chunk);
  }
  await fh.close();
  const sha = hash.digest('hex');
  const profiles = path.join(dir, 'profiles.yaml');
  await writeFile(
    profiles,
    `artifacts:
  big: { path: artifact.img, sha256: "${sha}" }
profiles:
  bench:
    kernel: big
    initrd: big
    rootfs: big
    config:
      scheme_version: 1
      token: bench-cluster-token-123
      os: { password: bench-password-456, ssh_authorized_keys: [ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBvCYAjlQ0Ep2hWoJ4yTvXlqxh8g7tJ8V0z4b6gBf0Q0 bench] }
      install: { device: /dev/sda, iso_url: http://127.0.0.1/x.iso }
groups:
  - name: bench
    profile: bench
    fleet: { vip: 10.0.0.100 }
    machines: [{ hostname: node-1, mac: "52:54:00:00:00:01" }]
`,
  );

  const hvPort = await freePort();
  hv = track(spawn(process.execPath, [path.join(REPO, 'dist/pxe/cli.js'), 'serve', '--root', root, '--profiles', profiles, '--listen', `127.0.0.1:${hvPort}`, '--admin-listen', '127.0.0.1:0', '--state-dir', path.join(dir, 'state')], { stdio: ['ignore', 'ignore', 'pipe'] }));
  let hvErr = '';
  hv.stderr.on('data', (d) => {
    if (hvErr.length < 65536) hvErr += d;
  });
  hv.on('exit', (c) => {
    if (c) process.stderr.write(`hvpxe exited ${c}: ${hvErr.split('\n').filter((l) => !l.includes('"msg":"request"')).join('\n')}\n`);
  });

  const ngPort = await freePort();
  for (const d of ['tmp', 'logs']) await mkdir(path.join(dir, 'nginx', d), { recursive: true });
  const ngConf = path.join(dir, 'nginx', 'nginx.conf');
  await writeFile(
    ngConf,
    `worker_processes auto;
pid ${dir}/nginx/nginx.pid;
error_log ${dir}/nginx/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  client_body_temp_path ${dir}/nginx/tmp/body;
  proxy_temp_path ${dir}/nginx/tmp/proxy;
  fastcgi_temp_path ${dir}/nginx/tmp/fastcgi;
  uwsgi_temp_path ${dir}/nginx/tmp/uwsgi;
  scgi_temp_path ${dir}/nginx/tmp/scgi;
  types { application/octet-stream img; }
  server {
    listen 127.0.0.1:${ngPort};
    root ${root};
  }
}
`,
  );
  nginx = track(spawn('nginx', ['-c', ngConf, '-p', path.join(dir, 'nginx'), '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'inherit'] }));

  const hvUrl = `http://127.0.0.1:${hvPort}/artifacts/artifact.img`;
  const ngUrl = `http://127.0.0.1:${ngPort}/artifact.img`;
  await waitFor(`http://127.0.0.1:${hvPort}/healthz`);
  await waitFor(ngUrl, 30_000);
  await curlOnce(ngUrl); // warm the page cache, both servers read the same file
  await curlOnce(hvUrl);

  const idleRss = await rssMiB(hv.pid);
  let peakRss = idleRss;
  const sampler = setInterval(() => {
    void rssMiB(hv.pid).then((r) => (peakRss = Math.max(peakRss, r)));
  }, 100);

  const results = { nginx: [], hvpxe: [] };
  for (let i = 0; i < ROUNDS; i++) {
    // Which server goes first alternates, so neither always meets the host right after the other.
    if (i % 2 === 0) {
      results.nginx.push(await round(ngUrl, nginx.pid));
      results.hvpxe.push(await round(hvUrl, hv.pid));
    } else {
      results.hvpxe.push(await round(hvUrl, hv.pid));
      results.nginx.push(await round(ngUrl, nginx.pid));
    }
  }
  clearInterval(sampler);
  const afterRss = await rssMiB(hv.pid);
  const agg = (rs) => rs.reduce((a, r) => a + r.bytes, 0) / rs.reduce((a, r) => a + r.secs, 0);
  const ng = agg(results.nginx);
  const hvRate = agg(results.hvpxe);
  const ratios = results.hvpxe.map((r, i) => r.rate / results.nginx[i].rate);
  const ratio = median(ratios);
  const served = results.hvpxe.reduce((a, r) => a + r.bytes, 0) / 1048576;
  const growth = peakRss - idleRss;

  process.stdout.write(`clients ${CLIENTS} x ${SIZE_MIB} MiB, ${ROUNDS} pairs of rounds (first server alternating)\n`);
  // Which path hvpxe's bodies took (pxe/zero-copy-send.ts): sendfile, or streamed and why.
  process.stdout.write(`hvpxe artifacts: ${/"msg":"serving".*?"artifacts":"((?:[^"\\]|\\.)*)"/.exec(hvErr)?.[1] ?? 'unknown (no serving line)'}\n`);
  for (let i = 0; i < ROUNDS; i++) {
    const [n, h] = [results.nginx[i], results.hvpxe[i]];
    process.stdout.write(`  pair ${i + 1}: nginx ${fmt(n.rate)} (${n.secs.toFixed(1)} s), hvpxe ${fmt(h.rate)} (${h.secs.toFixed(1)} s), ratio ${ratios[i].toFixed(2)}x\n`);
  }
  process.stdout.write(`CPU s per GiB: nginx: ${cpuLine(results.nginx)}\n`);
  process.stdout.write(`               hvpxe: ${cpuLine(results.hvpxe)}\n`);
  process.stdout.write(`aggregate: nginx ${fmt(ng)}, hvpxe ${fmt(hvRate)} (${(hvRate / ng).toFixed(2)}x)\n`);
  process.stdout.write(`median of the pairs' ratios: ${ratio.toFixed(2)}x (target >= ${TARGET}x)\n`);
  process.stdout.write(`hvpxe RSS: idle ${idleRss.toFixed(0)} MiB, peak ${peakRss.toFixed(0)} MiB (+${growth.toFixed(0)} MiB while serving ${served.toFixed(0)} MiB), after ${afterRss.toFixed(0)} MiB (target: growth <= ${MAX_RSS_GROWTH_MIB} MiB)\n`);
  const ok = ratio >= TARGET && growth <= MAX_RSS_GROWTH_MIB;
  process.stdout.write(ok ? 'PASS\n' : 'MISS\n');
  code = ok ? 0 : 1;
} catch (err) {
  process.stderr.write(`pxe bench failed: ${err.message}\n`);
  code = 2;
} finally {
  await stop(hv);
  await stop(nginx, 'SIGQUIT');
  for (const p of children) await stop(p);
  await rm(dir, { recursive: true, force: true });
}
process.exit(code);
