/**
 * Switching a node's RKE2 role (promotion: agent → server) stops the other role completely before
 * the new one starts: two RKE2s on one node fight over the same ports and data directory. The rke2
 * binary is a stand-in script (named as such) that records when each role starts and when it has
 * finished stopping; it takes a moment to stop, as RKE2 does.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { bringUp } from '../../../agent/rke2/bringup.js';
import { ProcessRke2Services, SystemdRke2Services } from '../../../agent/rke2/services.js';
import { RKE2_DEFAULTS } from '../../../agent/rke2/settings.js';
import type { GuardContext } from '../../../agent/guard.js';
import { Logger, MemorySink } from '../../../lib/logger.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** An rke2 stand-in: logs "started ROLE", and on SIGTERM waits 300 ms before logging "stopped ROLE" and exiting. */
const STAND_IN = `#!/bin/sh
log="$HV_TEST_EVENTS"
echo "started $1" >> "$log"
trap 'sleep 0.3; echo "stopped $1" >> "$log"; exit 0' TERM
while :; do sleep 0.05; done
`;

describe('bringUp switching roles', () => {
  it('waits for the other role to have stopped before starting this one', async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'hv-bringup-'));
    dirs.push(root);
    const bin = path.join(root, 'rke2-stand-in');
    await writeFile(bin, STAND_IN);
    await chmod(bin, 0o755);
    const events = path.join(root, 'events');
    await mkdir(path.join(root, 'etc/rancher/rke2/config.yaml.d'), { recursive: true });
    await writeFile(path.join(root, 'etc/rancher/rke2/config.yaml.d/10-token.yaml'), 'token: t\nserver: https://10.0.0.9:9345\n');
    const env = { HV_TEST_EVENTS: events };
    const r = (p: string) => path.join(root, p);
    // The agent role runs, as on a join node before promotion.
    await new ProcessRke2Services(bin, r, env).start('agent');
    await new Promise((res) => setTimeout(res, 100));
    const ctx: GuardContext = { root: r, log: new Logger(new MemorySink()), signal: new AbortController().signal, settings: {}, progress: () => undefined, now: Date.now };
    const s = { ...RKE2_DEFAULTS, binary: bin, supervisor: 'process' as const, env, probeWindowMs: 200, probeIntervalMs: 50, kubeletHealthzUrl: 'http://127.0.0.1:9/healthz', apiServerUrl: 'https://127.0.0.1:9' };
    const out = await bringUp(ctx, { serverUrl: 'https://10.0.0.9', token: 't', install: { mode: 'join' } }, 'server', s, true);
    await out.services.stop('server');
    const log = (await readFile(events, 'utf8')).trim().split('\n');
    expect(log.slice(0, 3)).toEqual(['started agent', 'stopped agent', 'started server']);
  }, 30_000);
});

/** A systemctl stand-in: takes a moment, as stopping RKE2 does, then records what it was asked. */
const SYSTEMCTL = `#!/bin/sh
sleep 0.3
echo "$*" >> "$HV_TEST_EVENTS"
`;

describe('SystemdRke2Services', () => {
  it('stop returns once systemctl stop has finished, not when it has been started', async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'hv-systemctl-'));
    dirs.push(root);
    await writeFile(path.join(root, 'systemctl'), SYSTEMCTL);
    await chmod(path.join(root, 'systemctl'), 0o755);
    const events = path.join(root, 'events');
    const saved = { PATH: process.env.PATH, HV_TEST_EVENTS: process.env.HV_TEST_EVENTS };
    process.env.PATH = `${root}:${process.env.PATH}`;
    process.env.HV_TEST_EVENTS = events;
    try {
      await new SystemdRke2Services().stop('agent');
      expect(await readFile(events, 'utf8')).toBe('stop rke2-agent.service\n');
    } finally {
      for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
});

/**
 * A systemctl stand-in that records each call and answers is-active from HV_TEST_SERVER_STATE and
 * HV_TEST_AGENT_STATE, one line per unit in the order named (as systemctl does), 3 unless all are
 * active; a journalctl stand-in for the diagnosis's log lines.
 */
const STATEFUL_SYSTEMCTL = `#!/bin/sh
echo "systemctl $*" >> "$HV_TEST_EVENTS"
[ "$1" = is-active ] || exit 0
shift
rc=0
for u in "$@"; do
  case "$u" in rke2-server.service) s=$HV_TEST_SERVER_STATE ;; rke2-agent.service) s=$HV_TEST_AGENT_STATE ;; *) s=unknown ;; esac
  echo "$s"
  [ "$s" = active ] || rc=3
done
exit $rc
`;
const JOURNALCTL = `#!/bin/sh
echo "journalctl $*" >> "$HV_TEST_EVENTS"
echo "rke2 stand-in: last line"
`;

