/**
 * TFTP's packets and decisions (RFC 1350, options RFC 2347, blksize RFC 2348, timeout and tsize
 * RFC 2349), apart from any socket: what a request asks, which options hvpxe takes, whether a new
 * transfer is admitted, and the lock-step of one read transfer (which packet to send, what an ACK
 * means, when block numbers wrap). Pure; tftp.ts drives it over UDP.
 *
 * What it guarantees against a client that lies or never answers:
 * - before the client's first ACK, hvpxe sends one packet no larger than the RFCs allow for the
 *   request (an OACK, or a 512-byte DATA block when no option was taken: blksize applies only once
 *   the OACK is acknowledged), and sends it again only when the same client asks again: a forged
 *   source address gets one small packet per request, never a stream of retransmissions;
 * - a client can ask for a retransmission timeout of at most TFTP.maxTimeoutS (a larger one is not
 *   acknowledged, so the default stands), and every transfer ends by TFTP.transferCapMs;
 * - TFTP.maxTransfers at once, TFTP.maxPerClient from one address.
 */

export const TFTP = {
  /** RFC 1350's block size, used when the client asks for none. */
  defaultBlock: 512,
  /** Larger blocks than this would fragment on a 1500-byte Ethernet (1500 - IP 20 - UDP 8 - TFTP 4). */
  maxBlock: 1468,
  /** The retransmission timeout when the client asks for none. */
  defaultTimeoutMs: 2_000,
  /** The largest timeout option acknowledged (seconds). */
  maxTimeoutS: 5,
  retries: 5,
  /** Every transfer ends by then, however the client paces it (a 92 MiB initrd takes ~2 min on a LAN). */
  transferCapMs: 10 * 60_000,
  maxTransfers: 64,
  maxPerClient: 8,
  /** Sends of the first packet, before the first ACK, each answering a request from the client. */
  firstPacketSends: 3,
} as const;

export const OP = { RRQ: 1, WRQ: 2, DATA: 3, ACK: 4, ERROR: 5, OACK: 6 } as const;
export const ERR = { undefined: 0, notFound: 1, access: 2, illegal: 4, unknownTid: 5, option: 8 } as const;

export interface TftpRequest {
  filename: string;
  mode: string;
  options: Map<string, string>;
}

/** Parses a read or write request; undefined when the packet is not one. */
export function parseRequest(msg: Buffer): ({ op: 'read' | 'write' } & TftpRequest) | undefined {
  if (msg.length < 2) return undefined;
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

export interface Negotiated {
  blockSize: number;
  timeoutMs: number;
  /** The OACK's options; empty: no OACK, the transfer starts with DATA 1 at 512 bytes. */
  reply: Map<string, string>;
}

/** The options hvpxe takes and their answers (RFC 2347: the server may leave out any it does not take). */
export function negotiate(asked: Map<string, string>, size: number): Negotiated {
  const reply = new Map<string, string>();
  let blockSize: number = TFTP.defaultBlock;
  let timeoutMs: number = TFTP.defaultTimeoutMs;
  const blk = Number(asked.get('blksize'));
  // An option not asked for is NaN here, which no check passes.
  if (Number.isInteger(blk) && blk >= 8 && blk <= 65464) {
    blockSize = Math.min(blk, TFTP.maxBlock);
    reply.set('blksize', String(blockSize));
  }
  const t = Number(asked.get('timeout'));
  if (Number.isInteger(t) && t >= 1 && t <= TFTP.maxTimeoutS) {
    timeoutMs = t * 1000;
    reply.set('timeout', String(t));
  }
  if (asked.get('tsize') === '0') reply.set('tsize', String(size));
  return { blockSize, timeoutMs, reply };
}

export type Admission = 'ok' | 'server full' | 'client full';

/** Whether a new transfer may start, given those running now. */
export function admit(running: number, fromClient: number): Admission {
  if (running >= TFTP.maxTransfers) return 'server full';
  if (fromClient >= TFTP.maxPerClient) return 'client full';
  return 'ok';
}

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n & 0xffff);
  return b;
}

export function errorPacket(code: number, message: string): Buffer {
  return Buffer.concat([u16(OP.ERROR), u16(code), Buffer.from(`${message}\0`, 'latin1')]);
}

export function oackPacket(reply: Map<string, string>): Buffer {
  return Buffer.concat([u16(OP.OACK), Buffer.from([...reply].flatMap(([k, v]) => [k, v]).join('\0') + '\0', 'latin1')]);
}

/** What a packet from the client says, for the transfer. */
export type ClientPacket = { kind: 'ack'; block: number } | { kind: 'error'; message: string } | { kind: 'other' };

export function parseClientPacket(m: Buffer): ClientPacket {
  const op = m.length >= 2 ? m.readUInt16BE(0) : 0;
  if (op === OP.ACK && m.length >= 4) return { kind: 'ack', block: m.readUInt16BE(2) };
  if (op === OP.ERROR) return { kind: 'error', message: m.subarray(4, 4 + 200).toString('latin1').replace(/\0.*$/s, '') };
  return { kind: 'other' };
}

/**
 * One read transfer's lock-step. Packet 0 is the OACK (when options were taken); packet n ≥ 1 is
 * DATA block n, whose 16-bit number on the wire wraps from 65535 to 0 (what grub, iPXE and edk2
 * expect past 32 MiB at 512-byte blocks); the transfer ends with the first block shorter than
 * blockSize (empty when the size is a multiple of it).
 */
export class LockStep {
  /** The packet being sent and waited on. */
  current: number;
  /** Whether the client has acknowledged anything yet (before that, nothing is sent unasked). */
  acked = false;
  finished = false;

  constructor(
    readonly size: number,
    readonly blockSize: number,
    withOack: boolean,
  ) {
    this.current = withOack ? 0 : 1;
  }

  /** The bytes of the file block n carries. */
  range(n: number): { offset: number; length: number } {
    const offset = (n - 1) * this.blockSize;
    return { offset, length: Math.max(0, Math.min(this.blockSize, this.size - offset)) };
  }

  /** The number DATA block n carries on the wire. */
  static wire(n: number): number {
    return n & 0xffff;
  }

  /** The last block: the first one shorter than blockSize. */
  get lastBlock(): number {
    return Math.floor(this.size / this.blockSize) + 1;
  }

  /**
   * An ACK for wire number `block`: 'next' when it acknowledges the current packet (then the next
   * is current), 'done' when that was the last block, 'ignore' for a duplicate or stray ACK (sending
   * again on it would start the sorcerer's apprentice, RFC 1123 4.2.3.1).
   */
  ack(block: number): 'next' | 'done' | 'ignore' {
    if (this.finished || block !== LockStep.wire(this.current)) return 'ignore';
    this.acked = true;
    if (this.current === this.lastBlock) {
      this.finished = true;
      return 'done';
    }
    this.current++;
    return 'next';
  }
}
