// Deploying a 1 GiB OS tree (deployImages: build active.img with mke2fs -d, copy to passive and
// recovery sparse, digest all three, state.yaml) against `dd` writing the same number of bytes
// (what the three images hold on disk) to the same loop device in the same run, with fsync.
// Rounds alternate dd and deploy so machine load affects both alike; the best of each is compared.
// The disk file is written in full up front, as a real disk is: the first write to a region of a
// sparse or fallocated backing file also pays for the host filesystem's block allocation, which dd
// (always the same scratch region) would stop paying after its first round and the deploy (new
// files wherever COS_STATE's allocator puts them) would keep paying. One warm-up round of each is
// not counted.
// Target: deploy throughput >= 0.8x dd. Needs root and `make build` (runs dist/).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, mkdir, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TARGET = 0.8;
const ROUNDS = Number(process.env.HV_BENCH_ROUNDS ?? 4);
const TREE_BYTES = 1024 * 1024 * 1024;
const MiB = 1024 * 1024;

const deployJs = path.join(root, 'dist/installer/deploy/index.js');
const isoJs = path.join(root, 'dist/iso-build/index.js');
if (!existsSync(deployJs) || !existsSync(isoJs)) {
  console.error(`deploy bench: ${deployJs} is missing; run 'make build' first`);
  process.exit(2);
}
if (process.getuid?.() !== 0) {
  console.error('deploy bench: needs root (loop devices, mounts)');
  process.exit(2);
}
const { deployImages } = await import(deployJs);
const { buildTestOsTree } = await import(isoJs);

const sh = (cmd, args) => execFileSync(cmd, args, { encoding: 'utf8' }).trim();
const work = await mkdtemp(path.join(os.tmpdir(), 'hv-deploy-bench-'));
let loop = '';
const mounts = [];
let status = 2;
try {
  const tree = path.join(work, 'tree');
  await buildTestOsTree(tree, { payloadBytes: TREE_BYTES });

  // COS_RECOVERY, COS_STATE and a scratch partition for dd, on one sparse loop disk.
  const img = path.join(work, 'disk.raw');
  sh('dd', ['if=/dev/zero', `of=${img}`, 'bs=8M', `count=${(3400 + 6800 + 3400 + 8) / 8}`, 'conv=fsync', 'status=none']);
  loop = sh('losetup', ['-fP', '--show', img]);
  sh('sgdisk', ['-n1:0:+3400M', '-n2:0:+6800M', '-n3:0:+3400M', loop]);
  spawnSync('partprobe', [loop]);
  for (let i = 0; i < 50 && !existsSync(`${loop}p3`); i++) await new Promise((r) => setTimeout(r, 100));
  const dirs = {};
  for (const [n, label] of [[1, 'COS_RECOVERY'], [2, 'COS_STATE']]) {
    sh('mkfs.ext4', ['-q', '-F', '-L', label, `${loop}p${n}`]);
    dirs[label] = path.join(work, label);
    await mkdir(dirs[label]);
    sh('mount', [`${loop}p${n}`, dirs[label]]);
    mounts.push(dirs[label]);
  }
  const scratch = `${loop}p3`;

  const deployTimes = [];
  const ddTimes = [];
  let bytes = 0;
  for (let round = -1; round < ROUNDS; round++) {
    // A fresh deploy every round: remove what the previous one wrote.
    for (const d of Object.values(dirs)) {
      await rm(path.join(d, 'cOS'), { recursive: true, force: true });
      await rm(path.join(d, 'state.yaml'), { force: true });
    }
    sh('sync', []);
    let t0 = process.hrtime.bigint();
    const result = await deployImages({
      stateDir: dirs.COS_STATE,
      recoveryDir: dirs.COS_RECOVERY,
      source: { kind: 'dir', path: tree },
      workDir: path.join(work, 'deploy-work'),
    });
    sh('sync', []);
    const deploySeconds = Number(process.hrtime.bigint() - t0) / 1e9;
    bytes = 0;
    for (const [d, rec] of [[dirs.COS_STATE, result.active], [dirs.COS_STATE, result.passive], [dirs.COS_RECOVERY, result.recovery]]) {
      bytes += (await stat(path.join(d, rec.file))).blocks * 512;
    }
    const count = Math.ceil(bytes / (4 * MiB));
    t0 = process.hrtime.bigint();
    sh('dd', ['if=/dev/zero', `of=${scratch}`, 'bs=4M', `count=${count}`, 'conv=fsync', 'status=none']);
    const ddSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const name = round < 0 ? 'warm-up' : `round ${round + 1}`;
    console.log(`${name}: deploy ${deploySeconds.toFixed(2)} s, dd ${ddSeconds.toFixed(2)} s for ${(bytes / MiB).toFixed(0)} MiB`);
    if (round < 0) continue;
    deployTimes.push(deploySeconds);
    ddTimes.push(ddSeconds);
  }
  const best = (xs) => Math.min(...xs);
  const deployRate = bytes / best(deployTimes) / MiB;
  const ddRate = bytes / best(ddTimes) / MiB;
  const ratio = deployRate / ddRate;
  console.log(`deploy: ${deployRate.toFixed(0)} MiB/s (best of ${ROUNDS}), dd: ${ddRate.toFixed(0)} MiB/s, ratio ${ratio.toFixed(2)}x dd (target >= ${TARGET}x)`);
  status = ratio >= TARGET ? 0 : 1;
} catch (err) {
  console.error(`deploy bench failed: ${err?.message ?? err}`);
  status = 2;
} finally {
  for (const m of mounts.reverse()) spawnSync('umount', [m]);
  if (loop) spawnSync('losetup', ['-d', loop]);
  await rm(work, { recursive: true, force: true });
}
process.exit(status);
