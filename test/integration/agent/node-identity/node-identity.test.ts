/**
 * node-identity on real interfaces: a network namespace with a real bridge mgmt-br and a veth port,
 * dnsmasq handing out leases on the switch side and dhclient on the node side. A DHCP server that
 * hands out another address after the cluster learned the first one holds RKE2 back with both
 * named; an address that flaps is called so; a NIC renamed after a "reboot" is named by its old
 * name, new name and MAC.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { run } from '../../../../lib/exec.js';
import { Logger, MemorySink } from '../../../../lib/logger.js';
import { Redactor } from '../../../../lib/redact.js';
import { runGuards } from '../../../../agent/runner.js';
import { defaultSettings } from '../../../../agent/settings.js';
import type { HarvesterConfig } from '../../../../config/types.js';

const MAC = '52:54:00:7e:00:03';
let dir: string;
let node: string;
let sw: string;
let sink: MemorySink;
const children: ChildProcess[] = [];
const ip = (...args: string[]) => run('ip', args, { timeoutMs: 10_000 });
const config: HarvesterConfig = { install: { mode: 'join', managementInterface: { method: 'dhcp', interfaces: [{ name: 'ens3' }] } } };

beforeEach(async () => {
  const id = randomBytes(3).toString('hex');
  node = `hvid-${id}-node`;
  sw = `hvid-${id}-sw`;
  dir = await mkdtemp(path.join(tmpdir(), 'hvagent-identity-'));
  sink = new MemorySink();
  await ip('netns', 'add', node);
  await ip('netns', 'add', sw);
  await ip('-n', node, 'link', 'add', 'mgmt-br', 'type', 'bridge', 'stp_state', '0', 'forward_delay', '0');
  await ip('-n', node, 'link', 'add', 'ens3', 'address', MAC, 'type', 'veth', 'peer', 'name', 'swp1', 'netns', sw);
  await ip('-n', node, 'link', 'set', 'ens3', 'master', 'mgmt-br');
  // The bridge takes its port's MAC, as NetworkManager's mgmt-br does.
  await ip('-n', node, 'link', 'set', 'mgmt-br', 'address', MAC);
  for (const [ns, l] of [[node, 'ens3'], [node, 'mgmt-br'], [node, 'lo'], [sw, 'swp1']] as const) await ip('-n', ns, 'link', 'set', l, 'up');
  await ip('-n', sw, 'addr', 'add', '10.78.0.1/24', 'dev', 'swp1');
  // The install's record: a DHCP node, ens3 with its MAC, the address the installer saw.
  await writeFile(path.join(await mkdirp(dir, 'oem/hvinstall'), 'node-identity.json'), JSON.stringify({ version: 1, nodeName: 'n1', interface: 'mgmt-br', method: 'dhcp', address: '10.78.0.10/24', addressSource: 'install', nics: [{ name: 'ens3', mac: MAC }] }));
  // RKE2 has run here: the cluster knows the node's address.
  await writeFile(path.join(await mkdirp(dir, 'var/lib/rancher/rke2/agent'), 'kubelet.kubeconfig'), 'apiVersion: v1\n');
});

afterEach(async () => {
  await stopChildren();
  await ip('netns', 'del', node).catch(() => undefined);
  await ip('netns', 'del', sw).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

async function mkdirp(base: string, rel: string): Promise<string> {
  const p = path.join(base, rel);
  await mkdir(p, { recursive: true });
  return p;
}

async function stopChildren(): Promise<void> {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGTERM');
      await new Promise((r) => c.once('exit', r));
    }
  }
}

function spawnTracked(cmd: string, args: string[]): void {
  children.push(spawn(cmd, args, { stdio: 'ignore' }));
}

/** A DHCP server that gives the node's MAC one fixed address (a reservation). */
function dnsmasq(address: string, tag: string): void {
  spawnTracked('ip', ['netns', 'exec', sw, 'dnsmasq', '--keep-in-foreground', '--conf-file=/dev/null', '--port=0', '--user=root', '--group=root', '--interface=swp1', '--bind-interfaces',
    '--dhcp-range=10.78.0.50,10.78.0.99,255.255.255.0,1h', `--dhcp-host=${MAC},${address}`, `--dhcp-leasefile=${dir}/dnsmasq-${tag}.leases`, '--dhcp-authoritative', '--dhcp-option=option:router,10.78.0.1']);
}

