// The install-time cost of the agent step: deployAgent (staged copy with fsync per file, sha256 of
// every file against the manifest, renames, the enable links) against `cp -a` of the same payload
// plus `sync -f`, onto the same ext4 filesystem on a loop device, alternating (agent, cp, agent, cp, …)
// with caches written back and dropped before each timed run; the figure judged is the geometric
// mean of the per-round ratios (cp seconds / agent seconds). One warm-up round is not counted.
// Also the cold start of the installed launcher (`hvagent --help`, `hvagent status`) against
// `node -e 0`, and against the same CLI run as the ESM tree (`node dist/agent/cli.js`).
// Target: the step at >= 0.5x cp's speed, a regression guard: it does more than cp by design (an
// fsync per file, and it reads every byte back for its sha256 before the release is switched in);
// measured 0.46-0.48x on this machine before the fsyncs and read-backs ran beside the copy, 0.53-0.61x after (2026-12-03).
// Needs root and `make build` (dist/ and build/hvagent-payload).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TARGET = 0.5;
const ROUNDS = Number(process.env.HV_BENCH_ROUNDS ?? 5);
const payload = path.join(root, 'build/hvagent-payload');
const deployJs = path.join(root, 'dist/installer/steps/agent-deploy.js');
if (!existsSync(deployJs) || !existsSync(path.join(payload, 'hvagent-payload.json'))) {
  console.error("agent-step bench: run 'make build' first (dist/ and build/hvagent-payload)");
  process.exit(2);
}
if (process.getuid?.() !== 0) {
  console.error('agent-step bench: needs root (loop device, mounts, chroot)');
  process.exit(2);
}
const { deployAgent } = await import(deployJs);
const { readPayloadManifest } = await import(path.join(root, 'dist/node/payload-layout.js'));
const { DEFAULT_PERSISTENT_STATE_PATHS } = await import(path.join(root, 'dist/installer/disk/plan.js'));
const manifest = await readPayloadManifest(payload);

const sh = (cmd, args) => execFileSync(cmd, args, { encoding: 'utf8' });
const work = await mkdtemp(path.join(os.tmpdir(), 'hv-agent-bench-'));
const img = path.join(work, 'persistent.raw');
const mnt = path.join(work, 'mnt');
let loop;
const secs = (t0) => Number(process.hrtime.bigint() - t0) / 1e9;
const dropCaches = () => {
  sh('sync', []);
  execFileSync('sh', ['-c', 'echo 3 > /proc/sys/vm/drop_caches']);
};
try {
  sh('truncate', ['-s', '2G', img]);
  loop = sh('losetup', ['--find', '--show', img]).trim();
  sh('mkfs.ext4', ['-q', '-F', '-L', 'COS_PERSISTENT', loop]);
  await mkdir(mnt);
  sh('mount', [loop, mnt]);

  const agentRun = async () => {
    const dest = path.join(mnt, 'agent');
    await rm(dest, { recursive: true, force: true });
    await mkdir(dest);
    dropCaches();
    const t0 = process.hrtime.bigint();
    await deployAgent(dest, payload, manifest, DEFAULT_PERSISTENT_STATE_PATHS);
    return secs(t0);
  };
  const cpRun = async () => {
    const dest = path.join(mnt, 'cp');
    await rm(dest, { recursive: true, force: true });
    dropCaches();
    const t0 = process.hrtime.bigint();
    sh('cp', ['-a', payload, dest]);
    sh('sync', ['-f', dest]);
    return secs(t0);
  };
  await agentRun();
  await cpRun();
  const ratios = [];
  const a = [];
  const c = [];
  for (let i = 0; i < ROUNDS; i++) {
    const ta = await agentRun();
    const tc = await cpRun();
    a.push(ta);
    c.push(tc);
    ratios.push(tc / ta);
  }
  const geo = Math.exp(ratios.reduce((s, r) => s + Math.log(r), 0) / ratios.length);
  const mib = manifest.files.reduce((n, f) => n + f.size, 0) / 1048576;
  console.log(`payload: ${manifest.files.length} files, ${mib.toFixed(1)} MiB`);
  console.log(`agent step: best ${Math.min(...a).toFixed(2)} s, cp -a + sync: best ${Math.min(...c).toFixed(2)} s`);
  console.log(`agent step speed vs cp -a: ${geo.toFixed(2)}x (geometric mean of ${ROUNDS} rounds; target >= ${TARGET}x)`);

  // Cold start of the installed launcher in a chroot holding only COS_PERSISTENT, vs node -e 0.
  const chroot = path.join(work, 'chroot');
  await mkdir(path.join(chroot, 'usr/local'), { recursive: true });
  await mkdir(path.join(chroot, 'run/hvagent'), { recursive: true });
  await mkdir(path.join(chroot, 'proc'), { recursive: true });
  sh('mount', ['--bind', path.join(mnt, 'agent'), path.join(chroot, 'usr/local')]);
  sh('mount', ['-t', 'proc', 'proc', path.join(chroot, 'proc')]);
  const doc = { version: 1, pid: 1, startedAt: '2024-01-01T00:00:00Z', updatedAt: '2024-01-01T00:00:00Z', guards: [] };
  await writeFile(path.join(chroot, 'run/hvagent/status.json'), JSON.stringify(doc));
  await writeFile(path.join(work, 'status.json'), JSON.stringify(doc));
  try {
    const env = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' };
    const time = (cmd, args, n = 15) => {
      execFileSync(cmd, args, { env, stdio: 'ignore' });
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < n; i++) execFileSync(cmd, args, { env, stdio: 'ignore' });
      return (secs(t0) / n) * 1000;
    };
    const base = time(process.execPath, ['-e', '0']);
    const help = time('chroot', [chroot, '/usr/local/bin/hvagent', '--help']);
    const status = time('chroot', [chroot, '/usr/local/bin/hvagent', 'status']);
    const esmRoot = path.join(work, 'esm-root');
    await mkdir(path.join(esmRoot, 'run/hvagent'), { recursive: true });
    await writeFile(path.join(esmRoot, 'run/hvagent/status.json'), JSON.stringify(doc));
    const esm = time(process.execPath, [path.join(root, 'dist/agent/cli.js'), 'status', '--root', esmRoot]);
    console.log(`cold start: node -e 0 ${base.toFixed(0)} ms; installed hvagent --help ${help.toFixed(0)} ms (${(help / base).toFixed(2)}x), status ${status.toFixed(0)} ms (${(status / base).toFixed(2)}x); the ESM tree's status ${esm.toFixed(0)} ms (${(esm / base).toFixed(2)}x)`);
  } finally {
    sh('umount', [path.join(chroot, 'proc')]);
    sh('umount', [path.join(chroot, 'usr/local')]);
  }
  process.exitCode = geo >= TARGET ? 0 : 1;
} finally {
  if (loop) {
    execFileSync('umount', [mnt], { stdio: 'ignore' });
    execFileSync('losetup', ['--detach', loop], { stdio: 'ignore' });
  }
  await rm(work, { recursive: true, force: true });
}
