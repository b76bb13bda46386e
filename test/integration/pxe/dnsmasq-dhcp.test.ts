/**
 * The DHCP-server configuration `hvpxe render-dnsmasq --dhcp-range … --router …` prints, run by a
 * real dnsmasq in a private network namespace and asked by a DHCP client written here (RFC 2131
 * DISCOVER with the options each kind of firmware sends: client architecture 93, vendor class 60,
 * user class 77): BIOS PXE, UEFI PXE (architectures 7 and 9), UEFI HTTP Boot (16, "HTTPClient")
 * and iPXE each get their own boot file, always with an address and a router; an HTTP Boot client
 * gets its vendor class echoed, as UEFI's HTTP Boot requires. The client sits in a second
 * namespace with a fixed address so the kernel's UDP stack receives the broadcast offers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runHvpxe } from './harness.js';

const id = randomBytes(3).toString('hex');
const serverNs = `hvpxe-dhcp-s-${id}`;
const clientNs = `hvpxe-dhcp-c-${id}`;
let dir: string;
let dnsmasq: ChildProcess | undefined;
let log = '';

interface Offer {
  yiaddr: string;
  /** The boot file: the header's file field, or option 67 (dnsmasq sends that when the client asks for it). */
  file: string;
  options: Map<number, Buffer>;
}

/** A DHCPDISCOVER with the broadcast flag, from MAC, carrying the given extra options. */
function discover(xid: number, mac: Buffer, extra: Array<[number, Buffer]>): Buffer {
  const head = Buffer.alloc(240);
  head[0] = 1; // BOOTREQUEST
  head[1] = 1; // Ethernet
  head[2] = 6;
  head.writeUInt32BE(xid, 4);
  head.writeUInt16BE(0x8000, 10); // broadcast: answer to 255.255.255.255
  mac.copy(head, 28);
  head.writeUInt32BE(0x63825363, 236); // magic cookie
  const opts: Buffer[] = [Buffer.from([53, 1, 1]), Buffer.from([55, 4, 1, 3, 60, 67])];
  for (const [code, value] of extra) opts.push(Buffer.from([code, value.length]), value);
  opts.push(Buffer.from([255]));
  return Buffer.concat([head, ...opts]);
}

function parseOffer(msg: Buffer): Offer {
  const options = new Map<number, Buffer>();
  for (let i = 240; i < msg.length && msg[i] !== 255; ) {
    const code = msg[i]!;
    if (code === 0) { i++; continue; }
    const len = msg[i + 1]!;
    options.set(code, msg.subarray(i + 2, i + 2 + len));
    i += 2 + len;
  }
  const field = msg.subarray(108, 236);
  const file = field.subarray(0, field.indexOf(0) === -1 ? 128 : field.indexOf(0)).toString() || (options.get(67)?.toString() ?? '').replace(/\0+$/, '');
  return { yiaddr: [...msg.subarray(16, 20)].join('.'), file, options };
}

/** Runs one DISCOVER from the client namespace (a child node process there) and returns the first OFFER. */
function ask(extra: Array<[number, Buffer]>): Offer {
  const xid = randomBytes(4).readUInt32BE(0);
  const mac = Buffer.from([0x52, 0x54, 0x00, ...randomBytes(3)]);
  const packet = discover(xid, mac, extra).toString('hex');
  const program = `
    const dgram = require('node:dgram');
    const s = dgram.createSocket({ type: 'udp4', reuseAddr: true });
    const timer = setTimeout(() => { process.stderr.write('no DHCPOFFER within 10 s'); process.exit(3); }, 10000);
    s.on('message', (m) => { if (m.readUInt32BE(4) === ${xid} && m[0] === 2) { clearTimeout(timer); process.stdout.write(m.toString('hex')); s.close(); } });
    s.bind(68, '0.0.0.0', () => { s.setBroadcast(true); s.send(Buffer.from('${packet}', 'hex'), 67, '255.255.255.255'); });`;
  const out = execFileSync('ip', ['netns', 'exec', clientNs, process.execPath, '-e', program], { encoding: 'utf8', timeout: 20_000 });
  return parseOffer(Buffer.from(out, 'hex'));
}

