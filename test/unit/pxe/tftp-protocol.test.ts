/**
 * TFTP's decisions apart from sockets: the options taken (the blksize cap 1468, the timeout cap, the
 * default retransmission timeout), admission by the caps per server and per client, and the
 * lock-step with block numbers wrapping past 65535.
 */
import { describe, expect, it } from 'vitest';
import { admit, ERR, errorPacket, LockStep, negotiate, oackPacket, OP, parseClientPacket, parseRequest, TFTP } from '../../../pxe/tftp-protocol.js';

const opts = (o: Record<string, string>): Map<string, string> => new Map(Object.entries(o));

describe('negotiate', () => {
  it('without options: RFC 1350 blocks of 512, the 2 s default timeout, no OACK', () => {
    expect(negotiate(opts({}), 10)).toEqual({ blockSize: 512, timeoutMs: 2000, reply: new Map() });
    expect(TFTP.defaultTimeoutMs).toBe(2000);
  });

  it('caps blksize at 1468 (one Ethernet frame) and refuses nonsense', () => {
    expect(negotiate(opts({ blksize: '9000' }), 1)).toMatchObject({ blockSize: 1468, reply: opts({ blksize: '1468' }) });
    expect(negotiate(opts({ blksize: '1468' }), 1).blockSize).toBe(1468);
    expect(negotiate(opts({ blksize: '1024' }), 1)).toMatchObject({ blockSize: 1024, reply: opts({ blksize: '1024' }) });
    expect(negotiate(opts({ blksize: '8' }), 1).blockSize).toBe(8);
    for (const bad of ['7', '0', '-5', '1e3x', '', '65465', '1.5']) expect(negotiate(opts({ blksize: bad }), 1)).toEqual({ blockSize: 512, timeoutMs: 2000, reply: new Map() });
  });

  it('takes a timeout of 1 to 5 s and leaves a larger one unacknowledged (the client cannot stretch a transfer)', () => {
    expect(negotiate(opts({ timeout: '1' }), 1)).toMatchObject({ timeoutMs: 1000, reply: opts({ timeout: '1' }) });
    expect(negotiate(opts({ timeout: '5' }), 1)).toMatchObject({ timeoutMs: 5000, reply: opts({ timeout: '5' }) });
    for (const big of ['6', '255', '0', 'x']) expect(negotiate(opts({ timeout: big }), 1)).toEqual({ blockSize: 512, timeoutMs: 2000, reply: new Map() });
  });

  it('answers tsize=0 with the size, and nothing else asked', () => {
    expect(negotiate(opts({ tsize: '0' }), 1234).reply).toEqual(opts({ tsize: '1234' }));
    expect(negotiate(opts({ tsize: '5' }), 1234).reply).toEqual(new Map());
    expect(negotiate(opts({ windowsize: '16', multicast: '' }), 1).reply).toEqual(new Map());
  });

  it('an OACK is small whatever was asked', () => {
    const p = oackPacket(negotiate(opts({ blksize: '65464', timeout: '5', tsize: '0' }), 92 * 1024 * 1024).reply);
    expect(p.length).toBeLessThan(64);
    expect(p.subarray(2).toString('latin1')).toBe('blksize\u00001468\u0000timeout\u00005\u0000tsize\u000096468992\u0000');
  });
});

describe('the limits and packets, exactly', () => {
  it('are these', () => {
    expect(TFTP).toEqual({ defaultBlock: 512, maxBlock: 1468, defaultTimeoutMs: 2000, maxTimeoutS: 5, retries: 5, transferCapMs: 600_000, maxTransfers: 64, maxPerClient: 8, firstPacketSends: 3 });
    expect(OP).toEqual({ RRQ: 1, WRQ: 2, DATA: 3, ACK: 4, ERROR: 5, OACK: 6 });
    expect(ERR).toEqual({ undefined: 0, notFound: 1, access: 2, illegal: 4, unknownTid: 5, option: 8 });
  });

  it('an ERROR packet: opcode 5, the code, the message, a NUL', () => {
    expect([...errorPacket(1, 'file not found')]).toEqual([0, 5, 0, 1, ...Buffer.from('file not found'), 0]);
    expect([...errorPacket(0x102, 'x')]).toEqual([0, 5, 1, 2, 0x78, 0]);
  });

  it('takes the largest blksize RFC 2348 allows (capped), not one more', () => {
    expect(negotiate(opts({ blksize: '65464' }), 1).reply).toEqual(opts({ blksize: '1468' }));
    expect(negotiate(opts({ blksize: '1469' }), 1).blockSize).toBe(1468);
    expect(negotiate(opts({ blksize: '1467' }), 1).blockSize).toBe(1467);
  });
});

