/**
 * hvpxe's TFTP server against clients that misbehave, over real UDP on loopback (several client
 * addresses: Linux routes all of 127/8 to lo): a flood of requests that never acknowledge, with the
 * longest timeout the RFC allows; what a forged request can make the server send; a stop in the
 * middle of a transfer; block numbers past 65535 (a file over 64 MiB at 512- and 1024-byte blocks);
 * a file name with an escape sequence in the text log.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import dgram from 'node:dgram';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { waitUntil } from '../../../lib/wait.js';
import { makeTree, profilesYaml, startHvpxe, stopHvpxe, type Running, type Tree } from './harness.js';

let dir: string;
let tree: Tree;
let hv: Running | undefined;
let port: number;
const BIG = 64 * 1024 * 1024 + 1000;
let bigSha: string;
/** Several of the server's 64 KiB reads at 1468-byte blocks (44 blocks a read), ending in a part block. */
const MID = 5 * 1024 * 1024 + 333;
let mid: Buffer;

async function start(): Promise<void> {
  hv = await startHvpxe(['serve', '--root', tree.root, '--profiles', path.join(dir, 'profiles.yaml'), '--listen', '127.0.0.1:0', '--tftp', '127.0.0.1:0', '--log-format', 'text', '--state-dir', path.join(dir, 'state')]);
  const logged = (): RegExpExecArray | null => / INFO  serving .*tftp=\{"address":"127\.0\.0\.1"[^}]*"port":(\d+)\}/.exec(hv!.stderr.join(''));
  port = Number((await waitUntil(async () => { const m = logged(); return m ? { done: true as const, value: m[1] } : { done: false as const, reason: 'no serving line yet' }; }, { what: 'the TFTP port in the log', timeoutMs: 10_000, intervalMs: 20 })));
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-pxe-tftp-'));
  tree = await makeTree(dir);
  const big = randomBytes(BIG);
  bigSha = createHash('sha256').update(big).digest('hex');
  await writeFile(path.join(tree.root, 'big.img'), big);
  mid = randomBytes(MID);
  await writeFile(path.join(tree.root, 'mid.img'), mid);
  await writeFile(path.join(dir, 'profiles.yaml'), profilesYaml(tree));
  await start();
}, 120_000);

afterAll(async () => {
  await stopHvpxe(hv);
  await rm(dir, { recursive: true, force: true });
});

function rrq(filename: string, options: Record<string, string> = {}): Buffer {
  return Buffer.concat([Buffer.from([0, 1]), Buffer.from([filename, 'octet', ...Object.entries(options).flat()].join('\0') + '\0', 'latin1')]);
}

interface Seen {
  packets: Array<{ op: number; length: number; from: number }>;
  bytes: number;
  first?: Buffer;
}

/** A client socket on `address` that records what it receives and never answers. */
async function silentClient(address: string): Promise<{ sock: dgram.Socket; seen: Seen }> {
  const sock = dgram.createSocket('udp4');
  const seen: Seen = { packets: [], bytes: 0 };
  sock.on('message', (m, r) => {
    seen.packets.push({ op: m.readUInt16BE(0), length: m.length, from: r.port });
    seen.bytes += m.length;
    seen.first ??= Buffer.from(m);
  });
  await new Promise<void>((r) => sock.bind(0, address, () => r()));
  return { sock, seen };
}