const arch = (n: number): [number, Buffer] => [93, Buffer.from([n >> 8, n & 0xff])];
const vendor = (s: string): [number, Buffer] => [60, Buffer.from(s)];
const userClass = (s: string): [number, Buffer] => [77, Buffer.from(s)];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hvpxe-dhcp-'));
  await chmod(dir, 0o755);
  const tftp = path.join(dir, 'tftp');
  await mkdir(tftp, { mode: 0o755 });
  const r = await runHvpxe(['render-dnsmasq', '--server-url', 'http://10.79.0.1:8080', '--tftp-root', tftp, '--interface', 'hvs0', '--dhcp-range', '10.79.0.100,10.79.0.120', '--router', '10.79.0.1', '--netmask', '255.255.255.0']);
  expect(r.code, r.stderr).toBe(0);
  const conf = path.join(dir, 'dnsmasq.conf');
  await writeFile(conf, r.stdout);
  // dnsmasq's own parser first: a config it refuses would fail here, naming the line.
  execFileSync('dnsmasq', ['--test', '-C', conf], { stdio: ['ignore', 'pipe', 'pipe'] });

  execFileSync('ip', ['netns', 'add', serverNs]);
  execFileSync('ip', ['netns', 'add', clientNs]);
  const ip = (ns: string, ...a: string[]): void => void execFileSync('ip', ['-n', ns, ...a]);
  ip(serverNs, 'link', 'set', 'lo', 'up');
  ip(clientNs, 'link', 'set', 'lo', 'up');
  ip(serverNs, 'link', 'add', 'hvs0', 'type', 'veth', 'peer', 'name', 'hvc0', 'netns', clientNs);
  ip(serverNs, 'addr', 'add', '10.79.0.1/24', 'dev', 'hvs0');
  ip(serverNs, 'link', 'set', 'hvs0', 'up');
  ip(clientNs, 'addr', 'add', '10.79.0.50/24', 'dev', 'hvc0');
  ip(clientNs, 'link', 'set', 'hvc0', 'up');
  ip(clientNs, 'route', 'add', '255.255.255.255', 'dev', 'hvc0');
  dnsmasq = spawn('ip', ['netns', 'exec', serverNs, 'dnsmasq', '-k', '--no-ping', '--log-facility=-', `--pid-file=${path.join(dir, 'pid')}`, `--dhcp-leasefile=${path.join(dir, 'leases')}`, '-C', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
  dnsmasq.stdout!.on('data', (d) => (log += d));
  dnsmasq.stderr!.on('data', (d) => (log += d));
  const started = Date.now();
  while (!/TFTP root is/.test(log) && dnsmasq.exitCode === null && Date.now() - started < 20_000) await new Promise((res) => setTimeout(res, 100));
  expect(`exit ${dnsmasq.exitCode}: ${log}`).toMatch(/^exit null: /);
}, 60_000);

afterAll(async () => {
  if (dnsmasq && dnsmasq.exitCode === null && dnsmasq.signalCode === null) {
    const exited = new Promise((res) => dnsmasq!.once('exit', res));
    dnsmasq.kill('SIGTERM');
    await exited;
  }
  for (const ns of [serverNs, clientNs]) execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
  await rm(dir, { recursive: true, force: true });
});