async function dhclient(tag: string): Promise<void> {
  const script = path.join(dir, 'dhclient-script');
  await writeFile(script, '#!/bin/sh\ncase "$reason" in BOUND|RENEW|REBIND|REBOOT) ip -4 addr flush dev "$interface" scope global; ip addr add "$new_ip_address/$new_subnet_mask" dev "$interface" ;; esac\nexit 0\n');
  await chmod(script, 0o755);
  spawnTracked('ip', ['netns', 'exec', node, 'dhclient', '-d', '-4', '-lf', path.join(dir, `dhclient-${tag}.leases`), '-pf', path.join(dir, `dhclient-${tag}.pid`), '-sf', script, 'mgmt-br']);
}

async function addressIs(cidr: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const r = await ip('-n', node, '-j', '-4', 'addr', 'show', 'dev', 'mgmt-br');
    if (r.stdout.includes(`"${cidr.split('/')[0]}"`)) return;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error(`mgmt-br never got ${cidr}`);
}

async function runIdentity(deadline: string, extra: Record<string, unknown> = {}) {
  const s = defaultSettings();
  s.backoff = { initialMs: 200, maxMs: 500 };
  s.guards['node-identity'] = { deadline, netns: node, pollWindow: '1s', pollInterval: '200ms', ...extra };
  const r = await runGuards({ mode: 'once', rootDir: dir, settings: s, config, log: new Logger(sink, new Redactor(), 'debug'), signal: new AbortController().signal, only: ['node-identity'] });
  return r.status.guards.find((g) => g.name === 'node-identity')!;
}

