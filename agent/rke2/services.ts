/**
 * Starting and stopping rke2-server / rke2-agent. On a node booted with systemd the units RKE2 ships
 * are used; without systemd (a rescue shell, a container, this project's tests) the agent supervises
 * the rke2 process itself: detached in its own process group, output to a log file, PID recorded
 * with its start time so a recycled PID is never mistaken for it.
 */
import { spawn } from 'node:child_process';
import { open, readFile, mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import { sleep } from '../../lib/wait.js';
import type { Rke2Role } from './role.js';
import { systemdBooted } from '../systemd-booted.js';

export interface ServiceState {
  active: boolean;
  /** Supervised mode: the process ended; its exit is described here. */
  exited?: string;
  pid?: number;
}

export interface Rke2Services {
  readonly kind: 'systemd' | 'process';
  state(role: Rke2Role): Promise<ServiceState>;
  /** Both roles' states in one look (under systemd one `systemctl` run, not one per role). */
  states(): Promise<Record<Rke2Role, ServiceState>>;
  start(role: Rke2Role): Promise<void>;
  stop(role: Rke2Role, timeoutMs?: number): Promise<void>;
  /** The last lines the service logged, for diagnoses. */
  logTail(role: Rke2Role, lines?: number): Promise<string>;
}

export class SystemdRke2Services implements Rke2Services {
  readonly kind = 'systemd';

  async state(role: Rke2Role): Promise<ServiceState> {
    const r = await run('systemctl', ['is-active', `rke2-${role}.service`], { allowFailure: true, timeoutMs: 15_000 });
    return unitState(r.stdout.trim());
  }

  async states(): Promise<Record<Rke2Role, ServiceState>> {
    // is-active prints one state per unit, in the order the units are named.
    const r = await run('systemctl', ['is-active', 'rke2-server.service', 'rke2-agent.service'], { allowFailure: true, timeoutMs: 15_000 });
    const [server = '', agent = ''] = r.stdout.split('\n').map((l) => l.trim());
    return { server: unitState(server), agent: unitState(agent) };
  }

  async start(role: Rke2Role): Promise<void> {
    // --no-block: rke2-server's unit only reports started once etcd is up; readiness is ours to wait for.
    await run('systemctl', ['start', '--no-block', `rke2-${role}.service`], { timeoutMs: 30_000 });
  }

  async stop(role: Rke2Role, timeoutMs = 120_000): Promise<void> {
    await run('systemctl', ['stop', `rke2-${role}.service`], { timeoutMs });
  }

  async logTail(role: Rke2Role, lines = 15): Promise<string> {
    const r = await run('journalctl', ['-u', `rke2-${role}.service`, '-n', String(lines), '--no-pager', '-o', 'cat'], {
      allowFailure: true,
      timeoutMs: 15_000,
    });
    return r.stdout.trim();
  }
}

/** What `systemctl is-active` printed for one unit, as a state; nothing printed (systemctl failed) is not running. */
function unitState(s: string): ServiceState {
  return { active: s === 'active' || s === 'activating', exited: s === 'failed' ? 'unit failed' : undefined };
}

interface PidRecord {
  pid: number;
  startTicks: string;
  startedAt: string;
}

export class ProcessRke2Services implements Rke2Services {
  readonly kind = 'process';

  constructor(
    private readonly binary: string,
    private readonly root: (p: string) => string,
    private readonly env: Record<string, string> = {},
  ) {}

  private pidFile(role: Rke2Role): string {
    return this.root(`/run/hvagent/rke2-${role}.pid`);
  }

  logFile(role: Rke2Role): string {
    return this.root(`/var/log/hvagent/rke2-${role}.log`);
  }

  private async record(role: Rke2Role): Promise<PidRecord | undefined> {
    try {
      return JSON.parse(await readFile(this.pidFile(role), 'utf8')) as PidRecord;
    } catch {
      return undefined;
    }
  }

  async state(role: Rke2Role): Promise<ServiceState> {
    const rec = await this.record(role);
    if (!rec) return { active: false };
    const ticks = await processStartTicks(rec.pid);
    if (ticks !== undefined && ticks === rec.startTicks) return { active: true, pid: rec.pid };
    return { active: false, pid: rec.pid, exited: `rke2 ${role} (pid ${rec.pid}, started ${rec.startedAt}) is no longer running` };
  }

  async states(): Promise<Record<Rke2Role, ServiceState>> {
    return { server: await this.state('server'), agent: await this.state('agent') };
  }

  async start(role: Rke2Role): Promise<void> {
    if ((await this.state(role)).active) return;
    await mkdir(path.dirname(this.logFile(role)), { recursive: true });
    const log = await open(this.logFile(role), 'a', 0o600);
    try {
      const child = spawn(this.binary, [role], {
        detached: true,
        stdio: ['ignore', log.fd, log.fd],
        env: { ...process.env, ...this.env },
      });
      const pid = await new Promise<number>((resolve, reject) => {
        child.once('spawn', () => resolve(child.pid!));
        child.once('error', (err) =>
          reject(new Error(`cannot start ${this.binary} ${role}: ${(err as NodeJS.ErrnoException).code ?? err.message}`)),
        );
      });
      child.unref();
      const startTicks = (await processStartTicks(pid)) ?? '';
      await writeFileAtomic(this.pidFile(role), JSON.stringify({ pid, startTicks, startedAt: new Date().toISOString() }) + '\n');
    } finally {
      await log.close();
    }
  }

  async stop(role: Rke2Role, timeoutMs = 60_000): Promise<void> {
    const st = await this.state(role);
    if (st.active && st.pid) {
      signalGroup(st.pid, 'SIGTERM');
      const until = Date.now() + timeoutMs;
      while (Date.now() < until && (await this.state(role)).active) await sleep(200);
      if ((await this.state(role)).active) signalGroup(st.pid, 'SIGKILL');
      const killUntil = Date.now() + 10_000;
      while (Date.now() < killUntil && (await this.state(role)).active) await sleep(100);
    }
    await rm(this.pidFile(role), { force: true });
  }

  async logTail(role: Rke2Role, lines = 15): Promise<string> {
    try {
      const text = await readFile(this.logFile(role), 'utf8');
      return text.trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  }
}

function signalGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      /* already gone */
    }
  }
}

/** Field 22 of /proc/<pid>/stat: the process start time, which differs for a recycled PID. */
async function processStartTicks(pid: number): Promise<string | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z') return undefined; // a zombie is not running
    return fields[19];
  } catch {
    return undefined;
  }
}

/** systemd is in charge when it booted this node (systemd-booted.ts) and the root is the node's. */
export async function chooseServices(
  supervisor: 'auto' | 'systemd' | 'process',
  binary: string,
  root: (p: string) => string,
  env?: Record<string, string>,
): Promise<Rke2Services> {
  if (supervisor === 'systemd') return new SystemdRke2Services();
  if (supervisor === 'auto') {
    if ((await systemdBooted()) && root('/') === '/') return new SystemdRke2Services();
  }
  return new ProcessRke2Services(binary, root, env);
}
