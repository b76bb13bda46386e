// hvpxe for a fleet, same run, two ratios (docs/fleet.md):
// 1. boots per second through one server (a boot: the install script, then the credentialed
//    config, each for a machine never seen before), CONCURRENCY at a time, on the file store and on
//    a three-member etcd (Debian's etcd-server on 127.0.0.1; its data on the same disk as the file
//    store's). Target: etcd >= 0.5x the file store (every etcd decision is a compare-and-swap that a
//    quorum commits; half the single server's rate still boots a rack in seconds).
// 2. artifact throughput (CLIENTS concurrent curl downloads of a SIZE_MIB artifact) from a rack
//    server that fetched it once through --artifacts-origin vs the origin serving it as a local
//    file. Target: >= 0.9x (after the first fetch both serve a file from their disk).
// Needs `make build`, etcd and curl. Everything runs on 127.0.0.1, is stopped by PID and removed.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, mkdir, open, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { children, curlOnce, freePort, stop, track } from './processes.mjs';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MACHINES = Number(process.env.FLEET_BENCH_MACHINES ?? 600);
const CONCURRENCY = Number(process.env.FLEET_BENCH_CONCURRENCY ?? 20);
const CLIENTS = Number(process.env.FLEET_BENCH_CLIENTS ?? 20);
const SIZE_MIB = Number(process.env.FLEET_BENCH_MIB ?? 128);
const STORE_TARGET = 0.5;
const ORIGIN_TARGET = 0.9;

async function until(what, check, ms = 60_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what}: not ready within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A three-member etcd on 127.0.0.1, data under `dir`. */
async function startEtcd(dir) {
  const members = [];
  for (let i = 1; i <= 3; i++) members.push({ name: `m${i}`, client: `http://127.0.0.1:${await freePort()}`, peer: `http://127.0.0.1:${await freePort()}` });
  const cluster = members.map((m) => `${m.name}=${m.peer}`).join(',');
  for (const m of members) {
    const args = ['--name', m.name, '--data-dir', path.join(dir, m.name), '--listen-client-urls', m.client, '--advertise-client-urls', m.client, '--listen-peer-urls', m.peer, '--initial-advertise-peer-urls', m.peer, '--initial-cluster', cluster, '--initial-cluster-state', 'new', '--initial-cluster-token', path.basename(dir), '--log-level', 'error', '--logger', 'zap'];
    track(spawn('etcd', args, { stdio: ['ignore', 'ignore', 'ignore'] }));
  }
  for (const m of members) await until(`etcd ${m.name}`, async () => (await fetch(`${m.client}/v3/kv/range`, { method: 'POST', body: '{"key":"AA=="}', signal: AbortSignal.timeout(2_000) })).ok);
  return members.map((m) => m.client).join(',');
}

/** hvpxe serve with `args`; resolves with its URL once it says it is serving. */
function startHvpxe(args) {
  const p = track(spawn(process.execPath, [path.join(REPO, 'dist/pxe/cli.js'), 'serve', '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0', '--log-level', 'warn', ...args], { stdio: ['ignore', 'pipe', 'pipe'] }));
  let out = '';
  let err = '';
  p.stderr.on('data', (d) => (err = (err + d).slice(-8192)));
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`hvpxe did not start within 120 s: ${err}`)), 120_000);
    p.stdout.on('data', (d) => {
      out += d;
      const m = /hvpxe: serving (\S+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve({ proc: p, url: m[1] });
      }
    });
    p.on('exit', (c) => reject(new Error(`hvpxe exited ${c}: ${err}`)));
  });
}

const mac = (i) => `52:54:02:00:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}`;

async function files(root, big) {
  const out = {};
  for (const [name, bytes] of Object.entries({ vmlinuz: randomBytes(64 * 1024), 'initrd.img': randomBytes(128 * 1024), 'rootfs.squashfs': randomBytes(128 * 1024) })) {
    await writeFile(path.join(root, name), bytes);
    out[name] = createHash('sha256').update(bytes).digest('hex');
  }
  const hash = createHash('sha256');
  const fh = await open(path.join(root, big), 'w', 0o644);
  for (let i = 0; i < SIZE_MIB; i++) {
    const chunk = randomBytes(1048576);
    hash.update(chunk);
    await fh.write(chunk);
  }
  await fh.close();
  out[big] = hash.digest('hex');
  return out;
}

function profiles(sha) {
  const machines = Array.from({ length: MACHINES + 1 }, (_, i) => `      - { hostname: n${i}, mac: "${mac(i)}" }`).join('\n');
  return `artifacts:
  kernel: { path: vmlinuz, sha256: "${sha['vmlinuz']}" }
  initrd: { path: initrd.img, sha256: "${sha['initrd.img']}" }
  rootfs: { path: rootfs.squashfs, sha256: "${sha['rootfs.squashfs']}" }
  big: { path: big.img, sha256: "${sha['big.img']}" }
profiles:
  bench:
    kernel: kernel
    initrd: initrd
    rootfs: rootfs
    config:
      scheme_version: 1
      token: bench-cluster-token-123
      os: { password: bench-password-456, ssh_authorized_keys: [ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBvCYAjlQ0Ep2hWoJ4yTvXlqxh8g7tJ8V0z4b6gBf0Q0 bench] }
      install: { device: /dev/sda, iso_url: http://127.0.0.1/x.iso }
groups:
  - name: bench
    profile: bench
    fleet: { vip: 10.0.0.100 }
    machines:
${machines}
`;
}

