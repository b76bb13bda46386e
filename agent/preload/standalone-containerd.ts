/**
 * A standalone containerd for the preload, as Harvester's installer does in ISO mode (PR #458): the
 * rke2 guard waits for this guard, so RKE2's own containerd is not running yet on a first boot. We
 * start containerd on RKE2's root, state and socket, import, and stop it; RKE2's containerd later
 * opens the same content store and metadata and finds the images. The CRI plugin is disabled: the
 * import needs only the content and image services.
 */
import { spawn } from 'node:child_process';
import { open } from 'node:fs/promises';
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

function exited(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
}

export async function startStandaloneContainerd(o: StandaloneContainerdOptions): Promise<StandaloneContainerd> {
  const config = path.join(o.workDir, 'preload-containerd.toml');
  const log = path.join(o.workDir, 'preload-containerd.log');
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
  const stop = async (): Promise<void> => {
    if (exited(pid)) return;
    process.kill(pid, 'SIGTERM');
    for (let i = 0; i < 100 && !exited(pid) && exitStatus === undefined; i++) await sleep(100);
    if (!exited(pid) && exitStatus === undefined) process.kill(pid, 'SIGKILL');
  };
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
  child.unref();
  return { pid, config, log, stop };
}