describe('admit', () => {
  it('caps the transfers per server and per client address', () => {
    expect(admit(0, 0)).toBe('ok');
    expect(admit(TFTP.maxTransfers - 1, TFTP.maxPerClient - 1)).toBe('ok');
    expect(admit(TFTP.maxTransfers, 0)).toBe('server full');
    expect(admit(3, TFTP.maxPerClient)).toBe('client full');
    expect(TFTP.maxPerClient).toBeLessThan(TFTP.maxTransfers);
  });
});

describe('parseRequest and client packets', () => {
  it('reads a request with its options (names case-insensitive) and refuses malformed ones', () => {
    const rrq = Buffer.concat([Buffer.from([0, 1]), Buffer.from('grub/auto?mac=x\0octet\0BLKSIZE\x001024\0', 'latin1')]);
    expect(parseRequest(rrq)).toEqual({ op: 'read', filename: 'grub/auto?mac=x', mode: 'octet', options: opts({ blksize: '1024' }) });
    expect(parseRequest(Buffer.from([0, 2, 0x61, 0, 0x6f, 0]))).toMatchObject({ op: 'write', filename: 'a' });
    for (const bad of [Buffer.from([0, 1]), Buffer.from([0, 3, 0x61, 0, 0x6f, 0]), Buffer.from([0, 1, 0x61, 0, 0x6f]), Buffer.from([0, 1, 0, 0x6f, 0]), Buffer.concat([Buffer.from([0, 1]), Buffer.from('a\0octet\0blksize\0', 'latin1')])]) {
      expect(parseRequest(bad)).toBeUndefined();
    }
  });

  it('tells an ACK, an ERROR (message bounded) and anything else apart', () => {
    expect(parseClientPacket(Buffer.from([0, 4, 0xff, 0xff]))).toEqual({ kind: 'ack', block: 65535 });
    expect(parseClientPacket(Buffer.concat([Buffer.from([0, 5, 0, 0]), Buffer.from(`${'x'.repeat(500)}\0`)]))).toEqual({ kind: 'error', message: 'x'.repeat(200) });
    expect(parseClientPacket(Buffer.from([0, 4, 1]))).toEqual({ kind: 'other' });
    expect(parseClientPacket(Buffer.from([0, 3, 0, 1]))).toEqual({ kind: 'other' });
  });
});

describe('LockStep', () => {
  it('starts with the OACK (packet 0) when options were taken, else DATA 1; the first ACK is remembered', () => {
    const withOack = new LockStep(10, 512, true);
    expect(withOack.current).toBe(0);
    expect(withOack.acked).toBe(false);
    expect(withOack.ack(1)).toBe('ignore');
    expect(withOack.ack(0)).toBe('next');
    expect(withOack.acked).toBe(true);
    expect(withOack.current).toBe(1);
    expect(new LockStep(10, 512, false).current).toBe(1);
  });

  it('ends with the first short block, an empty one when the size is a multiple of the block size', () => {
    expect(new LockStep(1000, 512, false).lastBlock).toBe(2);
    expect(new LockStep(1024, 512, false).lastBlock).toBe(3);
    expect(new LockStep(1024, 512, false).range(3)).toEqual({ offset: 1024, length: 0 });
    expect(new LockStep(0, 512, false).lastBlock).toBe(1);
    const s = new LockStep(600, 512, false);
    expect(s.ack(1)).toBe('next');
    expect(s.ack(1)).toBe('ignore'); // a duplicate ACK: no resend (the sorcerer's apprentice)
    expect(s.ack(2)).toBe('done');
    expect(s.finished).toBe(true);
    expect(s.ack(2)).toBe('ignore');
  });

  it('wraps block numbers from 65535 to 0 (a 92 MiB initrd at 1024-byte blocks is ~94,000 blocks)', () => {
    const size = 92 * 1024 * 1024 + 17;
    const s = new LockStep(size, 1024, false);
    expect(LockStep.wire(65535)).toBe(65535);
    expect(LockStep.wire(65536)).toBe(0);
    expect(LockStep.wire(65537)).toBe(1);
    let acks = 0;
    const wireSeen = new Set<number>();
    for (let r = s.ack(LockStep.wire(s.current)); r !== 'done'; r = s.ack(LockStep.wire(s.current))) {
      acks++;
      wireSeen.add(LockStep.wire(s.current));
      // An ACK for the same wire number one wrap earlier (65536 blocks ago) is not this block's.
      if (s.current === 70_000) expect(s.ack(LockStep.wire(s.current) + 1)).toBe('ignore');
    }
    expect(acks + 1).toBe(Math.floor(size / 1024) + 1);
    expect(wireSeen.has(0)).toBe(true);
    expect(s.range(s.lastBlock)).toEqual({ offset: 92 * 1024 * 1024, length: 17 });
  });
});