/** One machine's boot: its install script, then its config through the credential in it. */
async function bootOne(url, i) {
  const script = await (await fetch(`${url}/ipxe/auto?mac=${mac(i)}&platform=efi`)).text();
  const config = /harvester\.install\.config_url=(\S+)/.exec(script)?.[1];
  if (!config) throw new Error(`machine ${i}: no install script from ${url}: ${script.slice(0, 200)}`);
  const r = await fetch(config);
  await r.arrayBuffer();
  if (r.status !== 200) throw new Error(`machine ${i}: config ${r.status} from ${url}`);
}

/** MACHINES boots, CONCURRENCY at a time; boots per second. */
async function boots(url) {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < MACHINES) await bootOne(url, next++);
  }));
  return MACHINES / ((performance.now() - t0) / 1000);
}

/** CLIENTS concurrent downloads, twice; aggregate bytes per second. */
async function throughput(url) {
  let bytes = 0;
  const t0 = performance.now();
  for (let round = 0; round < 2; round++) bytes += (await Promise.all(Array.from({ length: CLIENTS }, () => curlOnce(url)))).reduce((a, b) => a + b, 0);
  if (bytes !== 2 * CLIENTS * SIZE_MIB * 1048576) throw new Error(`short downloads from ${url}: ${bytes} bytes`);
  return bytes / ((performance.now() - t0) / 1000);
}

async function rssMiB(pid) {
  return Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8').catch(() => ''))?.[1] ?? 0) / 1024;
}

const dir = await mkdtemp(path.join(tmpdir(), 'hv-fleet-bench-'));
let code = 1;
try {
  const root = path.join(dir, 'root');
  const rackRoot = path.join(dir, 'rack-root');
  await mkdir(root);
  await mkdir(rackRoot);
  const sha = await files(root, 'big.img');
  // The rack server has the small files locally; big.img comes from the origin.
  for (const f of ['vmlinuz', 'initrd.img', 'rootfs.squashfs']) await writeFile(path.join(rackRoot, f), await readFile(path.join(root, f)));
  const prof = path.join(dir, 'profiles.yaml');
  await writeFile(prof, profiles(sha));

  const onFile = await startHvpxe(['--root', root, '--profiles', prof, '--state-dir', path.join(dir, 'state-file')]);
  await bootOne(onFile.url, MACHINES); // warms the code paths with a machine outside the measured ones
  const fileRate = await boots(onFile.url);

  const endpoints = await startEtcd(path.join(dir, 'etcd'));
  const onEtcd = await startHvpxe(['--root', root, '--profiles', prof, '--state-dir', path.join(dir, 'state-etcd'), '--store', 'etcd', '--etcd-endpoints', endpoints, '--etcd-prefix', '/hvpxe/bench', '--server-name', 'bench']);
  await bootOne(onEtcd.url, MACHINES);
  const etcdRate = await boots(onEtcd.url);
  const storeRatio = etcdRate / fileRate;

  // The origin is the file-store server: big.img is a local file there.
  const rack = await startHvpxe(['--root', rackRoot, '--profiles', prof, '--state-dir', path.join(dir, 'state-rack'), '--artifacts-origin', `${onFile.url}/artifacts`]);
  const t0 = performance.now();
  await curlOnce(`${rack.url}/artifacts/big.img`);
  const firstSecs = (performance.now() - t0) / 1000;
  const localRate = await throughput(`${onFile.url}/artifacts/big.img`);
  const rackRate = await throughput(`${rack.url}/artifacts/big.img`);
  const originRatio = rackRate / localRate;
  const mib = (r) => `${(r / 1048576).toFixed(0)} MiB/s`;

  process.stdout.write(`boots (script + config, ${MACHINES} machines, ${CONCURRENCY} at a time), one server:\n`);
  process.stdout.write(`  file store ${fileRate.toFixed(0)}/s, etcd (3 members) ${etcdRate.toFixed(0)}/s: ratio ${storeRatio.toFixed(2)}x (target >= ${STORE_TARGET}x)\n`);
  process.stdout.write(`  RSS after: file store ${(await rssMiB(onFile.proc.pid)).toFixed(0)} MiB, etcd ${(await rssMiB(onEtcd.proc.pid)).toFixed(0)} MiB\n`);
  process.stdout.write(`artifacts (${CLIENTS} clients x ${SIZE_MIB} MiB, 2 rounds): first fetch through the origin ${firstSecs.toFixed(1)} s;\n`);
  process.stdout.write(`  local file ${mib(localRate)}, origin cache ${mib(rackRate)}: ratio ${originRatio.toFixed(2)}x (target >= ${ORIGIN_TARGET}x)\n`);
  const ok = storeRatio >= STORE_TARGET && originRatio >= ORIGIN_TARGET;
  process.stdout.write(ok ? 'PASS\n' : 'MISS\n');
  code = ok ? 0 : 1;
} catch (err) {
  process.stderr.write(`fleet bench failed: ${err.message}\n`);
  code = 2;
} finally {
  for (const p of [...children]) await stop(p);
  await rm(dir, { recursive: true, force: true });
}
process.exit(code);
