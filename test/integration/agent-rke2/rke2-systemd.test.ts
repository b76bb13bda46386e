/**
 * The rke2 guard's systemd path, the one real nodes use: the built hvagent runs inside a container
 * booted with systemd as PID 1 (test/integration/systemd-container.ts), finds /run/systemd/system,
 * and drives rke2-server.service with systemctl and journalctl. The unit is RKE2's own
 * (rancher/rke2 bundle/lib/systemd/system/rke2-server.service: Restart=always, RestartSec=5s,
 * KillMode=process, Conflicts=rke2-agent) with ExecStart pointing at the rke2 TEST DOUBLE
 * (test/fixtures/rke2-standin), which serves /readyz over mutual TLS on 127.0.0.1:6443 of the
 * container's own network namespace, at RKE2's real paths.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { serialiseHarvesterConfig } from '../../../config/index.js';
import { bootSystemdContainer } from '../systemd-container.js';
import { createConfig, makeTls, STANDIN, TLS_DIR } from './harness.js';
import type { StatusDocument } from '../../../agent/guard.js';

const REPO = path.resolve(import.meta.dirname, '../../..');
const HVAGENT = path.join(REPO, 'bin/hvagent');
const FATAL = 'starting kubernetes: preparing server: bootstrap data already found and encrypted with different token';

let work: string;
beforeAll(() => {
  if (process.getuid?.() !== 0) throw new Error('integration tests need root');
});
afterEach(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

/** rke2-server.service as RKE2 ships it, running the stand-in; `restart` is RKE2's `always` unless a case needs `no`. */
function rke2ServerUnit(restart: 'always' | 'no', restartSec = '5s'): string {
  return [
    '[Unit]',
    'Description=Rancher Kubernetes Engine v2 (server) -- rke2 TEST DOUBLE (test/fixtures/rke2-standin)',
    'Wants=network-online.target',
    'After=network-online.target',
    'Conflicts=rke2-agent.service',
    '[Service]',
    'Environment=HV_RKE2_STANDIN=/hvtest/standin.json',
    'KillMode=process',
    'Delegate=yes',
    'TimeoutStartSec=0',
    `Restart=${restart}`,
    `RestartSec=${restartSec}`,
    `ExecStart=/usr/bin/node ${STANDIN} server`,
    '',
  ].join('\n');
}

/** Inputs of one boot: the node config the installer writes, RKE2's TLS files, a drop-in, agent settings, the stand-in's behaviour. */
async function prepare(behaviour: Record<string, unknown>, guardSettings: Record<string, unknown>, topSettings: string[] = []): Promise<void> {
  work = await mkdtemp(path.join(os.tmpdir(), 'hv-rke2-systemd-'));
  await mkdir(path.join(work, 'oem'));
  await writeFile(path.join(work, 'oem/harvester.config'), await serialiseHarvesterConfig(createConfig), { mode: 0o600 });
  await makeTls(path.join(work, 'tls'));
  await mkdir(path.join(work, 'config.yaml.d'));
  await writeFile(path.join(work, 'config.yaml.d/90-harvester-server.yaml'), 'cni: multus,canal\n', { mode: 0o600 });
  await writeFile(path.join(work, 'standin.json'), JSON.stringify({ server: { port: 6443, tlsDir: TLS_DIR, ...behaviour } }));
  const rke2 = Object.entries(guardSettings).map(([k, v]) => `    ${k}: ${JSON.stringify(v)}`);
  await writeFile(path.join(work, 'settings.yaml'), ['logLevel: debug', 'backoff: {initial: 200ms, max: 1s}', ...topSettings, 'guards:', '  rke2:', ...rke2, ''].join('\n'));
}

interface Observed {
  exit: number;
  status: StatusDocument;
  unitState: string;
  mainPid: number;
  runDir: string[];
  journal: string;
  agentLog: string;
}

/** Boots the container; inside, `hvagent once --guard rke2` with no supervisor setting (auto), then what systemd says. */
async function runAgentUnderSystemd(unit: string, more: { units?: Record<string, string>; before?: string[] } = {}): Promise<Observed> {
  const boot = await bootSystemdContainer({
    work,
    units: { 'rke2-server.service': unit, ...more.units },
    readOnly: [REPO],
    bindReadOnly: { [path.join(work, 'oem')]: '/oem', [path.join(work, 'tls')]: TLS_DIR },
    bind: { [path.join(work, 'config.yaml.d')]: '/etc/rancher/rke2/config.yaml.d' },
    script: [
      ...(more.before ?? []),
      `${HVAGENT} once --guard rke2 --settings /hvtest/settings.yaml > /hvtest/agent.log 2>&1`,
      'echo $? > /hvtest/agent.exit',
      'systemctl is-active rke2-server.service > /hvtest/unit.state',
      'systemctl show -p MainPID --value rke2-server.service > /hvtest/unit.pid',
      'ls /run/hvagent > /hvtest/run-hvagent.ls',
      'cp /run/hvagent/status.json /hvtest/status.json',
      'journalctl -u rke2-server.service --no-pager -o cat > /hvtest/journal.txt',
      '',
    ].join('\n'),
    timeoutMs: 150_000,
  });
  const read = (f: string) => readFile(path.join(work, f), 'utf8').catch(() => '');
  const agentLog = await read('agent.log');
  expect(boot.scriptExit, `${boot.output}\n${agentLog}\n${boot.console.slice(-3000)}`).toBe(0);
  return {
    exit: Number((await read('agent.exit')).trim()),
    status: JSON.parse(await read('status.json')) as StatusDocument,
    unitState: (await read('unit.state')).trim(),
    mainPid: Number((await read('unit.pid')).trim()),
    runDir: (await read('run-hvagent.ls')).split('\n').filter(Boolean),
    journal: await read('journal.txt'),
    agentLog,
  };
}

