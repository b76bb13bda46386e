/**
 * `hvagent console`, the node's status screen, on a real pseudo-terminal: the management URL, the
 * role, node and cluster state and each guard's phase with its diagnosis, re-read as the status
 * document changes; F12 opens a shell and the screen comes back when it exits.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { dashboard } from '../../../agent/console/dashboard.js';
import type { StatusDocument } from '../../../agent/guard.js';
import { AGENT_CLI, KEYS, Session } from './session.js';
import { tempDir } from './walk.js';

let s: Session | undefined;
afterEach(() => s?.kill());

const guard = (name: string, phase: string, extra: Record<string, unknown> = {}) => ({ name, phase, attempts: 1, updatedAt: '2026-12-01T09:00:00Z', ...extra });

function statusDoc(guards: unknown[], pid = process.pid): StatusDocument {
  return { version: 1, pid, startedAt: '2026-12-01T09:00:00Z', updatedAt: '2026-12-01T09:01:00Z', mode: 'run', state: 'running', guards } as StatusDocument;
}

function nodeRoot(config: string, status?: StatusDocument): string {
  const root = tempDir();
  mkdirSync(path.join(root, 'oem'), { recursive: true });
  mkdirSync(path.join(root, 'run/hvagent'), { recursive: true });
  writeFileSync(path.join(root, 'oem/harvester.config'), config);
  if (status) writeFileSync(path.join(root, 'run/hvagent/status.json'), JSON.stringify(status));
  return root;
}

const CREATE = 'scheme_version: 1\ntoken: a-secret-token\nos: {hostname: node-1, password: rancher-pw}\ninstall:\n  mode: create\n  device: /dev/vda\n  vip: 10.0.0.100\n  vip_mode: static\n  management_interface: {interfaces: [{name: eth0}], method: dhcp}\n';

describe('hvagent console', () => {
  it('shows the management URL, role, node and cluster state and every guard with its diagnosis; follows the status document', async () => {
    const root = nodeRoot(
      CREATE,
      statusDoc([
        guard('network-online', 'succeeded', { detail: 'mgmt-br 10.0.0.11/24, default route via 10.0.0.1' }),
        guard('registries', 'succeeded'),
        guard('image-preload', 'running', { detail: 'archive 3/6: 412 MiB' }),
        guard('rke2', 'waiting', { lastError: 'rke2-server is activating', nextRetryAt: '2999-01-01T00:00:00Z' }),
        guard('vip', 'pending'),
        guard('longhorn-disk', 'failed', { lastError: 'HARV_LH_DEFAULT is not mounted', hint: 'check dmesg for ext4 errors' }),
        guard('promotion', 'skipped', { detail: 'this node created the cluster' }),
      ]),
    );
    s = new Session(process.execPath, [AGENT_CLI, 'console', '--root', root, '--refresh', '1'], { env: { TERM: 'linux' } });
    const text = await s.waitForText('hvagent guards:');
    expect(text).toContain('Management URL: https://10.0.0.100');
    expect(text).toContain('Role: default (this node created the cluster)');
    expect(text).toContain('Node: NotReady: longhorn-disk failed');
    expect(text).toContain('Cluster: Setting up: waiting for the management address');
    expect(text).toMatch(/image-preload +running +archive 3\/6: 412 MiB/);
    expect(text).toMatch(/rke2 +waiting +rke2-server is activating \(next try in \d+ s\)/);
    expect(text).toMatch(/longhorn-disk +failed +HARV_LH_DEFAULT is not mounted what to do: check dmesg for ext4 errors/);
    expect(text).not.toContain('a-secret-token');
    // The agent moves on: the screen follows within its refresh.
    writeFileSync(
      path.join(root, 'run/hvagent/status.json'),
      JSON.stringify(statusDoc(['network-online', 'registries', 'image-preload', 'rke2', 'vip', 'longhorn-disk'].map((n) => guard(n, 'succeeded')).concat([guard('promotion', 'watching')]))),
    );
    await s.waitForText('Node: Ready');
    expect(s.flat()).toContain('Cluster: Ready: the management address answers at 10.0.0.100');
  }, 30_000);

  it('F12 opens a shell; leaving it brings the status screen back', async () => {
    const root = nodeRoot(CREATE);
    s = new Session(process.execPath, [AGENT_CLI, 'console', '--root', root, '--refresh', '1'], { env: { TERM: 'linux', SHELL: '/bin/sh', PS1: 'node-shell$ ' } });
    await s.waitForText('Node: Setting up node: hvagent has not reported yet');
    await s.keys(KEYS.f12);
    await s.waitFor('Shell on the node; exit returns to the status screen.');
    await s.type('echo shell-says-$((6*7))\r');
    await s.waitFor('shell-says-42');
    await s.type('exit\r');
    await s.waitForText('Management URL: https://10.0.0.100');
  }, 30_000);

  it('a join node shows the cluster it joined; a dead agent is said to be dead (pure view)', () => {
    const v = dashboard({
      config: { serverUrl: 'https://10.0.0.100:443', install: { mode: 'join', role: 'worker' } },
      status: statusDoc([guard('rke2', 'running')], 999_999_999),
      alive: false,
      hostname: 'n2',
      addresses: [],
      now: Date.now(),
    });
    expect(v.managementUrl).toBe('https://10.0.0.100');
    expect(v.role).toBe('worker (joined https://10.0.0.100:443)');
    expect(v.nodeState).toBe('Setting up node (rke2 running)');
    expect(v.notes).toContain('hvagent is not running (pid 999999999 is gone): systemctl status hvagent');
  });

  it("RKE2 certificates that run out are a note under the state; certificates with time left are only the guard's row (pure view)", () => {
    const view = (level: string, detail: string) =>
      dashboard({ status: statusDoc([guard('certificates', 'watching', { detail, data: { level } })]), alive: true, hostname: 'n1', addresses: [], now: Date.now() });
    const expiring = view('expiring', 'expiring: 1 of 9 RKE2 certificates; soonest: client-kubelet.crt expires in 12 days (2027-06-13)');
    expect(expiring.notes).toContain('RKE2 certificates: expiring: 1 of 9 RKE2 certificates; soonest: client-kubelet.crt expires in 12 days (2027-06-13) (hvagent status --json lists each)');
    const ok = view('ok', '9 RKE2 certificates; soonest: client-kubelet.crt expires in 300 days (2028-03-27)');
    expect(ok.notes.filter((n) => n.startsWith('RKE2 certificates'))).toEqual([]);
    expect(ok.guards).toEqual([{ name: 'certificates', phase: 'watching', text: '9 RKE2 certificates; soonest: client-kubelet.crt expires in 300 days (2028-03-27)', hint: undefined, retry: undefined }]);
  });
});
