/**
 * A read-only TFTP server (RFC 1350, with the option extension RFC 2347 and blksize, timeout and
 * tsize, RFC 2348/2349) for what firmware, shim and Debian's signed grub fetch: they speak TFTP
 * only. Octet mode, one ephemeral socket per transfer, lock-step with retransmission; every wait
 * has a deadline. What a name means is the caller's `resolve` (files under --root, or a script
 * rendered for the asking machine); writes are refused.
 */
import dgram from 'node:dgram';
import type { FileHandle } from 'node:fs/promises';
import type { Logger } from '../lib/logger.js';

export const TFTP = {
  /** RFC 1350's block size, used when the client asks for none. */
  defaultBlock: 512,
  /** Larger blocks than this would fragment on a 1500-byte Ethernet. */
  maxBlock: 1468,
  defaultTimeoutMs: 2_000,
  retries: 5,
  maxTransfers: 64,
} as const;

const OP = { RRQ: 1, WRQ: 2, DATA: 3, ACK: 4, ERROR: 5, OACK: 6 } as const;
const ERR = { undefined: 0, notFound: 1, access: 2, illegal: 4, option: 8 } as const;

/** What a name resolves to: bytes rendered now, or an opened file (closed by the server). */
export type TftpSource = { data: Buffer } | { fh: FileHandle; size: number };

export interface TftpRequest {
  filename: string;
  mode: string;
  options: Map<string, string>;
}

/** Parses a read or write request; undefined when the packet is not one. Pure. */
export function parseRequest(msg: Buffer): ({ op: 'read' | 'write' } & TftpRequest) | undefined {
  if (msg.length < 4) return undefined;
  const op = msg.readUInt16BE(0);
  if (op !== OP.RRQ && op !== OP.WRQ) return undefined;
  const fields = msg.subarray(2).toString('latin1').split('\0');
  // A well-formed request ends with a NUL, so the last field is empty.
  if (fields.length < 3 || fields.at(-1) !== '') return undefined;
  const [filename, mode, ...rest] = fields.slice(0, -1);
  if (!filename || rest.length % 2 !== 0) return undefined;
  const options = new Map<string, string>();
  for (let i = 0; i < rest.length; i += 2) options.set(rest[i].toLowerCase(), rest[i + 1]);
  return { op: op === OP.RRQ ? 'read' : 'write', filename, mode: mode.toLowerCase(), options };
}

/** The options we accept and their answers (RFC 2347: the server may leave out any it does not take). Pure. */
export function negotiate(asked: Map<string, string>, size: number): { blockSize: number; timeoutMs: number; reply: Map<string, string> } {
  const reply = new Map<string, string>();
  let blockSize: number = TFTP.defaultBlock;
  let timeoutMs: number = TFTP.defaultTimeoutMs;
  const blk = Number(asked.get('blksize'));
  if (asked.has('blksize') && Number.isInteger(blk) && blk >= 8) {
    blockSize = Math.min(blk, TFTP.maxBlock);
    reply.set('blksize', String(blockSize));
  }
  const t = Number(asked.get('timeout'));
  if (asked.has('timeout') && Number.isInteger(t) && t >= 1 && t <= 255) {
    timeoutMs = t * 1000;
    reply.set('timeout', String(t));
  }
  if (asked.get('tsize') === '0') reply.set('tsize', String(size));
  return { blockSize, timeoutMs, reply };
}

export function errorPacket(code: number, message: string): Buffer {
  return Buffer.concat([u16(OP.ERROR), u16(code), Buffer.from(`${message}\0`, 'latin1')]);
}

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n & 0xffff);
  return b;
}

export interface TftpServerOptions {
  host: string;
  port: number;
  log: Logger;
  /** What a name means for the asking client; undefined: not found. */
  resolve: (filename: string, client: string) => Promise<TftpSource | undefined>;
  /** Called once a transfer ends (for the request log and /metrics). */
  done?: (e: { filename: string; client: string; bytes: number; ok: boolean; error?: string }) => void;
}

export class TftpServer {
  private socket?: dgram.Socket;
  private readonly transfers = new Set<dgram.Socket>();

  constructor(private readonly opts: TftpServerOptions) {}

  get address(): { address: string; port: number } | undefined {
    return this.socket?.address();
  }

