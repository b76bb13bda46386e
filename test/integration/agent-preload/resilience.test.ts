/**
 * image-preload when things go wrong underneath it: containerd killed mid-import (and restarted),
 * an archive whose medium stops delivering bytes (the stall watchdog), and no containerd at all
 * (the guard starts a standalone one on RKE2-style root/state and stops it again).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import imagePreload from '../../../agent/guards/image-preload.js';
import { TestContainerd, buildBundle, makeContext, makeTempDir, processesMatching, removeTempDir, testSettings } from './harness.js';

let dir: string;
let containerd: TestContainerd;
const extraProcs: ChildProcess[] = [];
// Passes still running when a test fails are stopped in afterEach, so no import outlives its test.
const pending: Array<{ abort: AbortController; pass: Promise<unknown> }> = [];

function track<T>(t: { abort: AbortController }, pass: Promise<T>): Promise<T> {
  pending.push({ abort: t.abort, pass });
  return pass;
}

beforeEach(async () => {
  dir = await makeTempDir();
  containerd = new TestContainerd(dir);
});

afterEach(async () => {
  for (const p of pending.splice(0)) {
    p.abort.abort(new Error('test cleanup'));
    await p.pass.catch(() => undefined);
  }
  for (const p of extraProcs.splice(0)) {
    if (p.exitCode === null && p.signalCode === null && p.pid) {
      try {
        process.kill(-p.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
  await containerd.kill();
  await removeTempDir(dir);
});

const MiB = 1 << 20;

async function waitFor(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A running containerd and a bundle of a big (checksummed) and a small archive. */
async function bigAndSmallBundle(): Promise<string> {
  await containerd.start();
  const bundle = path.join(dir, 'bundle');
  await buildBundle(bundle, [
    { name: 'big.tar.zst', images: [{ ref: 'docker.io/hv/big:1', size: 160 * MiB, kind: 'random' }], checksum: true },
    { name: 'small.tar.zst', images: [{ ref: 'docker.io/hv/small:1', size: 2 * MiB }] },
  ]);
  return bundle;
}

/** The pass ended ok with both images, after at least one failed attempt; returns the failures. */
async function recovered(t: ReturnType<typeof makeContext>, pass: Promise<unknown>): Promise<Array<Record<string, unknown>>> {
  const r = await pass;
  // A pass that failed says why (its diagnosis), not only that its status differs.
  expect(r, `the pass ended ${JSON.stringify(r)}`).toMatchObject({ status: 'ok' });
  expect(await containerd.images()).toEqual(['docker.io/hv/big:1', 'docker.io/hv/small:1']);
  const failed = t.logLines().filter((l) => l.msg === 'import attempt failed');
  expect(failed.length).toBeGreaterThanOrEqual(1);
  return failed;
}

