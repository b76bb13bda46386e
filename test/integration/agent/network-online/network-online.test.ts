/**
 * network-online against real interfaces: two network namespaces joined by a veth pair, a real
 * bridge `mgmt-br` on the node side, dnsmasq serving DHCP on the switch side and dhclient on the
 * node side. The kernel here has no bonding driver (CONFIG_BONDING is not set, modules cannot be
 * loaded), so these run without the bond (`bond: false`); bond-qemu.test.ts covers the bond in a
 * QEMU guest with Debian's kernel.
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

let dir: string;
let node: string; // the node's namespace
let sw: string; // the switch side, with the DHCP server
const children: ChildProcess[] = [];
let sink: MemorySink;

const ip = (...args: string[]) => run('ip', args, { timeoutMs: 10_000 });

beforeEach(async () => {
  const id = randomBytes(3).toString('hex');
  node = `hvag-${id}-node`;
  sw = `hvag-${id}-sw`;
  dir = await mkdtemp(path.join(tmpdir(), 'hvagent-net-'));
  sink = new MemorySink();
  await ip('netns', 'add', node);
  await ip('netns', 'add', sw);
  await ip('-n', node, 'link', 'add', 'mgmt-br', 'type', 'bridge', 'stp_state', '0', 'forward_delay', '0');
  await ip('-n', node, 'link', 'add', 'ens3', 'type', 'veth', 'peer', 'name', 'swp1', 'netns', sw);
  await ip('-n', node, 'link', 'set', 'ens3', 'master', 'mgmt-br');
  await ip('-n', node, 'link', 'set', 'ens3', 'up');
  await ip('-n', node, 'link', 'set', 'mgmt-br', 'up');
  await ip('-n', sw, 'addr', 'add', '10.77.0.1/24', 'dev', 'swp1');
  await ip('-n', node, 'link', 'set', 'lo', 'up');
});

afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGTERM');
      await new Promise((r) => c.once('exit', r));
    }
  }
  await ip('netns', 'del', node).catch(() => undefined);
  await ip('netns', 'del', sw).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

function spawnTracked(cmd: string, args: string[]): ChildProcess {
  const c = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  c.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  c.on('exit', (code) => { if (code) sink.write(JSON.stringify({ msg: `${cmd} exited ${code}`, stderr: err }) + '\n'); });
  children.push(c);
  return c;
}

async function startDnsmasq(withRouters: boolean): Promise<void> {
  spawnTracked('ip', ['netns', 'exec', sw, 'dnsmasq', '--keep-in-foreground', '--conf-file=/dev/null', '--port=0', '--user=root', '--group=root',
    '--interface=swp1', '--bind-interfaces', '--dhcp-range=10.77.0.50,10.77.0.99,255.255.255.0,1h', `--dhcp-leasefile=${dir}/dnsmasq.leases`,
    `--pid-file=${dir}/dnsmasq.pid`, '--dhcp-authoritative', ...(withRouters ? ['--dhcp-option=option:router,10.77.0.1'] : ['--dhcp-option=3'])]);
}

/** dhclient with a minimal script that applies the lease with `ip` (and never touches /etc/resolv.conf). */
async function startDhclient(): Promise<void> {
  const script = path.join(dir, 'dhclient-script');
  await writeFile(script, `#!/bin/sh
case "$reason" in
BOUND|RENEW|REBIND|REBOOT)
  ip -4 addr flush dev "$interface" scope global
  ip addr add "$new_ip_address/$new_subnet_mask" dev "$interface"
  if [ -n "$new_routers" ]; then set -- $new_routers; ip route replace default via "$1" dev "$interface"; fi ;;
EXPIRE|FAIL|RELEASE|STOP) ip -4 addr flush dev "$interface" scope global ;;
esac
exit 0
`);
  await chmod(script, 0o755);
  await mkdir(path.join(dir, 'var/lib/dhcp'), { recursive: true });
  spawnTracked('ip', ['netns', 'exec', node, 'dhclient', '-d', '-4', '-lf', path.join(dir, 'var/lib/dhcp/dhclient.leases'), '-pf', path.join(dir, 'dhclient.pid'), '-sf', script, 'mgmt-br']);
}

function settingsFor(deadline: string, extra: Record<string, unknown> = {}) {
  const s = defaultSettings();
  s.backoff = { initialMs: 200, maxMs: 1000 };
  s.guards['network-online'] = { deadline, netns: node, bond: false, stableMs: 1000, pollWindowMs: 3000, dhcpLeaseFiles: ['/var/lib/dhcp/*.leases'], resolvConf: '/etc/resolv.conf', ...extra };
  return s;
}

