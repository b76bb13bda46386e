/**
 * A standalone containerd for the preload, as Harvester's installer does in ISO mode (harvester/harvester-installer#458): the
 * rke2 guard waits for this guard, so RKE2's own containerd is not running yet on a first boot. We
 * start containerd on RKE2's root, state and socket, import, and stop it; RKE2's containerd later
 * opens the same content store and metadata and finds the images. The CRI plugin is disabled: the
 * import needs only the content and image services.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { open, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import { sleep, waitUntil } from '../../lib/wait.js';
import { containerdProblem, type CtrTarget } from './containerd.js';

export interface StandaloneContainerdOptions {
  binary: string;
  root: string;
  state: string;
  socket: string;
  /** Where the generated config and the log go. */
  workDir: string;
  readyTimeoutMs: number;
  ctr: string;
  signal?: AbortSignal;
}

export interface StandaloneContainerd {
  pid: number;
  config: string;
  log: string;
  stop(): Promise<void>;
}

const toml = (s: string): string => JSON.stringify(s);

/** The private config: only root, state and the sockets; CRI off. */
export function renderStandaloneConfig(o: Pick<StandaloneContainerdOptions, 'root' | 'state' | 'socket'>): string {
  return [
    'version = 2',
    `root = ${toml(o.root)}`,
    `state = ${toml(o.state)}`,
    'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
    '[grpc]',
    `  address = ${toml(o.socket)}`,
    '[ttrpc]',
    `  address = ${toml(`${o.socket}.ttrpc`)}`,
    '[debug]',
    '  address = ""',
    '[metrics]',
    '  address = ""',
    '',
  ].join('\n');
}

/** Gone, or a zombie nobody has reaped yet (an adopted orphan's parent is init). */
function exited(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

const files = (workDir: string): { config: string; log: string; pidFile: string } => ({
  config: path.join(workDir, 'preload-containerd.toml'),
  log: path.join(workDir, 'preload-containerd.log'),
  pidFile: path.join(workDir, 'preload-containerd.pid'),
});

function stopper(pid: number, pidFile: string, exitedYet: () => boolean): () => Promise<void> {
  return async () => {
    if (!exited(pid) && !exitedYet()) {
      process.kill(pid, 'SIGTERM');
      for (let i = 0; i < 100 && !exited(pid) && !exitedYet(); i++) await sleep(100);
      if (!exited(pid) && !exitedYet()) process.kill(pid, 'SIGKILL');
    }
    await rm(pidFile, { force: true });
  };
}

/**
 * A standalone containerd left running by an earlier pass whose agent died (its PID file names a
 * live containerd started with our config): adopted, so this pass stops it before RKE2 needs the
 * socket. A stale PID file is removed.
 */
export async function adoptLeftoverContainerd(workDir: string): Promise<StandaloneContainerd | undefined> {
  const { config, log, pidFile } = files(workDir);
  const text = await readFile(pidFile, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const pid = Number(text.trim());
  const cmdline = Number.isInteger(pid) && pid > 0 ? await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '') : '';
  if (!cmdline.split('\0').includes(config)) {
    await rm(pidFile, { force: true });
    return undefined;
  }
  return { pid, config, log, stop: stopper(pid, pidFile, () => false) };
}

export async function startStandaloneContainerd(o: StandaloneContainerdOptions): Promise<StandaloneContainerd> {
  const { config, log, pidFile } = files(o.workDir);
  await writeFileAtomic(config, renderStandaloneConfig(o));
  const logFile = await open(log, 'a');
  const child = spawn(o.binary, ['--config', config], { detached: true, stdio: ['ignore', logFile.fd, logFile.fd] });
  await logFile.close();
  const pid = child.pid;
  if (pid === undefined) {
    const err = await new Promise<Error>((resolve) => child.once('error', resolve));
    throw new Error(`cannot start ${o.binary}: ${err.message}`);
  }
  let exitStatus: string | undefined;
  child.once('exit', (code, sig) => {
    exitStatus = sig ? `killed by ${sig}` : `exited with status ${code}`;
  });
  child.once('error', (e) => {
    exitStatus = e.message;
  });
  const stop = stopper(pid, pidFile, () => exitStatus !== undefined);
  const target: CtrTarget = { ctr: o.ctr, socket: o.socket, namespace: 'k8s.io' };
  try {
    const died = await waitUntil<string | null>(
      async () => {
        if (exitStatus) return { done: true, value: exitStatus };
        const p = await containerdProblem(target);
        return p ? { done: false, reason: p } : { done: true, value: null };
      },
      { what: `starting a standalone containerd (${o.binary})`, timeoutMs: o.readyTimeoutMs, intervalMs: 200, backoff: 1.5, maxIntervalMs: 2000, signal: o.signal },
    );
    if (died) throw new Error(`the standalone containerd (${o.binary}) ${died}: see ${log}`);
  } catch (err) {
    await stop();
    throw err;
  }
  await writeFile(pidFile, `${pid}\n`);
  child.unref();
  return { pid, config, log, stop };
}
