/**
 * Test harness for the image-preload integration tests: a private containerd (Debian's, own root,
 * state and socket in a temp dir, CRI off), bundles built in the test from hand-made docker
 * archives, and a GuardContext. Everything started here is stopped by PID in cleanup().
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile, open } from 'node:fs/promises';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterEach, beforeEach } from 'vitest';
import { Logger, MemorySink } from '../../../lib/logger.js';
import type { GuardContext } from '../../../agent/guard.js';
import { writeDockerArchive, type FixtureImage } from '../../fixtures/preload/image-archive.mjs';

export class TestContainerd {
  proc?: ChildProcess;
  readonly socket: string;
  readonly config: string;

  constructor(readonly dir: string) {
    this.socket = path.join(dir, 'c.sock');
    this.config = path.join(dir, 'containerd.toml');
  }

  async start(): Promise<void> {
    await writeFile(
      this.config,
      [
        'version = 2',
        `root = "${this.dir}/root"`,
        `state = "${this.dir}/state"`,
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
        `[grpc]\n  address = "${this.socket}"`,
        `[ttrpc]\n  address = "${this.socket}.ttrpc"`,
        '[debug]\n  address = ""',
        '[metrics]\n  address = ""',
      ].join('\n'),
    );
    const log = await open(path.join(this.dir, 'containerd.log'), 'a');
    this.proc = spawn('containerd', ['--config', this.config], { stdio: ['ignore', log.fd, log.fd], detached: true });
    await log.close();
    for (let i = 0; i < 200; i++) {
      const r = await execa('ctr', ['-a', this.socket, 'version'], { reject: false });
      if (r.exitCode === 0) return;
      if (this.proc.exitCode !== null) throw new Error(`test containerd exited: see ${this.dir}/containerd.log`);
      await new Promise((r2) => setTimeout(r2, 100));
    }
    throw new Error('test containerd did not answer within 20 s');
  }

  /** SIGKILL, as a crash would. */
  async kill(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const gone = once(p, 'exit');
    p.kill('SIGKILL');
    await gone;
  }

  async images(): Promise<string[]> {
    const r = await execa('ctr', ['-a', this.socket, '-n', 'k8s.io', 'images', 'ls', '-q']);
    return r.stdout.split('\n').filter((l) => l && !l.startsWith('sha256:')).sort();
  }
}

export interface ArchiveSpec {
  /** File name under bundle/harvester/images/ (…tar.zst or …tar). */
  name: string;
  images: FixtureImage[];
  /** Put the archive's sha256 into metadata.yaml. */
  checksum?: boolean;
  section?: string;
}

export async function sha256File(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const c of createReadStream(file)) h.update(c as Buffer);
  return h.digest('hex');
}

/** Writes a docker archive (zstd-compressed when the name ends .zst) to `file`. */
export async function buildArchive(file: string, images: FixtureImage[]): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const plain = file.endsWith('.zst') ? file.slice(0, -4) : file;
  const out = createWriteStream(plain);
  await writeDockerArchive(out, images);
  out.end();
  await once(out, 'finish');
  if (file.endsWith('.zst')) await execa('zstd', ['-q', '-f', '--rm', '-T2', '-3', plain, '-o', file]);
}

/** A bundle in Harvester's layout: metadata.yaml, harvester/images/*, harvester/images-lists/*.txt. */
export async function buildBundle(dir: string, specs: ArchiveSpec[]): Promise<void> {
  const entries: Record<string, string[]> = {};
  for (const spec of specs) {
    const archive = `harvester/images/${spec.name}`;
    const base = spec.name.replace(/\.tar(\.zst)?$/, '');
    const list = `harvester/images-lists/${base}.txt`;
    await buildArchive(path.join(dir, archive), spec.images);
    await mkdir(path.join(dir, 'harvester/images-lists'), { recursive: true });
    await writeFile(path.join(dir, list), spec.images.map((i) => i.ref).join('\n') + '\n');
    const lines = [`  - list: ${list}`, `    archive: ${archive}`];
    if (spec.checksum) lines.push(`    sha256: ${await sha256File(path.join(dir, archive))}`);
    (entries[spec.section ?? 'common'] ??= []).push(...lines);
  }
  const yaml = ['images:', ...Object.entries(entries).flatMap(([section, lines]) => [`  ${section}:`, ...lines.map((l) => `  ${l}`)])].join('\n');
  await writeFile(path.join(dir, 'metadata.yaml'), yaml + '\n');
}

export interface TestContext {
  ctx: GuardContext;
  sink: MemorySink;
  progress: string[];
  abort: AbortController;
  logLines(): Array<Record<string, unknown>>;
}

export function makeContext(settings: Record<string, unknown>): TestContext {
  const sink = new MemorySink();
  const progress: string[] = [];
  const abort = new AbortController();
  const ctx: GuardContext = {
    root: (p) => p,
    log: new Logger(sink, undefined, 'debug'),
    signal: abort.signal,
    settings,
    progress: (d) => progress.push(d),
    now: Date.now,
  };
  return { ctx, sink, progress, abort, logLines: () => sink.lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

export async function makeTempDir(): Promise<string> {
  return mkdtemp(path.join(tmpdir(), 'hvpl-'));
}

export async function removeTempDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

/**
 * A fresh temp dir and a started private containerd for each test of the file (handed to `use`),
 * killed and removed after it, even when the test failed.
 */
export function containerdPerTest(use: (dir: string, containerd: TestContainerd) => void): void {
  let current: { dir: string; containerd: TestContainerd } | undefined;
  beforeEach(async () => {
    const dir = await makeTempDir();
    current = { dir, containerd: new TestContainerd(dir) };
    use(dir, current.containerd);
    await current.containerd.start();
  });
  afterEach(async () => {
    if (!current) return;
    await current.containerd.kill();
    await removeTempDir(current.dir);
    current = undefined;
  });
}

/** Short settings for tests: fast retries, a short stall timeout. */
export function testSettings(c: TestContainerd, bundleDir: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    containerdSocket: c.socket,
    bundleDir,
    startContainerd: 'never',
    retryDelay: '200ms',
    containerdWait: '20s',
    stallTimeout: '3s',
    finishTimeout: '60s',
    verifyTimeout: '5s',
    ...extra,
  };
}

/** PIDs of processes running `program` (argv[0]) with every one of `parts` among their arguments (read from /proc). */
export async function processesMatching(program: string, ...parts: string[]): Promise<number[]> {
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const cmdline = await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    const args = cmdline.split('\0');
    if (args[0] === program && parts.every((p) => args.includes(p))) pids.push(Number(name));
  }
  return pids;
}
