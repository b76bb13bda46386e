/**
 * network-online against real interfaces: two network namespaces joined by a veth pair, a real
 * bridge `mgmt-br` on the node side, dnsmasq serving DHCP on the switch side and dhclient on the
 * node side. The kernel here has no bonding driver (CONFIG_BONDING is not set, modules cannot be
 * loaded), so these run without the bond (`bond: false`); bond-qemu.test.ts covers the bond in a
 * QEMU guest with Debian's kernel.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'vitest';
import { run } from '../../../../lib/exec.js';
import { Logger, MemorySink } from '../../../../lib/logger.js';
import { Redactor } from '../../../../lib/redact.js';
import { runGuards } from '../../../../agent/runner.js';
import { defaultSettings } from '../../../../agent/settings.js';

const ip = (...args: string[]) => run('ip', args, { timeoutMs: 10_000 });

/** One test's world: the node's namespace and the switch's (with the DHCP server), its dir, log and daemons. */
interface Net {
  node: string;
  sw: string;
  dir: string;
  sink: MemorySink;
  children: ChildProcess[];
}

/** The namespaces of one test, taken down when it finishes: the tests run side by side, each on its own. */
async function net(onTestFinished: (fn: () => Promise<void>) => void): Promise<Net> {
  const id = randomBytes(3).toString('hex');
  const n: Net = { node: `hvag-${id}-node`, sw: `hvag-${id}-sw`, dir: await mkdtemp(path.join(tmpdir(), 'hvagent-net-')), sink: new MemorySink(), children: [] };
  onTestFinished(async () => {
    for (const c of n.children.splice(0)) {
      if (c.exitCode === null && c.signalCode === null) {
        c.kill('SIGTERM');
        await new Promise((r) => c.once('exit', r));
      }
    }
    await ip('netns', 'del', n.node).catch(() => undefined);
    await ip('netns', 'del', n.sw).catch(() => undefined);
    await rm(n.dir, { recursive: true, force: true });
  });
  const { node, sw } = n;
  await ip('netns', 'add', node);
  await ip('netns', 'add', sw);
  await ip('-n', node, 'link', 'add', 'mgmt-br', 'type', 'bridge', 'stp_state', '0', 'forward_delay', '0');
  await ip('-n', node, 'link', 'add', 'ens3', 'type', 'veth', 'peer', 'name', 'swp1', 'netns', sw);
  await ip('-n', node, 'link', 'set', 'ens3', 'master', 'mgmt-br');
  await ip('-n', node, 'link', 'set', 'ens3', 'up');
  await ip('-n', node, 'link', 'set', 'mgmt-br', 'up');
  await ip('-n', sw, 'addr', 'add', '10.77.0.1/24', 'dev', 'swp1');
  await ip('-n', node, 'link', 'set', 'lo', 'up');
  return n;
}

function spawnTracked(n: Net, cmd: string, args: string[]): ChildProcess {
  const c = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  c.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  c.on('exit', (code) => { if (code) n.sink.write(JSON.stringify({ msg: `${cmd} exited ${code}`, stderr: err }) + '\n'); });
  n.children.push(c);
  return c;
}

async function startDnsmasq(n: Net, withRouters: boolean): Promise<void> {
  const dir = n.dir;
  spawnTracked(n, 'ip', ['netns', 'exec', n.sw, 'dnsmasq', '--keep-in-foreground', '--conf-file=/dev/null', '--port=0', '--user=root', '--group=root',
    '--interface=swp1', '--bind-interfaces', '--dhcp-range=10.77.0.50,10.77.0.99,255.255.255.0,1h', `--dhcp-leasefile=${dir}/dnsmasq.leases`,
    `--pid-file=${dir}/dnsmasq.pid`, '--dhcp-authoritative', ...(withRouters ? ['--dhcp-option=option:router,10.77.0.1'] : ['--dhcp-option=3'])]);
}

/** dhclient with a minimal script that applies the lease with `ip` (and never touches /etc/resolv.conf). */
async function startDhclient(n: Net): Promise<void> {
  const dir = n.dir;
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
  spawnTracked(n, 'ip', ['netns', 'exec', n.node, 'dhclient', '-d', '-4', '-lf', path.join(dir, 'var/lib/dhcp/dhclient.leases'), '-pf', path.join(dir, 'dhclient.pid'), '-sf', script, 'mgmt-br']);
}

function settingsFor(n: Net, deadline: string, extra: Record<string, unknown> = {}) {
  const s = defaultSettings();
  s.backoff = { initialMs: 200, maxMs: 1000 };
  s.guards['network-online'] = { deadline, netns: n.node, bond: false, stableMs: 1000, pollWindowMs: 3000, dhcpLeaseFiles: ['/var/lib/dhcp/*.leases'], resolvConf: '/etc/resolv.conf', ...extra };
  return s;
}