  async start(): Promise<void> {
    const socket = dgram.createSocket(this.opts.host.includes(':') ? 'udp6' : 'udp4');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(this.opts.port, this.opts.host, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    socket.on('error', (err) => this.opts.log.error('tftp socket error', { error: err.message }));
    socket.on('message', (msg, rinfo) => void this.request(msg, rinfo));
    this.socket = socket;
  }

  async close(): Promise<void> {
    for (const t of this.transfers) t.close();
    this.transfers.clear();
    const s = this.socket;
    this.socket = undefined;
    if (s) await new Promise<void>((r) => s.close(() => r()));
  }

  private async request(msg: Buffer, rinfo: dgram.RemoteInfo): Promise<void> {
    const req = parseRequest(msg);
    if (!req) return; // stray packets on the request port are not ours to answer
    const client = rinfo.address;
    const peer = dgram.createSocket(rinfo.family === 'IPv6' ? 'udp6' : 'udp4');
    const fail = (code: number, message: string): void => {
      peer.send(errorPacket(code, message), rinfo.port, rinfo.address, () => peer.close());
      this.opts.done?.({ filename: req.filename, client, bytes: 0, ok: false, error: message });
    };
    await new Promise<void>((r) => peer.bind(0, this.opts.host, () => r()));
    if (req.op === 'write') return fail(ERR.access, 'hvpxe serves TFTP read-only');
    if (req.mode !== 'octet') return fail(ERR.illegal, `only octet mode is served, not ${req.mode}`);
    if (this.transfers.size >= TFTP.maxTransfers) return fail(ERR.undefined, 'too many transfers, try again');
    let source: TftpSource | undefined;
    try {
      source = await this.opts.resolve(req.filename, client);
    } catch (err) {
      this.opts.log.error('tftp request failed', { filename: req.filename, client, error: (err as Error).message });
      return fail(ERR.undefined, 'internal error');
    }
    if (!source) return fail(ERR.notFound, 'file not found');
    this.transfers.add(peer);
    let bytes = 0;
    let error: string | undefined;
    try {
      bytes = await send(peer, rinfo, source, req.options);
    } catch (err) {
      error = (err as Error).message;
    } finally {
      this.transfers.delete(peer);
      peer.close();
      if ('fh' in source) await source.fh.close().catch(() => undefined);
    }
    this.opts.done?.({ filename: req.filename, client, bytes, ok: error === undefined, ...(error ? { error } : {}) });
  }
}

/** Sends the source to the client in lock-step; resolves with the bytes acknowledged. */
async function send(peer: dgram.Socket, to: dgram.RemoteInfo, source: TftpSource, asked: Map<string, string>): Promise<number> {
  const size = 'data' in source ? source.data.length : source.size;
  const { blockSize, timeoutMs, reply } = negotiate(asked, size);
  const inbox: Buffer[] = [];
  let wake: (() => void) | undefined;
  peer.on('message', (m, r) => {
    if (r.address !== to.address || r.port !== to.port) {
      // RFC 1350: a packet from another port is answered with an error and does not end the transfer.
      peer.send(errorPacket(5, 'unknown transfer ID'), r.port, r.address);
      return;
    }
    inbox.push(m);
    wake?.();
  });
  const transmit = (p: Buffer): Promise<void> => new Promise((res, rej) => peer.send(p, to.port, to.address, (e) => (e ? rej(e) : res())));
  /** Sends p until the client acknowledges `block` (16 bits, wrapping); throws after the retries. */
  const exchange = async (p: Buffer, block: number): Promise<void> => {
    for (let attempt = 0; attempt <= TFTP.retries; attempt++) {
      await transmit(p);
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const m = inbox.shift();
        if (!m) {
          await new Promise<void>((r) => {
            const t = setTimeout(r, deadline - Date.now());
            wake = () => {
              clearTimeout(t);
              r();
            };
          });
          wake = undefined;
          continue;
        }
        const op = m.length >= 2 ? m.readUInt16BE(0) : 0;
        if (op === OP.ERROR) throw new Error(`the client ended the transfer: ${m.subarray(4).toString('latin1').replace(/\0.*$/s, '')}`);
        if (op === OP.ACK && m.length >= 4 && m.readUInt16BE(2) === (block & 0xffff)) return;
        // a duplicate ACK of an earlier block: wait on (resending on it would start the sorcerer's apprentice)
      }
    }
    throw new Error(`no acknowledgement of block ${block} after ${TFTP.retries + 1} tries`);
  };
  if (reply.size > 0) {
    const fields = [...reply].flatMap(([k, v]) => [k, v]).join('\0') + '\0';
    await exchange(Buffer.concat([u16(OP.OACK), Buffer.from(fields, 'latin1')]), 0);
  }
  const buf = Buffer.alloc(4 + blockSize);
  buf.writeUInt16BE(OP.DATA, 0);
  let sent = 0;
  for (let block = 1; ; block++) {
    const off = (block - 1) * blockSize;
    const want = Math.max(0, Math.min(blockSize, size - off));
    let n: number;
    if ('data' in source) n = source.data.copy(buf, 4, off, off + want);
    else n = want === 0 ? 0 : (await source.fh.read(buf, 4, want, off)).bytesRead;
    buf.writeUInt16BE(block & 0xffff, 2);
    await exchange(buf.subarray(0, 4 + n), block);
    sent += n;
    // The block shorter than blockSize (possibly empty) ends the transfer.
    if (n < blockSize) return sent;
  }
}