describe('rke2 guard under systemd (rke2-server.service)', () => {
  it('starts the unit with systemctl, waits for /readyz, and supervises nothing itself', async () => {
    await prepare({ readyAfterMs: 1500 }, { deadline: '60s', probeWindowMs: 20_000, probeIntervalMs: 200 });
    const o = await runAgentUnderSystemd(rke2ServerUnit('always'));
    expect(o.exit, o.agentLog).toBe(0);
    expect(o.status.guards).toEqual([expect.objectContaining({ name: 'rke2', phase: 'succeeded', detail: 'rke2-server ready (systemd)' })]);
    expect(o.unitState).toBe('active');
    expect(o.mainPid).toBeGreaterThan(0);
    // The stand-in ran as the unit's main process, not as a child the agent recorded.
    expect(o.runDir).not.toContain('rke2-server.pid');
    expect(o.journal).toContain('Starting rke2 server (stand-in)');
  });

  it('a unit that fails (Restart=no) is started again, then given up after maxCrashes with the journal lines', async () => {
    await prepare({ crash: FATAL }, { deadline: '60s', probeWindowMs: 3_000, probeIntervalMs: 200, maxCrashes: 2 });
    const o = await runAgentUnderSystemd(rke2ServerUnit('no'));
    expect(o.exit).toBe(1);
    const g = o.status.guards[0]!;
    expect(g.phase).toBe('failed');
    expect(g.lastError).toMatch(/^rke2-server exited 2 times: unit failed\nlast log lines of rke2:\n/);
    expect(g.lastError).toContain(`level=fatal msg="${FATAL}"`);
    expect(o.unitState).toBe('failed');
  });

  it("with RKE2's Restart=always (every 5 s) a crashing server is never ready: the guard's deadline ends it with the journal's fatal line", async () => {
    await prepare({ crash: FATAL }, { deadline: '11s', probeWindowMs: 2_000, probeIntervalMs: 200 });
    const o = await runAgentUnderSystemd(rke2ServerUnit('always'));
    expect(o.exit).toBe(1);
    const g = o.status.guards[0]!;
    expect(g.phase).toBe('failed');
    expect(g.lastError).toMatch(/^not reached within 11 s \(\d+ attempts\): rke2-server not ready: /);
    expect(g.lastError).toContain('last log lines of rke2:');
    expect(g.lastError).toContain(`level=fatal msg="${FATAL}"`);
    // systemd keeps restarting it (5 s apart, under its start limit): the unit is never left failed.
    expect(['activating', 'active']).toContain(o.unitState);
    expect(o.journal).toMatch(/Scheduled restart job, restart counter is at [2-9]/);
  });
});

describe('rke2 guard under systemd when rancherd bootstraps', () => {
  const RANCHERD_FATAL = 'level=fatal msg=failed to bootstrap: get bootstrap info: Get https://10.0.0.10:443/cacerts: dial tcp 10.0.0.10:443: connect: no route to host';
  /** rancherd.service failing as rancherd fails when it cannot reach the cluster: a fatal line, exit 1. */
  const failingRancherd = ['[Unit]', 'Description=rancherd that fails (test)', '[Service]', 'Type=oneshot', `ExecStart=/bin/sh -c 'echo "${RANCHERD_FATAL}" >&2; exit 1'`, ''].join('\n');

  it('a failing rancherd is named with its log lines, and hvagent starts no RKE2 in its place', async () => {
    await prepare({ readyAfterMs: 0 }, { deadline: '15s', probeWindowMs: 1_000, probeIntervalMs: 200 }, ['bootstrapper: rancherd']);
    const o = await runAgentUnderSystemd(rke2ServerUnit('always'), { units: { 'rancherd.service': failingRancherd }, before: ['systemctl start rancherd.service || true'] });
    expect(o.exit, o.agentLog).toBe(1);
    const g = o.status.guards[0]!;
    expect(g.phase).toBe('failed');
    expect(g.lastError).toMatch(/^rancherd\.service failed \(exit-code\) and rke2-server is not running: the bootstrap stopped/);
    expect(g.lastError).toContain(`\n  ${RANCHERD_FATAL}\n`);
    expect(g.hint).toContain('journalctl -u rancherd');
    // rancherd owns RKE2 here: its unit was never started, and no process of hvagent's stands in.
    expect(o.unitState).toBe('inactive');
    expect(o.journal).not.toContain('Starting rke2 server (stand-in)');
    expect(o.runDir).not.toContain('rke2-server.pid');
  });
});
