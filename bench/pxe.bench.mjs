// hvpxe artifact serving vs nginx (Debian) on the same directory, same run: 50 concurrent curl
// clients each download a 256 MiB artifact. Target: hvpxe aggregate throughput >= 1.0x nginx's,
// with flat memory (hvpxe's RSS growth stays far below the bytes served). Needs `make build`,
// nginx and curl. Servers are started here on 127.0.0.1 with private configs and stopped by PID.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, mkdir, open, readFile, rm, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { children, curlOnce, freePort, stop, track } from './processes.mjs';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLIENTS = Number(process.env.PXE_BENCH_CLIENTS ?? 50);
const SIZE_MIB = Number(process.env.PXE_BENCH_MIB ?? 256);
const ROUNDS = Number(process.env.PXE_BENCH_ROUNDS ?? 2);
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

/** CLIENTS concurrent downloads; returns aggregate bytes/s. */
async function round(url) {
  const start = process.hrtime.bigint();
  const sizes = await Promise.all(Array.from({ length: CLIENTS }, () => curlOnce(url)));
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  const bytes = sizes.reduce((a, b) => a + b, 0);
  if (bytes !== CLIENTS * SIZE_MIB * 1048576) throw new Error(`short downloads from ${url}: ${bytes} bytes`);
  return { bytes, secs, rate: bytes / secs };
}

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
    results.nginx.push(await round(ngUrl));
    results.hvpxe.push(await round(hvUrl));
  }
  clearInterval(sampler);
  const afterRss = await rssMiB(hv.pid);
  const agg = (rs) => rs.reduce((a, r) => a + r.bytes, 0) / rs.reduce((a, r) => a + r.secs, 0);
  const ng = agg(results.nginx);
  const hvRate = agg(results.hvpxe);
  const ratio = hvRate / ng;
  const served = results.hvpxe.reduce((a, r) => a + r.bytes, 0) / 1048576;
  const growth = peakRss - idleRss;

  process.stdout.write(`clients ${CLIENTS} x ${SIZE_MIB} MiB, ${ROUNDS} rounds each (alternating)\n`);
  for (let i = 0; i < ROUNDS; i++) {
    process.stdout.write(`  round ${i + 1}: nginx ${fmt(results.nginx[i].rate)} (${results.nginx[i].secs.toFixed(1)} s), hvpxe ${fmt(results.hvpxe[i].rate)} (${results.hvpxe[i].secs.toFixed(1)} s)\n`);
  }
  process.stdout.write(`aggregate: nginx ${fmt(ng)}, hvpxe ${fmt(hvRate)}, ratio ${ratio.toFixed(2)}x (target >= ${TARGET}x)\n`);
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