async function runOnce(n: Net, deadline: string, extra: Record<string, unknown> = {}) {
  const log = new Logger(n.sink, new Redactor(), 'debug');
  return runGuards({ mode: 'once', rootDir: n.dir, settings: settingsFor(n, deadline, extra), log, signal: new AbortController().signal, only: ['network-online'] });
}

async function until(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 1200 && !ok(); i++) await new Promise((r) => setTimeout(r, 50));
  if (!ok()) throw new Error(`timed out waiting until ${what}`);
}

function readLease(n: Net): string {
  try {
    return readFileSync(path.join(n.dir, 'var/lib/dhcp/dhclient.leases'), 'utf8');
  } catch {
    return '';
  }
}

function reasons(n: Net): string[] {
  return n.sink.lines.map((l) => JSON.parse(l) as { reason?: string; missing?: string }).flatMap((l) => [l.reason, l.missing]).filter((x): x is string => !!x);
}

// Each test waits on carrier, DHCP or a deadline, in namespaces of its own: they run side by side.
describe.concurrent('network-online in network namespaces', () => {
  it('waits for carrier raised late, then reports online with address and default route', async ({ expect, onTestFinished }) => {
    const n = await net(onTestFinished);
    const { node, sw } = n;
    await ip('-n', node, 'addr', 'add', '10.77.0.10/24', 'dev', 'mgmt-br');
    await ip('-n', node, 'route', 'add', 'default', 'via', '10.77.0.1');
    // The switch port is down: no carrier on ens3, so none on mgmt-br. It comes up once the agent
    // has seen it missing.
    const running = runOnce(n, '90s', { method: 'static' });
    await until('the agent saw no carrier', () => reasons(n).includes('mgmt-br has no carrier'));
    await ip('-n', sw, 'link', 'set', 'swp1', 'up');
    const r = await running;
    expect(r.status.guards[0]!.lastError).toBeUndefined();
    expect(r.ok).toBe(true);
    expect(r.status.guards[0]!.detail).toBe('mgmt-br 10.77.0.10/24, default via 10.77.0.1');
  });

  it('waits out a port flapping, and gives a diagnosis when carrier never comes', async ({ expect, onTestFinished }) => {
    const n = await net(onTestFinished);
    const { node, sw } = n;
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
        if (seenAt === undefined && reasons(n).includes('mgmt-br has no carrier')) seenAt = i;
      }
      await ip('-n', sw, 'link', 'set', 'swp1', 'up');
    })();
    const r = await runOnce(n, '90s', { method: 'static' });
    await flapper;
    expect(r.ok).toBe(true);
    expect(reasons(n)).toContain('mgmt-br has no carrier');

    // Now the port stays down: the deadline ends in a diagnosis naming the missing carrier.
    n.sink.lines.length = 0;
    await ip('-n', sw, 'link', 'set', 'swp1', 'down');
    const down = await runOnce(n, '3s', { method: 'static' });
    expect(down.ok).toBe(false);
    expect(down.status.guards[0]!.phase).toBe('failed');
    expect(down.status.guards[0]!.lastError).toMatch(/^not reached within 3 s \(\d+ attempts?\): mgmt-br has no carrier$/);
  });

  it('gets online through DHCP from dnsmasq when the server sends a router', async ({ expect, onTestFinished }) => {
    const n = await net(onTestFinished);
    const { sw } = n;
    await ip('-n', sw, 'link', 'set', 'swp1', 'up');
    await startDnsmasq(n, true);
    await startDhclient(n);
    const r = await runOnce(n, '90s');
    expect(r.status.guards[0]!.lastError).toBeUndefined();
    expect(r.status.guards[0]!.detail).toMatch(/^mgmt-br 10\.77\.0\.\d+\/24, default via 10\.77\.0\.1$/);
    const lease = await readFile(path.join(n.dir, 'var/lib/dhcp/dhclient.leases'), 'utf8');
    expect(lease).toContain('option routers 10.77.0.1');
  });

  it('names the missing routers option when the DHCP server sends none', async ({ expect, onTestFinished }) => {
    const n = await net(onTestFinished);
    const { sw } = n;
    await ip('-n', sw, 'link', 'set', 'swp1', 'up');
    await startDnsmasq(n, false);
    await startDhclient(n);
    // The lease first: the guard's deadline, waited out to its end, then only has to read it.
    await until('dhclient holds a lease', () => /fixed-address 10\.77\.0\.\d+;/.test(readLease(n)));
    const r = await runOnce(n, '4s');
    expect(r.ok).toBe(false);
    expect(r.status.guards[0]!.lastError).toMatch(
      /^not reached within 4 s \(\d+ attempts?\): no default route: the DHCP server sent no routers option \(lease \/var\/lib\/dhcp\/dhclient\.leases, mgmt-br 10\.77\.0\.\d+\/24\)$/,
    );
  });
});
