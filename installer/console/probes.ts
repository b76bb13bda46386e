/**
 * What the console asks of the network before it accepts a page, as Harvester's console does
 * (harvester/harvester-installer pkg/console/install_panels.go, util.go): a DHCP lease on the
 * management NIC and a default route, a VIP leased by DHCP, the cluster's /ping, the NTP servers,
 * an SSH key URL and a remote config. Every probe has a deadline and says what it waited for.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describeError } from '../../lib/errors.js';

export interface ProbeResult {
  ok: boolean;
  /** For people: what happened (the lease, the error, what was waited for and how long). */
  detail: string;
  value?: string;
}

export interface DhcpOptions {
  /** The DHCP client command (busybox udhcpc). */
  client: string[];
  /** udhcpc's hook that configures the lease (the live system's); without one the lease is only reported. */
  script?: string;
  timeoutMs: number;
  /** Scratch directory for the reporting hook. */
  runDir: string;
  /** Request for this hardware address (the VIP's), through a macvlan on the NIC. */
  hwAddr?: string;
}

/** The DHCP client to run: udhcpc on PATH, else busybox's. */
export function defaultDhcpClient(): string[] {
  for (const dir of (process.env.PATH ?? '').split(':')) if (dir && existsSync(path.join(dir, 'udhcpc'))) return ['udhcpc'];
  return ['busybox', 'udhcpc'];
}

/** The live system's udhcpc hook, when there is one. */
export const LIVE_DHCP_SCRIPT = '/etc/hv-live/udhcpc.script';

/**
 * One DHCP exchange on `nic`: udhcpc sends DISCOVER every 2 s until the deadline (-t tries, -T 2)
 * and quits (-n) when nothing answers. The reporting hook records the leased address; when the live
 * system's hook exists it is called too, so the lease is applied as the live init applies its own.
 */
export async function dhcpLease(nic: string, opts: DhcpOptions): Promise<ProbeResult> {
  const { run } = await import('../../lib/exec.js');
  await mkdir(opts.runDir, { recursive: true });
  const iface = opts.hwAddr ? `hvvip${process.pid % 1000}` : nic;
  const leaseFile = path.join(opts.runDir, `lease-${iface}`);
  const hook = path.join(opts.runDir, `udhcpc-${iface}.sh`);
  const chain = opts.script && !opts.hwAddr ? `[ -x '${opts.script}' ] && '${opts.script}' "$@"\n` : '';
  await writeFile(hook, `#!/bin/sh\n${chain}case "$1" in bound|renew) echo "$ip $router" > '${leaseFile}' ;; esac\nexit 0\n`, { mode: 0o755 });
  await rm(leaseFile, { force: true });
  const tries = Math.max(1, Math.round(opts.timeoutMs / 2000));
  const started = Date.now();
  try {
    if (opts.hwAddr) await run('ip', ['link', 'add', 'link', nic, 'name', iface, 'address', opts.hwAddr, 'type', 'macvlan'], { timeoutMs: 10_000 });
    if (opts.hwAddr) await run('ip', ['link', 'set', iface, 'up'], { timeoutMs: 10_000 });
    const [cmd, ...pre] = opts.client;
    const r = await run(cmd!, [...pre, '-i', iface, '-n', '-q', '-f', '-t', String(tries), '-T', '2', '-A', '1', '-s', hook], {
      timeoutMs: opts.timeoutMs + 15_000,
      allowFailure: true,
    });
    const waited = Math.round((Date.now() - started) / 1000);
    const lease = await readFile(leaseFile, 'utf8').catch(() => '');
    if (r.exitCode === 0 && lease.trim()) {
      const [ip, router] = lease.trim().split(/\s+/);
      return { ok: true, value: ip, detail: `${iface} got ${ip}${router ? `, router ${router}` : ', no router'} after ${waited} s` };
    }
    const why = (r.stderr || r.stdout).trim().split('\n').filter(Boolean).pop();
    return { ok: false, detail: `no DHCP answer on ${nic} after ${waited} s (${tries} requests, 2 s apart)${why ? `: ${why}` : ''}` };
  } catch (err) {
    return { ok: false, detail: describeError(err).replace(/^error: /, '') };
  } finally {
    if (opts.hwAddr) await run('ip', ['link', 'del', iface], { allowFailure: true, timeoutMs: 10_000 }).catch(() => undefined);
    await rm(hook, { force: true });
  }
}

/** A default route in the main table (/proc/net/route destination 0 with mask 0). */
export async function hasDefaultRoute(procRoute = '/proc/net/route'): Promise<boolean> {
  const text = await readFile(procRoute, 'utf8').catch(() => '');
  return text
    .split('\n')
    .slice(1)
    .some((l) => {
      const f = l.trim().split(/\s+/);
      return f[1] === '00000000' && f[7] === '00000000';
    });
}

/** Harvester's NTP check (installer/preflight/ntp.ts asks; any NTP reply within the deadline counts, as in Harvester's console). */
export async function ntpReachable(server: string, timeoutMs = 5000): Promise<ProbeResult> {
  const { probeNtpServer } = await import('../preflight/ntp.js');
  const p = await probeNtpServer(server, timeoutMs);
  return p.answer ? { ok: true, detail: `${server} answered` } : { ok: false, detail: `${server}: ${p.problem}` };
}

/** GET https://<server>/ping with certificate checks off, as Harvester's console checks a management address. */
export async function pingServer(url: string, timeoutMs = 15_000): Promise<ProbeResult> {
  const { Agent, request } = await import('undici');
  const target = `${url.replace(/\/+$/, '')}/ping`;
  const agent = new Agent({ connect: { rejectUnauthorized: false, timeout: timeoutMs } });
  try {
    const r = await request(target, { dispatcher: agent, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
    await r.body.dump();
    return r.statusCode >= 200 && r.statusCode < 400 ? { ok: true, detail: `${target}: HTTP ${r.statusCode}` } : { ok: false, detail: `${target}: HTTP ${r.statusCode}` };
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
    return { ok: false, detail: `${target}: ${e.cause?.code ?? e.code ?? e.message}` };
  } finally {
    await agent.close().catch(() => undefined);
  }
}

/** The SSH public keys at an http(s) URL (e.g. https://github.com/<user>.keys), checked as Harvester's console checks them (installer/remote/ssh-keys.ts). */
export async function fetchSshKeys(url: string, timeoutMs = 15_000): Promise<{ keys: string[]; error?: string }> {
  const [{ fetchBytes }, { parseFetchedKeys }] = await Promise.all([import('../../lib/http-fetch.js'), import('../remote/ssh-keys.js')]);
  try {
    const r = await fetchBytes(url, { timeoutMs, attempts: 2, retryDelayMs: 1000, maxBytes: 1024 * 1024 });
    const parsed = parseFetchedKeys(r.body.toString('utf8'));
    return 'keys' in parsed ? { keys: parsed.keys } : { keys: [], error: parsed.problem };
  } catch (err) {
    return { keys: [], error: (err as Error).message };
  }
}