describe('SystemdRke2Services and bringUp under systemd: one systemctl look before the start', () => {
  async function withStandIns(states: { server: string; agent: string }, body: (root: string, events: string) => Promise<void>): Promise<string[]> {
    const root = await mkdtemp(path.join(os.tmpdir(), 'hv-systemctl-'));
    dirs.push(root);
    const bin = path.join(root, 'bin');
    await mkdir(bin);
    await writeFile(path.join(bin, 'systemctl'), STATEFUL_SYSTEMCTL);
    await writeFile(path.join(bin, 'journalctl'), JOURNALCTL);
    await chmod(path.join(bin, 'systemctl'), 0o755);
    await chmod(path.join(bin, 'journalctl'), 0o755);
    const events = path.join(root, 'events');
    const saved = { PATH: process.env.PATH, HV_TEST_EVENTS: process.env.HV_TEST_EVENTS, HV_TEST_SERVER_STATE: process.env.HV_TEST_SERVER_STATE, HV_TEST_AGENT_STATE: process.env.HV_TEST_AGENT_STATE };
    Object.assign(process.env, { PATH: `${bin}:${process.env.PATH}`, HV_TEST_EVENTS: events, HV_TEST_SERVER_STATE: states.server, HV_TEST_AGENT_STATE: states.agent });
    try {
      await body(root, events);
    } finally {
      for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    return (await readFile(events, 'utf8')).trim().split('\n');
  }

  it('states() reads both units from one is-active, each line to its role', async () => {
    let got: unknown;
    const calls = await withStandIns({ server: 'failed', agent: 'activating' }, async () => {
      got = await new SystemdRke2Services().states();
    });
    expect(calls).toEqual(['systemctl is-active rke2-server.service rke2-agent.service']);
    expect(got).toEqual({ server: { active: false, exited: 'unit failed' }, agent: { active: true, exited: undefined } });
  });

  it('states() with systemctl printing nothing (it failed) sees neither role running', async () => {
    let got: unknown;
    await withStandIns({ server: '', agent: '' }, async (root) => {
      await writeFile(path.join(root, 'bin/systemctl'), '#!/bin/sh\necho "systemctl $*" >> "$HV_TEST_EVENTS"\necho "Failed to connect to bus" >&2\nexit 1\n');
      got = await new SystemdRke2Services().states();
    });
    expect(got).toEqual({ server: { active: false, exited: undefined }, agent: { active: false, exited: undefined } });
  });

  async function bringUpServer(states: { server: string; agent: string }): Promise<{ calls: string[]; ready: boolean; reason?: string }> {
    let out: { ready: boolean; reason?: string } = { ready: false };
    const calls = await withStandIns(states, async (root) => {
      await mkdir(path.join(root, 'etc/rancher/rke2/config.yaml.d'), { recursive: true });
      await writeFile(path.join(root, 'etc/rancher/rke2/config.yaml.d/10-token.yaml'), 'token: t\nserver: https://10.0.0.9:9345\n');
      const ctx: GuardContext = { root: (p: string) => path.join(root, p), log: new Logger(new MemorySink()), signal: new AbortController().signal, settings: {}, progress: () => undefined, now: Date.now };
      const s = { ...RKE2_DEFAULTS, supervisor: 'systemd' as const, probeWindowMs: 300, probeIntervalMs: 50, apiServerUrl: 'https://127.0.0.1:9' };
      out = await bringUp(ctx, { serverUrl: 'https://10.0.0.9', token: 't', install: { mode: 'join' } }, 'server', s, true);
    });
    return { calls, ...out };
  }

  it('a stopped server is started after one look at both units, and not asked about again within 5 s', async () => {
    const r = await bringUpServer({ server: 'inactive', agent: 'inactive' });
    expect(r.ready).toBe(false);
    expect(r.reason).toContain('rke2-server not ready');
    expect(r.reason).toContain('rke2 stand-in: last line');
    expect(r.calls.filter((c) => c.startsWith('systemctl'))).toEqual(['systemctl is-active rke2-server.service rke2-agent.service', 'systemctl start --no-block rke2-server.service']);
  });

  it('a running agent role is stopped before the server starts, from the same look', async () => {
    const r = await bringUpServer({ server: 'inactive', agent: 'active' });
    expect(r.calls.filter((c) => c.startsWith('systemctl'))).toEqual([
      'systemctl is-active rke2-server.service rke2-agent.service',
      'systemctl stop rke2-agent.service',
      'systemctl start --no-block rke2-server.service',
    ]);
  });

  it('a running server is not started again', async () => {
    const r = await bringUpServer({ server: 'active', agent: 'inactive' });
    expect(r.calls.filter((c) => c.startsWith('systemctl'))).toEqual(['systemctl is-active rke2-server.service rke2-agent.service']);
  });
});

