/**
 * Asks each configured NTP server for the time, as Harvester's console does before it accepts its
 * NTP page (harvester/harvester-installer pkg/console/util.go validateNTPServers): `host` or
 * `host:port` (123 by default), every address the name resolves to tried until one answers, one
 * 48-byte NTPv4 client packet over UDP (first byte 0x23: no leap warning, version 4, mode 3), a
 * bounded wait for the answer. Beyond Harvester, the answer is read: its leap indicator and
 * stratum say whether the server is itself synchronised (RFC 5905 section 7.3: leap 3 or stratum 0
 * mean not), which systemd-timesyncd requires of a server. The effect only; the judgement is
 * checks/ntp.ts.
 */
import { createSocket } from 'node:dgram';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';

export interface NtpAnswer {
  address: string;
  leap: number;
  version: number;
  mode: number;
  stratum: number;
}

export interface NtpProbe {
  /** As configured (os.ntp_servers). */
  server: string;
  /** The reply of the first address that answered. */
  answer?: NtpAnswer;
  /** Why no address answered, for people. */
  problem?: string;
  /** The addresses the name resolved to. */
  addresses: string[];
}

export const NTP_PORT = 123;
/** Harvester's console waits 5 s for each server. */
export const NTP_TIMEOUT_MS = 5000;

/** `host`, `host:port`, `[v6]:port`. Pure. */
export function splitNtpServer(server: string): { host: string; port: number } {
  const s = server.trim();
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(s);
  if (v6) return { host: v6[1]!, port: Number(v6[2] ?? NTP_PORT) };
  const m = /^([^:]+):(\d+)$/.exec(s);
  if (m) return { host: m[1]!, port: Number(m[2]) };
  return { host: s, port: NTP_PORT };
}

/** The client packet: 48 bytes, LI 0, VN 4, mode 3. Pure. */
export function ntpClientPacket(): Buffer {
  const p = Buffer.alloc(48);
  p[0] = 0x23;
  return p;
}

/** Reads the header of a reply; undefined when it is too short to be NTP. Pure. */
export function parseNtpReply(address: string, msg: Buffer): NtpAnswer | undefined {
  if (msg.length < 48) return undefined;
  const b = msg[0]!;
  return { address, leap: b >> 6, version: (b >> 3) & 7, mode: b & 7, stratum: msg[1]! };
}

function askOnce(address: string, port: number, timeoutMs: number): Promise<{ answer?: NtpAnswer; problem?: string }> {
  return new Promise((resolve) => {
    const sock = createSocket(isIP(address) === 6 ? 'udp6' : 'udp4');
    let done = false;
    const finish = (r: { answer?: NtpAnswer; problem?: string }): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.close();
      resolve(r);
    };
    const timer = setTimeout(() => finish({ problem: `no answer from ${address}:${port} within ${timeoutMs / 1000} s` }), timeoutMs);
    sock.on('error', (err: NodeJS.ErrnoException) => {
      // A connected UDP socket sees the ICMP port-unreachable as ECONNREFUSED at once.
      finish({ problem: err.code === 'ECONNREFUSED' ? `${address}:${port} refused (nothing listens on UDP ${port})` : `${address}:${port}: ${err.code ?? err.message}` });
    });
    sock.on('message', (msg) => {
      const answer = parseNtpReply(address, msg);
      finish(answer ? { answer } : { problem: `${address}:${port} sent ${msg.length} bytes, not an NTP reply` });
    });
    sock.connect(port, address, () => sock.send(ntpClientPacket(), (err) => err && finish({ problem: `${address}:${port}: ${err.message}` })));
  });
}

/** Probes one server; never throws, never waits past the deadline per address (and the name lookup). */
export async function probeNtpServer(server: string, timeoutMs = NTP_TIMEOUT_MS): Promise<NtpProbe> {
  const { host, port } = splitNtpServer(server);
  let addresses: string[];
  if (isIP(host)) addresses = [host];
  else {
    let timer: NodeJS.Timeout | undefined;
    try {
      const found = await Promise.race([
        lookup(host, { all: true }),
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(Object.assign(new Error('timeout'), { code: `no answer from DNS within ${timeoutMs / 1000} s` })), timeoutMs))),
      ]);
      addresses = found.map((a) => a.address);
    } catch (err) {
      return { server, addresses: [], problem: `cannot resolve ${host}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
    } finally {
      clearTimeout(timer);
    }
  }
  const problems: string[] = [];
  for (const address of addresses) {
    const r = await askOnce(address, port, timeoutMs);
    if (r.answer) return { server, addresses, answer: r.answer };
    problems.push(r.problem!);
  }
  return { server, addresses, problem: problems.join('; ') };
}

/** Probes every server at once (each bounded), in the configured order. */
export function probeNtpServers(servers: readonly string[], timeoutMs = NTP_TIMEOUT_MS): Promise<NtpProbe[]> {
  return Promise.all(servers.map((s) => probeNtpServer(s, timeoutMs)));
}