/** A whole read, acknowledging every block (after `ackDelayMs`); block numbers on the wire are checked to wrap. */
async function fetchFile(address: string, filename: string, opts: { options?: Record<string, string>; ackDelayMs?: number; onBlock?: (n: number) => void; timeoutMs?: number; signal?: AbortSignal } = {}): Promise<{ data: Buffer; wraps: number }> {
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, address, () => r()));
  const chunks: Buffer[] = [];
  let blockSize = 512;
  let expected = 1;
  let wraps = 0;
  let closed = false;
  try {
    return await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${filename}: not done within ${opts.timeoutMs ?? 120_000} ms (block ${expected})`)), opts.timeoutMs ?? 120_000);
      opts.signal?.addEventListener('abort', () => {
        clearTimeout(timer);
        reject(new Error(`${filename}: given up at block ${expected}`));
      });
      const ack = (n: number, to: dgram.RemoteInfo): void => {
        const p = Buffer.from([0, 4, (n >> 8) & 0xff, n & 0xff]);
        // A delayed ACK may come due after this client gave up and closed its socket.
        const send = (): void => {
          if (!closed) sock.send(p, to.port, to.address);
        };
        if (opts.ackDelayMs) setTimeout(send, opts.ackDelayMs);
        else send();
      };
      sock.on('message', (m, r) => {
        const op = m.readUInt16BE(0);
        if (op === 5) {
          clearTimeout(timer);
          reject(new Error(`TFTP error ${m.readUInt16BE(2)}: ${m.subarray(4).toString('latin1')}`));
        } else if (op === 6) {
          const f = m.subarray(2).toString('latin1').split('\0');
          const i = f.indexOf('blksize');
          if (i >= 0) blockSize = Number(f[i + 1]);
          ack(0, r);
        } else if (op === 3) {
          const n = m.readUInt16BE(2);
          if (n === (expected & 0xffff)) {
            if (n === 0) wraps++;
            chunks.push(Buffer.from(m.subarray(4)));
            opts.onBlock?.(expected);
            expected++;
          }
          ack(n, r);
          if (m.length - 4 < blockSize) {
            clearTimeout(timer);
            resolve({ data: Buffer.concat(chunks), wraps });
          }
        }
      });
      sock.send(rrq(filename, opts.options), port, '127.0.0.1');
    });
  } finally {
    closed = true;
    sock.close();
  }
}

/** The text log's tftp lines for a client address. */
function tftpLines(address: string): string[] {
  return hv!.stderr.join('').split('\n').filter((l) => / INFO  tftp /.test(l) && l.includes(`client=${address}`));
}

// The silent transfers wait for hvpxe to give up (6 waits of 2 s) and the two long ones take tens of
// seconds: these share the server side by side, within its limits (8 transfers per address, 64 in
// all; together they hold 15). The second flood counts on every slot being free: it comes after.
describe.concurrent('side by side', () => {
  describe('hvpxe TFTP under a flood', () => {
    it('64 silent requests from one address with timeout=255 hold at most 8 slots, never a stretched timeout, and block nobody else', async ({ expect }) => {
      const clients = await Promise.all(Array.from({ length: 64 }, () => silentClient('127.0.0.2')));
      for (const c of clients) c.sock.send(rrq('k/initrd.img', { timeout: '255', blksize: '1468' }), port, '127.0.0.1');
      await waitUntil(async () => (clients.every((c) => c.seen.packets.length > 0) ? { done: true as const, value: true } : { done: false as const, reason: `${clients.filter((c) => c.seen.packets.length).length} answered` }), {
        what: 'an answer to every request',
        timeoutMs: 30_000,
        intervalMs: 50,
      });
      const oacks = clients.filter((c) => c.seen.packets[0]!.op === 6);
      const refused = clients.filter((c) => c.seen.packets[0]!.op === 5);
      expect(oacks.length).toBe(8);
      expect(refused.length).toBe(56);
      // The OACK takes the block size and leaves timeout=255 out: the default 2 s stands.
      for (const c of oacks) expect(c.seen.first!.subarray(2).toString('latin1')).toBe('blksize\u00001468\u0000');
      expect(refused[0]!.seen.first!.subarray(4).toString('latin1')).toBe('too many transfers, try again\u0000');
      // Another machine gets its file at once, flood or not.
      const got = await fetchFile('127.0.0.3', 'k/vmlinuz', { options: { blksize: '1024' }, timeoutMs: 20_000 });
      expect(got.data.equals(tree.files['k/vmlinuz'])).toBe(true);
      for (const c of clients) c.sock.close();
    });
  });

  describe('what a request can make hvpxe send before the client acknowledges anything', () => {
    it('an 18-byte request gets one 512-byte block, not its retransmissions; a request with options only the OACK', async ({ expect }) => {
      const bare = rrq('k/vmlinuz');
      expect(bare.length).toBe(18);
      const plain = await silentClient('127.0.0.4');
      plain.sock.send(bare, port, '127.0.0.1');
      const opts = await silentClient('127.0.0.6');
      opts.sock.send(rrq('k/initrd.img', { blksize: '1468', tsize: '0' }), port, '127.0.0.1');
      // Until hvpxe gives up on both (its log says so), count what came.
      await waitUntil(async () => (tftpLines('127.0.0.4').length && tftpLines('127.0.0.6').length ? { done: true as const, value: true } : { done: false as const, reason: 'transfers not ended' }), { what: 'the silent transfers to end', timeoutMs: 60_000, intervalMs: 200 });
      expect(plain.seen.packets).toEqual([{ op: 3, length: 516, from: expect.any(Number) }]);
      expect(opts.seen.packets).toHaveLength(1);
      expect(opts.seen.packets[0]).toMatchObject({ op: 6 });
      expect(opts.seen.bytes).toBeLessThan(64);
      plain.sock.close();
      opts.sock.close();
    });

    it('the same request again (the client did not get the answer) is answered again, a few times at most', async ({ expect }) => {
      const c = await silentClient('127.0.0.7');
      c.sock.send(rrq('k/initrd.img'), port, '127.0.0.1');
      await waitUntil(async () => (c.seen.packets.length ? { done: true as const, value: true } : { done: false as const, reason: 'no answer' }), { what: 'the first answer', timeoutMs: 10_000, intervalMs: 20 });
      // The client asks again, as a client whose answer was lost does, nine more times.
      for (let i = 0; i < 9; i++) {
        c.sock.send(rrq('k/initrd.img'), port, '127.0.0.1');
        await new Promise((r) => setTimeout(r, 50));
      }
      await waitUntil(async () => (tftpLines('127.0.0.7').length ? { done: true as const, value: true } : { done: false as const, reason: 'not ended' }), { what: 'the transfer to end', timeoutMs: 60_000, intervalMs: 200 });
      expect(c.seen.packets.every((p) => p.op === 3 && p.length === 516)).toBe(true);
      // The first answer and two more (TFTP.firstPacketSends), all from the transfer's one port.
      expect(c.seen.packets).toHaveLength(3);
      expect(new Set(c.seen.packets.map((p) => p.from)).size).toBe(1);
      c.sock.close();
    });
  });

  it('1468-byte blocks, which do not divide the server\'s 64 KiB reads: every byte arrives, in order, the last block short', async ({ expect }) => {
    const blocks: number[] = [];
    const got = await fetchFile('127.0.0.11', 'mid.img', { options: { blksize: '1468' }, onBlock: (n) => blocks.push(n), timeoutMs: 60_000 });
    expect(got.data.equals(mid)).toBe(true);
    expect(blocks).toHaveLength(Math.ceil(MID / 1468));
  });

  describe('block numbers past 65535', () => {
    it.for([['512 (no option)', undefined], ['1024', '1024']] as const)('a %s-byte-block transfer of a 64 MiB + 1000 byte file arrives whole', async ([, blksize], { expect }) => {
      const got = await fetchFile('127.0.0.8', 'big.img', { options: blksize ? { blksize } : {}, timeoutMs: 240_000 });
      expect(got.data.length).toBe(BIG);
      expect(createHash('sha256').update(got.data).digest('hex')).toBe(bigSha);
      expect(got.wraps).toBe(blksize ? 1 : 2);
    });
  });
});

describe('hvpxe TFTP under a flood, after the others', () => {
  it('from many addresses at once, never more than 64 transfers; the rest are told to try again', async () => {
    // Every slot free first: every transfer of the tests before has ended (the first flood's take 6
    // waits of 2 s at most), each address with its count of log lines.
    const before: Record<string, number> = { '127.0.0.2': 64, '127.0.0.3': 1, '127.0.0.4': 1, '127.0.0.6': 1, '127.0.0.7': 1, '127.0.0.8': 2, '127.0.0.11': 1 };
    const pending = (): string[] => Object.entries(before).filter(([a, n]) => tftpLines(a).length < n).map(([a]) => a);
    await waitUntil(async () => (pending().length === 0 ? { done: true as const, value: true } : { done: false as const, reason: `not ended from ${pending().join(', ')}` }), { what: 'the earlier transfers to end', timeoutMs: 60_000, intervalMs: 200 });
    const clients = await Promise.all(Array.from({ length: 12 * 8 }, (_, i) => silentClient(`127.0.1.${1 + (i % 12)}`)));
    for (const c of clients) c.sock.send(rrq('k/initrd.img', { blksize: '1024' }), port, '127.0.0.1');
    await waitUntil(async () => (clients.every((c) => c.seen.packets.length > 0) ? { done: true as const, value: true } : { done: false as const, reason: 'waiting' }), { what: 'answers', timeoutMs: 30_000, intervalMs: 50 });
    expect(clients.filter((c) => c.seen.packets[0]!.op === 6)).toHaveLength(64);
    expect(clients.filter((c) => c.seen.packets[0]!.op === 5)).toHaveLength(32);
    for (const c of clients) c.sock.close();
    const ended = (): number => Array.from({ length: 12 }, (_, i) => tftpLines(`127.0.1.${i + 1}`).length).reduce((a, b) => a + b, 0);
    await waitUntil(async () => (ended() >= 96 ? { done: true as const, value: true } : { done: false as const, reason: `${ended()} ended` }), { what: 'the second flood to end', timeoutMs: 60_000, intervalMs: 200 });
  });
});

describe('stopping', () => {
  it('a stop in the middle of a transfer ends it and exits 0, without a socket error', async () => {
    let blocks = 0;
    const giveUp = new AbortController();
    const slow = fetchFile('127.0.0.9', 'big.img', { ackDelayMs: 20, onBlock: (n) => (blocks = n), signal: giveUp.signal }).catch((e: Error) => e);
    await waitUntil(async () => (blocks >= 20 ? { done: true as const, value: true } : { done: false as const, reason: `${blocks} blocks` }), { what: 'the transfer to be under way', timeoutMs: 30_000, intervalMs: 20 });
    // An escape sequence in a requested name, for the log check below.
    const esc = await silentClient('127.0.0.10');
    esc.sock.send(rrq('\u001b[31mred\u009b2J'), port, '127.0.0.1');
    await waitUntil(async () => (tftpLines('127.0.0.10').length ? { done: true as const, value: true } : { done: false as const, reason: 'not logged' }), { what: 'the refused name in the log', timeoutMs: 30_000, intervalMs: 50 });
    esc.sock.close();
    const stopped = await stopHvpxe(hv);
    const log = hv!.stderr.join('');
    const escLine = tftpLines('127.0.0.10')[0];
    hv = undefined;
    expect(stopped).toEqual({ code: 0, signal: null });
    expect(log).not.toContain('ERR_SOCKET_DGRAM_NOT_RUNNING');
    expect(log).toMatch(/ INFO  tftp filename=big\.img client=127\.0\.0\.9 bytes=0 ok=false error="hvpxe is stopping"/);
    // Every logged field escaped: the name's ESC and CSI are shown, not sent to the terminal.
    expect(log).not.toMatch(/[\u001b\u009b]/);
    expect(escLine).toContain('filename="\\u001b[31mred\\u009b2J"');
    // The client got no more than the blocks before the stop.
    giveUp.abort();
    expect(((await slow) as Error).message).toMatch(/^big\.img: given up at block \d+$/);
  });
});