async function runOnce(deadline: string, extra: Record<string, unknown> = {}) {
  const log = new Logger(sink, new Redactor(), 'debug');
  return runGuards({ mode: 'once', rootDir: dir, settings: settingsFor(deadline, extra), log, signal: new AbortController().signal, only: ['network-online'] });
}

async function until(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 1200 && !ok(); i++) await new Promise((r) => setTimeout(r, 50));
  if (!ok()) throw new Error(`timed out waiting until ${what}`);
}

function reasons(): string[] {
  return sink.lines.map((l) => JSON.parse(l) as { reason?: string; missing?: string }).flatMap((l) => [l.reason, l.missing]).filter((x): x is string => !!x);
}

describe('network-online in network namespaces', () => {
  it('waits for carrier raised late, then reports online with address and default route', async () => {
    await ip('-n', node, 'addr', 'add', '10.77.0.10/24', 'dev', 'mgmt-br');
    await ip('-n', node, 'route', 'add', 'default', 'via', '10.77.0.1');
    // The switch port is down: no carrier on ens3, so none on mgmt-br. It comes up once the agent
    // has seen it missing.
    const running = runOnce('90s', { method: 'static' });
    await until('the agent saw no carrier', () => reasons().includes('mgmt-br has no carrier'));
    await ip('-n', sw, 'link', 'set', 'swp1', 'up');
    const r = await running;
    expect(r.status.guards[0]!.lastError).toBeUndefined();
    expect(r.ok).toBe(true);
    expect(r.status.guards[0]!.detail).toBe('mgmt-br 10.77.0.10/24, default via 10.77.0.1');
  });

  it('waits out a port flapping, and gives a diagnosis when carrier never comes', async () => {
    await ip('-n', node, 'addr', 'add', '10.77.0.10/24', 'dev', 'mgmt-br');
    await ip('-n', node, 'route', 'add', 'default', 'via', '10.77.0.1');
    await ip('-n', sw, 'link', 'set', 'swp1', 'up');
    // Flap the port (down 400 ms, up 400 ms) until the agent has seen the carrier go, a few more
    // times after that, then leave it up.
    let seenAt: number | undefined;
    const flapper = (async () => {
      for (let i = 0; i < 200 && (seenAt === undefined || i < seenAt + 6); i++) {
        await ip('-n', sw, 'link', 'set', 'swp1', i % 2 === 0 ? 'down' : 'up');
        await new Promise((r) => setTimeout(r, 400));
        if (seenAt === undefined && reasons().includes('mgmt-br has no carrier')) seenAt = i;
      }
      await ip('-n', sw, 'link', 'set', 'swp1', 'up');
    })();
    const r = await runOnce('90s', { method: 'static' });
    await flapper;
    expect(r.ok).toBe(true);
    expect(reasons()).toContain('mgmt-br has no carrier');

    // Now the port stays down: the deadline ends in a diagnosis naming the missing carrier.
    sink.lines.length = 0;
    await ip('-n', sw, 'link', 'set', 'swp1', 'down');
    const down = await runOnce('3s', { method: 'static' });
    expect(down.ok).toBe(false);
    expect(down.status.guards[0]!.phase).toBe('failed');
    expect(down.status.guards[0]!.lastError).toMatch(/^not reached within 3 s \(\d+ attempts?\): mgmt-br has no carrier$/);
  });

  it('gets online through DHCP from dnsmasq when the server sends a router', async () => {
    await ip('-n', sw, 'link', 'set', 'swp1', 'up');
    await startDnsmasq(true);
    await startDhclient();
    const r = await runOnce('90s');
    expect(r.status.guards[0]!.lastError).toBeUndefined();
    expect(r.status.guards[0]!.detail).toMatch(/^mgmt-br 10\.77\.0\.\d+\/24, default via 10\.77\.0\.1$/);
    const lease = await readFile(path.join(dir, 'var/lib/dhcp/dhclient.leases'), 'utf8');
    expect(lease).toContain('option routers 10.77.0.1');
  });

  it('names the missing routers option when the DHCP server sends none', async () => {
    await ip('-n', sw, 'link', 'set', 'swp1', 'up');
    await startDnsmasq(false);
    await startDhclient();
    const r = await runOnce('20s');
    expect(r.ok).toBe(false);
    expect(r.status.guards[0]!.lastError).toMatch(
      /^not reached within 20 s \(\d+ attempts?\): no default route: the DHCP server sent no routers option \(lease \/var\/lib\/dhcp\/dhclient\.leases, mgmt-br 10\.77\.0\.\d+\/24\)$/,
    );
  });
});