describe('node-identity in network namespaces', () => {
  it('confirms the install\'s address and records it, then names a DHCP server that hands out another one', async () => {
    dnsmasq('10.78.0.10', 'a');
    await dhclient('a');
    await addressIs('10.78.0.10/24');
    const ok = await runIdentity('30s');
    expect(ok.phase).toBe('succeeded');
    expect(ok.detail).toBe('mgmt-br 10.78.0.10/24 (as the installer saw it)');
    const seen = JSON.parse(await readFile(path.join(dir, 'var/lib/rancher/hvagent/node-address.json'), 'utf8'));
    expect(seen).toMatchObject({ version: 1, address: '10.78.0.10/24', interface: 'mgmt-br', why: 'install' });

    // "After a reboot" the DHCP server's reservation is gone and it hands out another address.
    await stopChildren();
    await ip('-n', node, 'addr', 'flush', 'dev', 'mgmt-br');
    dnsmasq('10.78.0.12', 'b');
    await dhclient('b');
    await addressIs('10.78.0.12/24');
    const changed = await runIdentity('3s', { history: '0s' });
    expect(changed.phase).toBe('failed');
    expect(changed.lastError).toContain(`management address changed: mgmt-br has 10.78.0.12/24 from DHCP, but the cluster knows this node as 10.78.0.10 (recorded at its first boot, ${seen.recordedAt})`);
    expect(changed.lastError).toContain(`make the DHCP server hand 10.78.0.10 to ${MAC} again`);
    expect(changed.data).toMatchObject({ verdict: 'changed', expected: '10.78.0.10/24', current: ['10.78.0.12/24'], clusterKnows: true });
  });

  it('calls an address that flaps between two values flapping', async () => {
    await ip('-n', node, 'addr', 'add', '10.78.0.10/24', 'dev', 'mgmt-br');
    // Two DHCP servers answering in turn, as harvester/harvester#4290 had.
    spawnTracked('ip', ['netns', 'exec', node, 'sh', '-c', 'while :; do ip addr flush dev mgmt-br; ip addr add 10.78.0.12/24 dev mgmt-br; sleep 0.2; ip addr flush dev mgmt-br; ip addr add 10.78.0.10/24 dev mgmt-br; sleep 0.2; done']);
    const g = await runIdentity('3s', { pollWindow: '2s', pollInterval: '100ms' });
    expect(g.phase).toBe('failed');
    expect(g.lastError).toMatch(/the address of mgmt-br flaps between 10\.78\.0\.(10|12)\/24, 10\.78\.0\.(10|12)\/24: two DHCP servers answering/);
    expect(g.data).toMatchObject({ verdict: 'flapping' });
  });

  it("counts network-online's looks toward its window: after network-online, one look of its own", async () => {
    await ip('-n', node, 'addr', 'add', '10.78.0.10/24', 'dev', 'mgmt-br');
    await ip('-n', node, 'route', 'add', 'default', 'via', '10.78.0.1');
    // node-identity's `ip` runs, logged: its window (1 s) is shorter than network-online's steady
    // period (1.5 s), so the address has been watched long enough when it starts.
    const calls = path.join(dir, 'identity-ip-calls');
    const ipLogged = path.join(dir, 'ip-logged');
    await writeFile(ipLogged, `#!/bin/sh\necho "$*" >> ${calls}\nexec ip "$@"\n`);
    await chmod(ipLogged, 0o755);
    const s = defaultSettings();
    s.backoff = { initialMs: 200, maxMs: 500 };
    s.guards['network-online'] = { deadline: '30s', netns: node, bond: false, stableMs: 1500, pollIntervalMs: 200, pollWindowMs: 10_000 };
    s.guards['node-identity'] = { deadline: '30s', netns: node, pollWindow: '1s', pollInterval: '200ms', ipCommand: ipLogged };
    // network-online, then node-identity (the daemon orders them so; `only` drops the dependency)
    const drive = async (name: 'network-online' | 'node-identity') => {
      const r = await runGuards({ mode: 'once', rootDir: dir, settings: s, config, log: new Logger(sink, new Redactor(), 'debug'), signal: new AbortController().signal, only: [name] });
      return r.status.guards.find((g) => g.name === name)!;
    };
    expect((await drive('network-online')).phase).toBe('succeeded');
    const identity = await drive('node-identity');
    expect(identity.phase).toBe('succeeded');
    expect(identity.detail).toBe('mgmt-br 10.78.0.10/24 (as the installer saw it)');
    // one look, links and addresses in one `ip` run
    expect((await readFile(calls, 'utf8')).trim().split('\n')).toEqual([`-n ${node} -j -d addr show`]);

    // Alone, with no earlier looks (history 0 s), it samples its own window: more than one look.
    await rm(calls);
    const alone = await runIdentity('30s', { pollWindow: '2s', pollInterval: '100ms', history: '0s', ipCommand: ipLogged });
    expect(alone.phase).toBe('succeeded');
    expect((await readFile(calls, 'utf8')).trim().split('\n').length).toBeGreaterThan(1);
  });

  it('names a bond NIC renamed after a reboot by its old name, new name and MAC', async () => {
    await ip('-n', node, 'addr', 'add', '10.78.0.10/24', 'dev', 'mgmt-br');
    await ip('-n', node, 'link', 'set', 'ens3', 'down');
    await ip('-n', node, 'link', 'set', 'ens3', 'name', 'ens5');
    await ip('-n', node, 'link', 'set', 'ens5', 'up');
    const g = await runIdentity('10s');
    expect(g.phase).toBe('succeeded');
    expect(g.detail).toBe(`mgmt-br 10.78.0.10/24 (as the installer saw it); NIC ens3 (${MAC}) is now named ens5: NetworkManager's profile bond-slave-ens3 binds the name ens3, so ens5 is not enslaved to mgmt-bo`);
    expect((g.data as { nicsRenamed: unknown[] }).nicsRenamed).toEqual([{ kind: 'renamed', was: 'ens3', now: 'ens5', mac: MAC }]);
    expect(sink.lines.some((l) => l.includes('a management NIC was renamed') && l.includes(`MACAddress=${MAC}, Name=ens3`))).toBe(true);
  });
});