describe('image-preload guard: resilience', () => {
  it('recovers when containerd is killed mid-import and comes back (importer api)', async () => {
    const bundle = await bigAndSmallBundle();
    // The big archive becomes a FIFO whose first reader gets 40 MiB and then no more bytes, its
    // writer holding it open, so containerd is killed while that import is surely mid-stream. Once
    // that attempt has failed and its reader is gone, the FIFO is replaced by the archive itself
    // for the retries. (A writer looping over readers can hand one reader the start of the next
    // copy: it reopens the FIFO before the last reader has seen its end.)
    const real = path.join(dir, 'big.tar.zst');
    const fifo = path.join(bundle, 'harvester/images/big.tar.zst');
    await rename(fifo, real);
    await execa('mkfifo', [fifo]);
    const first = spawn('bash', ['-c', 'exec 3>"$1"; head -c 41943040 "$2" >&3; exec sleep 600', 'feeder', fifo, real], { detached: true, stdio: 'ignore' });
    extraProcs.push(first);
    const t = makeContext(testSettings(containerd, bundle, { parallelism: 1, stallTimeout: '60s', attempts: 4, retryDelay: '500ms', importer: 'api' }));
    const pass = track(t, imagePreload.reconcile(t.ctx));
    await waitFor('the big archive to be flowing', () => t.progress.some((p) => /big\.tar\.zst: [1-9]\d* MiB/.test(p)));
    await containerd.kill();
    await waitFor('the first attempt to fail', () => t.logLines().some((l) => l.msg === 'import attempt failed'));
    await waitFor("the first attempt's reader to be gone", async () => (await processesMatching('cat', '--', fifo)).length === 0);
    process.kill(-first.pid!, 'SIGKILL');
    await rm(fifo);
    await rename(real, fifo);
    await containerd.start();
    const failed = await recovered(t, pass);
    // The agent's own client sees its connection go at once.
    expect(failed[0]).toMatchObject({ archive: 'harvester/images/big.tar.zst', kind: 'import-failed', error: expect.stringMatching(/containerd's API at .*c\.sock/) });
    expect(t.logLines().find((l) => l.msg === 'archive imported' && l.archive === 'harvester/images/big.tar.zst')).toMatchObject({ verified: true });
  });

  it('recovers when containerd is killed mid-import and comes back (importer ctr)', async () => {
    const bundle = await bigAndSmallBundle();
    const t = makeContext(testSettings(containerd, bundle, { parallelism: 1, stallTimeout: '8s', attempts: 4, retryDelay: '500ms', importer: 'ctr' }));
    const pass = track(t, imagePreload.reconcile(t.ctx));
    // Kill containerd once the big archive is flowing (ordering puts the larger archive first).
    await waitFor('the big archive to be flowing', () => t.progress.some((p) => /big\.tar\.zst: [1-9]\d* MiB/.test(p)));
    await containerd.kill();
    await new Promise((r) => setTimeout(r, 700));
    await containerd.start();
    const failed = await recovered(t, pass);
    // ctr 1.6 does not notice its containerd going away mid-stream: it hangs (the failure mode
    // behind Harvester's hours-long preload hangs) until the watchdog kills it.
    expect(failed[0]).toMatchObject({ archive: 'harvester/images/big.tar.zst', kind: expect.stringMatching(/import-failed|stalled/) });
    if (failed[0]!.kind === 'stalled') expect(failed[0]!.error).toMatch(/ctr\/containerd stopped accepting data/);
    expect(t.logLines().find((l) => l.msg === 'archive imported' && l.archive === 'harvester/images/big.tar.zst')).toMatchObject({ verified: true });
  });

  it('kills an import whose archive stops delivering bytes (stall watchdog), and imports it on the next pass', async () => {
    await containerd.start();
    const bundle = path.join(dir, 'bundle');
    await buildBundle(bundle, [
      { name: 'media.tar.zst', images: [{ ref: 'docker.io/hv/media:1', size: 8 * MiB, kind: 'random' }], checksum: true },
      { name: 'fine.tar.zst', images: [{ ref: 'docker.io/hv/fine:1', size: MiB }] },
    ]);
    // The archive becomes a FIFO fed by a writer that sends half of it and then hangs (as dead
    // virtual media does), holding the FIFO open.
    const real = path.join(dir, 'media.tar.zst');
    const fifo = path.join(bundle, 'harvester/images/media.tar.zst');
    await rename(fifo, real);
    await execa('mkfifo', [fifo]);
    const half = Math.floor((await stat(real)).size / 2);
    const hung = spawn('bash', ['-c', 'exec 3>"$1"; head -c "$2" "$3" >&3; exec sleep 600', 'writer', fifo, String(half), real], { detached: true, stdio: 'ignore' });
    extraProcs.push(hung);

    const t = makeContext(testSettings(containerd, bundle, { stallTimeout: '2s', attempts: 1 }));
    const r = await imagePreload.reconcile(t.ctx);
    expect(r.status).toBe('retry');
    if (r.status !== 'retry') throw new Error('unreachable');
    expect(r.reason).toMatch(/harvester\/images\/media\.tar\.zst: stalled: no bytes moved for \d+ s at [\d.]+ MiB: reading the archive stopped \(hung or very slow medium\?\) \[after 1 attempt\]/);
    expect(r.reason).toContain('docker.io/hv/media:1 (from harvester/images/media.tar.zst)');
    expect(await containerd.images()).toEqual(['docker.io/hv/fine:1']);
    // The watchdog killed the import's whole process group: no cat/zstd/ctr of it is left.
    expect(await processesMatching('cat', '--', fifo)).toEqual([]);

    // The medium recovers: the next pass (the runner's retry) imports the archive.
    process.kill(-hung.pid!, 'SIGKILL');
    const healthy = spawn('bash', ['-c', 'cat "$1" > "$2"', 'writer', real, fifo], { detached: true, stdio: 'ignore' });
    extraProcs.push(healthy);
    const again = makeContext(testSettings(containerd, bundle, { stallTimeout: '20s' }));
    expect(await imagePreload.reconcile(again.ctx)).toMatchObject({ status: 'ok', detail: '2 archives: 1 imported (8.0 MiB), 1 skipped (images present); 2 listed images present' });
    expect(await containerd.images()).toEqual(['docker.io/hv/fine:1', 'docker.io/hv/media:1']);
  });

  it('stops cleanly when the agent is stopped mid-import: the import process group is killed', async () => {
    await containerd.start();
    const bundle = path.join(dir, 'bundle');
    await buildBundle(bundle, [{ name: 'slow.tar.zst', images: [{ ref: 'docker.io/hv/slow:1', size: 4 * MiB, kind: 'random' }] }]);
    const real = path.join(dir, 'slow.tar.zst');
    const fifo = path.join(bundle, 'harvester/images/slow.tar.zst');
    await rename(fifo, real);
    await execa('mkfifo', [fifo]);
    const writer = spawn('bash', ['-c', 'exec 3>"$1"; head -c 1000000 "$2" >&3; exec sleep 600', 'writer', fifo, real], { detached: true, stdio: 'ignore' });
    extraProcs.push(writer);
    const t = makeContext(testSettings(containerd, bundle, { stallTimeout: '10m' }));
    const pass = track(t, imagePreload.reconcile(t.ctx));
    await waitFor('bytes to flow', () => t.progress.some((p) => /slow\.tar\.zst: \d+ KiB/.test(p)));
    // The import's group (its bash, zstd behind it) is there while the import runs…
    expect((await importGroup(fifo)).length).toBeGreaterThan(0);
    t.abort.abort(new Error('SIGTERM'));
    await expect(pass).rejects.toThrow('SIGTERM');
    await waitFor('the import group to be gone', async () => (await importGroup(fifo)).length === 0, 10_000);
    expect(await containerd.images()).toEqual([]);
  });

  it('leaves no import behind when the agent process itself is SIGKILLed mid-import', async () => {
    await containerd.start();
    const bundle = path.join(dir, 'bundle');
    await buildBundle(bundle, [{ name: 'orphan.tar.zst', images: [{ ref: 'docker.io/hv/orphan:1', size: 4 * MiB, kind: 'random' }] }]);
    const real = path.join(dir, 'orphan.tar.zst');
    const fifo = path.join(bundle, 'harvester/images/orphan.tar.zst');
    await rename(fifo, real);
    await execa('mkfifo', [fifo]);
    const writer = spawn('bash', ['-c', 'exec 3>"$1"; head -c 1000000 "$2" >&3; exec sleep 600', 'writer', fifo, real], { detached: true, stdio: 'ignore' });
    extraProcs.push(writer);
    // The real CLI (built code): `hvagent once --guard image-preload` with everything under --root.
    const { writeFile } = await import('node:fs/promises');
    const settings = path.join(dir, 'hvagent.yaml');
    await writeFile(settings, 'guards:\n  image-preload:\n    bundleDir: /bundle\n    containerdSocket: /c.sock\n    startContainerd: never\n    ctr: ctr\n    stallTimeout: 10m\n');
    const agent = spawn(path.resolve('bin/hvagent'), ['once', '--guard', 'image-preload', '--root', dir, '--settings', settings], { detached: true, stdio: 'ignore' });
    extraProcs.push(agent);
    await waitFor('the import to run', async () => (await importGroup(fifo)).length > 0, 60_000);
    process.kill(agent.pid!, 'SIGKILL');
    // The import group notices its parent is gone and ends itself (it checks every 2 s).
    await waitFor('the orphaned import group to end', async () => (await importGroup(fifo)).length === 0, 30_000);
    expect(await containerd.images()).toEqual([]);
  });

  it('starts a standalone containerd on the configured root and state when none answers, and stops it afterwards', async () => {
    const bundle = path.join(dir, 'bundle');
    await buildBundle(bundle, [{ name: 'boot.tar.zst', images: [{ ref: 'docker.io/hv/boot:1', size: MiB }] }]);
    // The node root: the guard's paths go through ctx.root().
    const nodeRoot = path.join(dir, 'node');
    await mkdir(path.join(nodeRoot, 'run'), { recursive: true });
    const t = makeContext({
      bundleDir: '/bundle',
      containerdSocket: '/run/k3s/containerd/containerd.sock',
      containerdBinary: 'containerd',
      ctr: 'ctr',
      retryDelay: '200ms',
      containerdWait: '30s',
    });
    t.ctx.root = (p) => (p === '/bundle' ? bundle : path.join(nodeRoot, p));
    const r = await imagePreload.reconcile(t.ctx);
    expect(r).toMatchObject({ status: 'ok', detail: expect.stringMatching(/^1 archive: 1 imported \(.*\); 1 listed image present$/) });
    const started = t.logLines().find((l) => l.msg === 'started a standalone containerd for the preload');
    expect(started).toMatchObject({ config: path.join(nodeRoot, 'run/hvagent/preload-containerd.toml') });
    expect(t.logLines().some((l) => l.msg === 'stopped the standalone containerd')).toBe(true);
    // Stopped: nothing answers on the socket any more.
    const sock = path.join(nodeRoot, 'run/k3s/containerd/containerd.sock');
    expect((await execa('ctr', ['-a', sock, '--connect-timeout', '1s', 'version'], { reject: false })).exitCode).not.toBe(0);
    expect(() => process.kill(started!.pid as number, 0)).toThrow();
    // What "RKE2's" containerd finds later on the same root: the image.
    const later = new TestContainerd(dir);
    Object.assign(later, { socket: sock });
    const { writeFile } = await import('node:fs/promises');
    await writeFile(
      path.join(dir, 'later.toml'),
      `version = 2\nroot = "${nodeRoot}/var/lib/rancher/rke2/agent/containerd"\nstate = "${nodeRoot}/run/k3s/containerd"\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n[grpc]\n  address = "${sock}"\n[ttrpc]\n  address = "${sock}.ttrpc"\n`,
    );
    const proc = spawn('containerd', ['--config', path.join(dir, 'later.toml')], { detached: true, stdio: 'ignore' });
    extraProcs.push(proc);
    await waitFor('the later containerd', async () => (await execa('ctr', ['-a', sock, 'version'], { reject: false })).exitCode === 0, 30_000);
    expect(await later.images()).toEqual(['docker.io/hv/boot:1']);
  });

  it('adopts and stops a standalone containerd left running by a pass whose agent died', async () => {
    const bundle = path.join(dir, 'bundle');
    await buildBundle(bundle, [{ name: 'left.tar.zst', images: [{ ref: 'docker.io/hv/left:1', size: MiB }] }]);
    const nodeRoot = path.join(dir, 'node');
    await mkdir(path.join(nodeRoot, 'run'), { recursive: true });
    const { startStandaloneContainerd } = await import('../../../agent/preload/standalone-containerd.js');
    // What an earlier pass leaves behind when the agent is SIGKILLed between start and stop.
    const leftover = await startStandaloneContainerd({
      binary: 'containerd',
      root: path.join(nodeRoot, 'var/lib/rancher/rke2/agent/containerd'),
      state: path.join(nodeRoot, 'run/k3s/containerd'),
      socket: path.join(nodeRoot, 'run/k3s/containerd/containerd.sock'),
      workDir: path.join(nodeRoot, 'run/hvagent'),
      readyTimeoutMs: 30_000,
      ctr: 'ctr',
    });
    try {
      const t = makeContext({ bundleDir: '/bundle', containerdBinary: 'containerd', ctr: 'ctr', retryDelay: '200ms' });
      t.ctx.root = (p) => (p === '/bundle' ? bundle : path.join(nodeRoot, p));
      expect(await imagePreload.reconcile(t.ctx)).toMatchObject({ status: 'ok' });
      expect(t.logLines().find((l) => /^adopted a standalone containerd/.test(String(l.msg)))).toMatchObject({ pid: leftover.pid });
      expect(t.logLines().some((l) => l.msg === 'started a standalone containerd for the preload')).toBe(false);
      await waitFor('the leftover containerd to be stopped', () => {
        try {
          process.kill(leftover.pid, 0);
          return false;
        } catch {
          return true;
        }
      }, 30_000);
      await expect(stat(path.join(nodeRoot, 'run/hvagent/preload-containerd.pid'))).rejects.toThrow();
    } finally {
      await leftover.stop();
    }
  });

  it('detects a stall when the import reads the archive itself (no checksum: the agent follows /proc/<pid>/io)', async () => {
    await containerd.start();
    const bundle = path.join(dir, 'bundle');
    await buildBundle(bundle, [{ name: 'direct.tar.zst', images: [{ ref: 'docker.io/hv/direct:1', size: 8 * MiB, kind: 'random' }] }]);
    const real = path.join(dir, 'direct.tar.zst');
    const fifo = path.join(bundle, 'harvester/images/direct.tar.zst');
    await rename(fifo, real);
    await execa('mkfifo', [fifo]);
    const half = Math.floor((await stat(real)).size / 2);
    const hung = spawn('bash', ['-c', 'exec 3>"$1"; head -c "$2" "$3" >&3; exec sleep 600', 'writer', fifo, String(half), real], { detached: true, stdio: 'ignore' });
    extraProcs.push(hung);
    const t = makeContext(testSettings(containerd, bundle, { stallTimeout: '2s', attempts: 1 }));
    const r = await track(t, imagePreload.reconcile(t.ctx));
    expect(r.status).toBe('retry');
    expect(r.status === 'retry' && r.reason).toMatch(/direct\.tar\.zst: stalled: no bytes moved for \d+ s at [\d.]+ MiB: the import stopped reading the archive .* \[after 1 attempt\]/);
    expect(await importGroup(fifo)).toEqual([]);
    expect(await containerd.images()).toEqual([]);
  });
});

/** The import group of an archive: the bash that runs its reader, decompressor and importer. */
function importGroup(archivePath: string): Promise<number[]> {
  return processesMatching('bash', 'hvagent-preload', archivePath);
}