describe('hvpxe render-dnsmasq --dhcp-range: a real dnsmasq answers each kind of firmware', () => {
  const inPool = (o: Offer) => {
    const last = Number(o.yiaddr.split('.')[3]);
    expect(o.yiaddr.startsWith('10.79.0.')).toBe(true);
    expect(last >= 100 && last <= 120).toBe(true);
    expect([...(o.options.get(3) ?? [])].join('.')).toBe('10.79.0.1');
  };

  it('UEFI HTTP Boot (architecture 16, HTTPClient): the URL of ipxe.efi on hvpxe, and HTTPClient echoed', () => {
    const o = ask([arch(16), vendor('HTTPClient:Arch:00016:UNDI:003001')]);
    inPool(o);
    expect(o.file).toBe('http://10.79.0.1:8080/artifacts/ipxe.efi');
    expect(o.options.get(60)?.toString()).toBe('HTTPClient');
  });

  it.each([7, 9])('UEFI PXE (architecture %i): ipxe.efi by TFTP, no HTTPClient', (a) => {
    const o = ask([arch(a), vendor(`PXEClient:Arch:0000${a}:UNDI:003016`)]);
    inPool(o);
    expect(o.file).toBe('ipxe.efi');
    expect(o.options.get(60)?.toString()).not.toBe('HTTPClient');
  });

  it('BIOS PXE (architecture 0): undionly.kpxe', () => {
    const o = ask([arch(0), vendor('PXEClient:Arch:00000:UNDI:002001')]);
    inPool(o);
    expect(o.file).toBe('undionly.kpxe');
  });

  it('iPXE, loaded by any of them (user class iPXE): the boot script on hvpxe, never iPXE again', () => {
    for (const a of [0, 7, 16]) {
      const o = ask([arch(a), vendor(a === 16 ? 'HTTPClient:Arch:00016:UNDI:003001' : `PXEClient:Arch:0000${a}:UNDI:003016`), userClass('iPXE')]);
      inPool(o);
      expect(o.file).toBe('http://10.79.0.1:8080/boot.ipxe');
    }
  });

  it('a plain DHCP client (an installed node) gets an address and the router, and no boot file', () => {
    const o = ask([]);
    inPool(o);
    expect(o.file).toBe('');
  });
});

describe('hvpxe render-dnsmasq: the DHCP-server options are refused when incomplete', () => {
  it.each([
    [['--dhcp-range', '10.0.0.10,10.0.0.20'], '--dhcp-range START,END and --router IP go together'],
    [['--router', '10.0.0.1'], '--dhcp-range START,END and --router IP go together'],
    [['--dhcp-range', '10.0.0.10', '--router', '10.0.0.1'], "--dhcp-range must be START,END, got '10.0.0.10'"],
    [['--lease-time', '1h'], '--lease-time needs --dhcp-range'],
    [['--dhcp-range', '10.0.0.10,10.0.0.20', '--router', '10.0.0.1', '--http-boot-file', '../x.efi'], '--http-boot-file must be a path under'],
    [['--no-tftp'], '--no-tftp needs --dhcp-range'],
    [['--dhcp-range', '10.0.0.10,10.0.0.20', '--router', '10.0.0.1', '--no-tftp', '--tftp-root', '/srv/tftp'], '--no-tftp and --tftp-root contradict each other'],
  ])('%j', async (args, message) => {
    const r = await runHvpxe(['render-dnsmasq', '--server-url', 'http://10.0.0.1:8080', ...args]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
    expect(r.stdout).toBe('');
  });
});

describe('hvpxe render-dnsmasq --dhcp-range --no-tftp', () => {
  it('prints a configuration dnsmasq accepts, with no TFTP server in it (the http-boot e2e stage boots OVMF through it)', async () => {
    const r = await runHvpxe(['render-dnsmasq', '--server-url', 'http://10.79.0.1:8080', '--interface', 'hvs0', '--dhcp-range', '10.79.0.100,10.79.0.120', '--router', '10.79.0.1', '--no-tftp']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toMatch(/^(enable-tftp|tftp-root=)/m);
    expect(r.stdout).toContain('dhcp-boot=tag:!ipxe,tag:httpboot,http://10.79.0.1:8080/artifacts/ipxe.efi\n');
    const conf = path.join(dir, 'no-tftp.conf');
    await writeFile(conf, r.stdout);
    expect(execFileSync('dnsmasq', ['--test', '-C', conf], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })).toBe('');
  });
});
