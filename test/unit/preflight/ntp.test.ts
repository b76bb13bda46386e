/**
 * The NTP probe's packet and its reading of replies, against UDP responders on 127.0.0.1 that
 * answer as servers do, as Harvester's own test mock does (48 zero bytes), too short, or not at all.
 * Real NTP servers (chronyd) are the integration test's (test/integration/preflight/ntp.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSocket, type Socket } from 'node:dgram';
import { ntpClientPacket, parseNtpReply, probeNtpServer, splitNtpServer } from '../../../installer/preflight/ntp.js';
import { checkNtpServers } from '../../../installer/preflight/checks/ntp.js';

const sockets: Socket[] = [];
const received: Buffer[] = [];

async function responder(reply: (req: Buffer) => Buffer | undefined): Promise<number> {
  const s = createSocket('udp4');
  sockets.push(s);
  s.on('message', (msg, from) => {
    received.push(msg);
    const out = reply(msg);
    if (out) s.send(out, from.port, from.address);
  });
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  return s.address().port;
}

function serverReply(li: number, stratum: number): Buffer {
  const b = Buffer.alloc(48);
  b[0] = (li << 6) | (4 << 3) | 4;
  b[1] = stratum;
  return b;
}

let good = 0;
let zeros = 0;
let short = 0;
let silent = 0;
beforeAll(async () => {
  good = await responder(() => serverReply(0, 2));
  zeros = await responder(() => Buffer.alloc(48));
  short = await responder(() => Buffer.alloc(10));
  silent = await responder(() => undefined);
});
afterAll(() => sockets.forEach((s) => s.close()));

describe('NTP probe', () => {
  it('splits host and port as Harvester does (123 by default)', () => {
    expect(splitNtpServer('0.suse.pool.ntp.org')).toEqual({ host: '0.suse.pool.ntp.org', port: 123 });
    expect(splitNtpServer('10.0.0.1:1123')).toEqual({ host: '10.0.0.1', port: 1123 });
    expect(splitNtpServer('[fd00::1]:123')).toEqual({ host: 'fd00::1', port: 123 });
  });

  it('sends one 48-byte packet: leap 0, version 4, client mode', async () => {
    expect([...ntpClientPacket().subarray(0, 2)]).toEqual([0x23, 0]);
    received.length = 0;
    await probeNtpServer(`127.0.0.1:${good}`, 1000);
    expect(received.map((m) => [m.length, m[0]])).toEqual([[48, 0x23]]);
  });

  it('a server reply passes; the 48 zero bytes of Harvester\'s mock answer but say stratum 0', async () => {
    const [a, z] = await Promise.all([probeNtpServer(`127.0.0.1:${good}`, 1000), probeNtpServer(`127.0.0.1:${zeros}`, 1000)]);
    expect(a.answer).toEqual({ address: '127.0.0.1', leap: 0, version: 4, mode: 4, stratum: 2 });
    expect(z.answer).toEqual(parseNtpReply('127.0.0.1', Buffer.alloc(48)));
    expect(checkNtpServers([a, z]).map((c) => c.result)).toEqual(['pass', 'warn']);
  });

  it('a short reply, and no reply at all within the deadline, are problems that say so', async () => {
    const [s, q] = await Promise.all([probeNtpServer(`127.0.0.1:${short}`, 1000), probeNtpServer(`127.0.0.1:${silent}`, 300)]);
    expect(s.problem).toBe(`127.0.0.1:${short} sent 10 bytes, not an NTP reply`);
    expect(q.problem).toBe(`no answer from 127.0.0.1:${silent} within 0.3 s`);
    expect(checkNtpServers([q])[0]).toMatchObject({
      id: 'ntp.server',
      result: 'warn',
      skippable: true,
      message: `Failed to reach NTP servers: 127.0.0.1:${silent}: no answer from 127.0.0.1:${silent} within 0.3 s`,
    });
  });

  it('a name is resolved (localhost, from /etc/hosts) and its addresses tried until one answers', async () => {
    // The responder listens on 127.0.0.1 only: a ::1 listed first is refused and the next address tried.
    const p = await probeNtpServer(`localhost:${good}`, 1000);
    expect(p.addresses).toContain('127.0.0.1');
    expect(p.answer).toEqual({ address: '127.0.0.1', leap: 0, version: 4, mode: 4, stratum: 2 });
  });
});
