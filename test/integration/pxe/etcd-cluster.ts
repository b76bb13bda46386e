/**
 * A real three-member etcd cluster (Debian's etcd-server) on 127.0.0.1, for the fleet tests: free
 * ports, data in a fresh directory under /dev/shm (tmpfs: the tests measure hvpxe, not this disk),
 * members stopped and started again by the tests, everything stopped by PID and removed by stop()
 * even when a test failed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { freePort } from './harness.js';

export interface Member {
  name: string;
  clientUrl: string;
  peerUrl: string;
  dataDir: string;
  proc?: ChildProcess;
  log: string[];
}

export class EtcdCluster {
  readonly members: Member[] = [];
  private dir = '';

  get endpoints(): string {
    return this.members.map((m) => m.clientUrl).join(',');
  }

  async start(size = 3): Promise<void> {
    this.dir = await mkdtemp(path.join('/dev/shm', 'hvpxe-etcd-'));
    for (let i = 1; i <= size; i++) {
      this.members.push({ name: `m${i}`, clientUrl: `http://127.0.0.1:${await freePort()}`, peerUrl: `http://127.0.0.1:${await freePort()}`, dataDir: path.join(this.dir, `m${i}`), log: [] });
    }
    for (const m of this.members) this.spawn(m, 'new');
    await this.waitHealthy(this.members, 60_000);
  }

  private spawn(m: Member, state: 'new' | 'existing'): void {
    const cluster = this.members.map((x) => `${x.name}=${x.peerUrl}`).join(',');
    const args = ['--name', m.name, '--data-dir', m.dataDir, '--listen-client-urls', m.clientUrl, '--advertise-client-urls', m.clientUrl, '--listen-peer-urls', m.peerUrl, '--initial-advertise-peer-urls', m.peerUrl, '--initial-cluster', cluster, '--initial-cluster-state', state, '--initial-cluster-token', path.basename(this.dir), '--logger', 'zap', '--log-level', 'error'];
    const proc = spawn('etcd', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    proc.stderr!.on('data', (d) => {
      m.log.push(String(d));
      if (m.log.length > 200) m.log.shift();
    });
    m.proc = proc;
  }

  /** Kills a member (SIGKILL: as a crash); its data stays for restart(). */
  async kill(m: Member): Promise<void> {
    const p = m.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise<void>((r) => p.once('exit', () => r()));
    p.kill('SIGKILL');
    await exited;
  }

  async restart(m: Member): Promise<void> {
    await this.kill(m);
    this.spawn(m, 'existing');
    await this.waitHealthy([m], 60_000);
  }

  /** Waits until each member answers a linearizable read (the cluster has quorum and the member is in it). */
  async waitHealthy(members: Member[], timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (const m of members) {
      for (;;) {
        const ok = await fetch(`${m.clientUrl}/v3/kv/range`, { method: 'POST', body: JSON.stringify({ key: 'AA==' }), signal: AbortSignal.timeout(2_000) })
          .then((r) => r.ok)
          .catch(() => false);
        if (ok) break;
        if (Date.now() > deadline) throw new Error(`etcd member ${m.name} not healthy within ${timeoutMs} ms: ${m.log.join('').slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.members.map((m) => this.kill(m)));
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
  }
}
