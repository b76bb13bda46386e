/**
 * The network page's DHCP test against real DHCP (root): the console runs in a network namespace
 * joined by a veth pair to a "switch" namespace, with busybox udhcpc as the client and dnsmasq as
 * the server (or no server at all). It shows how long it waited with its deadline, offers the
 * static method when nothing answers, and refuses a lease without a router as Harvester does. No
 * DHCP traffic leaves the namespaces. This machine boots legacy BIOS, so the console also gets a
 * mount namespace in which /sys/firmware/efi exists (see install.test.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { run } from '../../../lib/exec.js';
import { Cleanup, loopDisk, tempDir } from '../install/helpers.js';
import { CLI, KEYS, Session } from '../../unit/console/session.js';
import { fill, TITLES } from '../../unit/console/walk.js';

const cleanup = new Cleanup();
afterAll(() => cleanup.run());
const ip = (...args: string[]) => run('ip', args, { timeoutMs: 10_000 });

let dir: string;
let node: string;
let sw: string;
let s: Session | undefined;
const children: ChildProcess[] = [];

beforeEach(async () => {
  const id = randomBytes(3).toString('hex');
  node = `hvcon-${id}-node`;
  sw = `hvcon-${id}-sw`;
  dir = await tempDir(cleanup, 'hvconsole-dhcp-');
  await ip('netns', 'add', node);
  await ip('netns', 'add', sw);
  await ip('-n', node, 'link', 'add', 'ens3', 'type', 'veth', 'peer', 'name', 'swp1', 'netns', sw);
  await ip('-n', node, 'link', 'set', 'lo', 'up');
  await ip('-n', node, 'link', 'set', 'ens3', 'up');
  await ip('-n', sw, 'addr', 'add', '10.78.0.1/24', 'dev', 'swp1');
  await ip('-n', sw, 'link', 'set', 'swp1', 'up');
});

afterEach(async () => {
  s?.kill();
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGTERM');
      await new Promise((r) => c.once('exit', r));
    }
  }
  await ip('netns', 'del', node).catch(() => undefined);
  await ip('netns', 'del', sw).catch(() => undefined);
});

function dnsmasq(withRouter: boolean): void {
  const c = spawn('ip', ['netns', 'exec', sw, 'dnsmasq', '--keep-in-foreground', '--conf-file=/dev/null', '--port=0', '--user=root', '--group=root', '--interface=swp1', '--bind-interfaces',
    '--dhcp-range=10.78.0.50,10.78.0.99,255.255.255.0,1h', `--dhcp-leasefile=${dir}/leases`, '--dhcp-authoritative', ...(withRouter ? ['--dhcp-option=option:router,10.78.0.1'] : ['--dhcp-option=3'])], { stdio: 'ignore' });
  children.push(c);
}

/** The console in the node namespace, a dry run, DHCP with a 4 s deadline and a hook that applies the lease. */
async function startConsole(): Promise<{ disk: string }> {
  const disk = await loopDisk(cleanup, dir, `d-${randomBytes(2).toString('hex')}`, 260);
  const hook = path.join(dir, 'udhcpc.script');
  await writeFile(hook, '#!/bin/sh\ncase "$1" in\n  bound|renew) ip addr add "$ip/${mask:-24}" dev "$interface"; [ -n "$router" ] && ip route replace default via "${router%% *}" dev "$interface" ;;\nesac\nexit 0\n');
  await chmod(hook, 0o755);
  const uefi = "mount -t tmpfs -o mode=755 hv-test-uefi /sys/firmware && mkdir /sys/firmware/efi && exec \"$0\" \"$@\"";
  s = new Session('ip', ['netns', 'exec', node, 'unshare', '--mount', '--propagation', 'slave', 'sh', '-c', uefi, process.execPath, CLI, 'console', '--dry-run',
    '--write-config', path.join(dir, 'config.yaml'), '--log', path.join(dir, 'console.log'), '--cmdline-file', '/dev/null', '--dhcp-timeout', '4', '--dhcp-script', hook]);
  await s.page(TITLES.hardware);
  await s.waitForText('Do you wish to proceed?');
  await s.keys(KEYS.enter);
  await s.page(TITLES.mode);
  await s.keys(KEYS.enter);
  await fill(s, 'Passw0rd!');
  await fill(s, 'Passw0rd!');
  await s.page(TITLES.disk);
  await s.keys('\x1b[H');
  for (let i = 0; i < 64 && !s.highlighted().includes(disk); i++) await s.keys(KEYS.down);
  for (let i = 0; i < 6 && (await s.settle()).includes(TITLES.disk); i++) await s.keys(KEYS.enter);
  await s.page(TITLES.network);
  expect(s.flat()).toContain('ens3 (');
  return { disk };
}

describe('hvinstall console: the DHCP test of the network page (network namespaces)', () => {
  it('no DHCP server: shows it waited, with the deadline, then offers the static method', async () => {
    await startConsole();
    await s!.keys(KEYS.enter, KEYS.enter, KEYS.enter, KEYS.enter);
    await s!.waitForText('Requesting an address by DHCP on ens3...');
    expect(s!.flat()).toMatch(/\d+ s \(gives up after 6 s\) Esc: stop waiting/);
    // (The question is drawn in a box over the page: its lines are checked piece by piece.)
    const text = await s!.waitForText('No DHCP answer', 30_000);
    expect(text).toContain('Requesting IP through DHCP failed: no DHCP answer on');
    expect(text).toMatch(/after \d+ s \(2 requests, 2 s apart\)/);
    expect(text).toContain('Waited 4 s (--dhcp-timeout).');
    expect(text).not.toContain('stop waiting');
    await s!.keys(KEYS.right, KEYS.enter); // Use static
    await s!.waitForText('DHCP did not answer: give the address by hand.');
    expect(s!.flat()).toContain('IPv4 Address');
    await fill(s!, '10.78.0.10/24');
    expect(s!.flat()).toMatch(/IPv4 Mask \[255\.255\.255\.0/);
  }, 120_000);

  it('a lease without a router is refused with Harvester\'s message; with a router the page goes on', async () => {
    dnsmasq(false);
    await startConsole();
    await s!.keys(KEYS.enter, KEYS.enter, KEYS.enter, KEYS.enter);
    await s!.waitForText('! No default route found. Please check the router setting on the DHCP server.', 30_000);
    const log = await readFile(path.join(dir, 'console.log'), 'utf8');
    expect(log).toMatch(/"msg":"dhcp test".*"nic":"ens3","ok":true,"detail":"ens3 got 10\.78\.0\.\d+, no router after \d+ s"/);
    for (const c of children.splice(0)) {
      c.kill('SIGTERM');
      await new Promise((r) => c.once('exit', r));
    }
    await ip('-n', node, 'addr', 'flush', 'dev', 'ens3');
    dnsmasq(true);
    await s!.keys(KEYS.enter); // the method field again: the page is submitted once more
    await s!.page(TITLES.clusterNetwork, 30_000);
    const route = await run('ip', ['-n', node, 'route', 'show', 'default']);
    expect(route.stdout).toContain('default via 10.78.0.1 dev ens3');
  }, 120_000);
});
