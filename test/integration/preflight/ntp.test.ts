/**
 * The NTP preflight against real NTP servers: two chronyd (Debian's chrony) on 127.0.0.1, one that
 * serves its local clock as stratum 8 and one that is not synchronised, plus a port where nothing
 * listens. chronyd runs with -x (it never touches this machine's clock) and without any upstream
 * server, so nothing leaves loopback. Then `hvinstall preflight --config` itself, end to end.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { probeNtpServer } from '../../../installer/preflight/ntp.js';
import { checkNtpServers } from '../../../installer/preflight/checks/ntp.js';

const repo = path.resolve(__dirname, '../../..');
const dir = mkdtempSync(path.join(tmpdir(), 'hv-ntp-'));
const daemons: ChildProcess[] = [];
const ports = { synced: 0, unsynced: 0, closed: 0 };

/** A UDP port nobody uses right now (bound, read, released). */
function freeUdpPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createSocket('udp4');
    s.bind(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function chronyd(name: string, port: number, local: boolean): ChildProcess {
  const conf = path.join(dir, `${name}.conf`);
  writeFileSync(conf, [`port ${port}`, 'bindaddress 127.0.0.1', 'allow 127.0.0.1', 'cmdport 0', `pidfile ${dir}/${name}.pid`, ...(local ? ['local stratum 8'] : [])].join('\n') + '\n');
  const child = spawn('chronyd', ['-x', '-d', '-u', 'root', '-f', conf], { stdio: 'ignore' });
  daemons.push(child);
  return child;
}

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error('the NTP integration test runs chronyd and needs root');
  ports.synced = await freeUdpPort();
  ports.unsynced = await freeUdpPort();
  ports.closed = await freeUdpPort();
  chronyd('synced', ports.synced, true);
  chronyd('unsynced', ports.unsynced, false);
  // chronyd answers once it has bound its socket: ask until it does, within a deadline.
  for (const port of [ports.synced, ports.unsynced]) {
    const deadline = Date.now() + 20_000;
    while (!(await probeNtpServer(`127.0.0.1:${port}`, 500)).answer) {
      if (Date.now() > deadline) throw new Error(`chronyd on 127.0.0.1:${port} did not answer within 20 s`);
    }
  }
});

afterAll(() => {
  for (const d of daemons) d.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});

describe('NTP servers asked with a 48-byte NTPv4 client packet', () => {
  it('a synchronised chronyd passes; an unsynchronised one and a closed port are warnings that say why', async () => {
    const probes = await Promise.all([`127.0.0.1:${ports.synced}`, `127.0.0.1:${ports.unsynced}`, `127.0.0.1:${ports.closed}`].map((s) => probeNtpServer(s, 2000)));
    expect(probes[0]!.answer).toEqual({ address: '127.0.0.1', leap: 0, version: 4, mode: 4, stratum: 8 });
    expect(probes[1]!.answer).toEqual({ address: '127.0.0.1', leap: 3, version: 4, mode: 4, stratum: 0 });
    const checks = checkNtpServers(probes);
    expect(checks.map((c) => [c.subject, c.result])).toEqual([
      [`127.0.0.1:${ports.synced}`, 'pass'],
      [`127.0.0.1:${ports.unsynced}`, 'warn'],
      [`127.0.0.1:${ports.closed}`, 'warn'],
    ]);
    expect(checks[1]!.message).toBe(`NTP server 127.0.0.1:${ports.unsynced} answers but is not synchronised itself (stratum 0, leap indicator 3): systemd-timesyncd will not take its time.`);
    expect(checks[2]!.message).toBe(`Failed to reach NTP servers: 127.0.0.1:${ports.closed}: 127.0.0.1:${ports.closed} refused (nothing listens on UDP ${ports.closed})`);
  });

  it('hvinstall preflight --config asks the config\'s servers and reports each in --json', () => {
    const config = path.join(dir, 'config.yaml');
    writeFileSync(config, `scheme_version: 1\ntoken: t0ken-123\nos:\n  password: rancher\n  ntp_servers: ["127.0.0.1:${ports.synced}", "127.0.0.1:${ports.unsynced}"]\ninstall:\n  mode: create\n  device: /dev/sda\n  vip: 10.0.0.5\n  vip_mode: static\n  management_interface: {interfaces: [{name: ens3}], method: dhcp}\n`);
    const r = spawnSync(process.execPath, [path.join(repo, 'dist/installer/cli.js'), 'preflight', '--config', config, '--json'], { encoding: 'utf8', timeout: 120_000 });
    const doc = JSON.parse(r.stdout) as { checks: Array<{ id: string; subject?: string; result: string }>; ntp: Array<{ server: string }> };
    expect(doc.checks.filter((c) => c.id === 'ntp.server').map((c) => [c.subject, c.result])).toEqual([
      [`127.0.0.1:${ports.synced}`, 'pass'],
      [`127.0.0.1:${ports.unsynced}`, 'warn'],
    ]);
    expect(doc.ntp.map((p) => p.server)).toEqual([`127.0.0.1:${ports.synced}`, `127.0.0.1:${ports.unsynced}`]);
  });
});
