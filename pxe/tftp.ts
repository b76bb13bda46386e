/**
 * A read-only TFTP server for what firmware, shim and Debian's signed grub fetch (they speak TFTP
 * only): octet mode, one ephemeral socket per transfer, lock-step with retransmission. The protocol
 * and its limits are tftp-protocol.ts (at most one small packet before the client's first ACK, a
 * fixed cap on every transfer, concurrency caps per server and per client); this file drives it
 * over UDP. What a name means is the caller's `resolve`; writes are refused. close() ends every
 * transfer and waits for them, so a stop mid-transfer neither throws nor leaves a socket behind.
 */
import dgram from 'node:dgram';
import type { FileHandle } from 'node:fs/promises';
import type { Logger } from '../lib/logger.js';
import { admit, ERR, errorPacket, LockStep, negotiate, oackPacket, OP, parseClientPacket, parseRequest, TFTP, type Negotiated } from './tftp-protocol.js';

export { TFTP, negotiate, parseRequest, errorPacket } from './tftp-protocol.js';

/** What a name resolves to: bytes rendered now, or an opened file (closed by the server). */
export type TftpSource = { data: Buffer } | { fh: FileHandle; size: number };

export interface TftpDone {
  filename: string;
  client: string;
  bytes: number;
  ok: boolean;
  error?: string;
  /** Not started: over a concurrency cap. */
  refused?: boolean;
}

export interface TftpServerOptions {
  host: string;
  port: number;
  log: Logger;
  /** What a name means for the asking client; undefined: not found. */
  resolve: (filename: string, client: string) => Promise<TftpSource | undefined>;
  /** Called once a transfer ends (for the request log and /metrics). */
  done?: (e: TftpDone) => void;
}


/**
 * How much of a file one read takes. Lock-step sends one block per ACK; a thread-pool read per block
 * sat between each ACK and the next block (a 1024-byte-block transfer on loopback took 1.8x as long
 * as dnsmasq's), so the blocks come from memory and the file is read 64 KiB at a time.
 */
const READ_AHEAD_BYTES = 64 * 1024;

/** One read transfer on its own socket. */
class Transfer {
  private readonly inbox: Buffer[] = [];
  private wake: (() => void) | undefined;
  private aborted = false;
  private firstSends = 0;
  private packet: Buffer = Buffer.alloc(0);
  private readonly lock: LockStep;
  private readonly data: Buffer;
  /** The file's bytes from `aheadStart`: `aheadBytes` of them (a whole number of blocks, or to the end of the file). */
  private ahead: Buffer | undefined;
  private aheadStart = 0;
  private aheadBytes = 0;

  constructor(
    private readonly peer: dgram.Socket,
    private readonly to: dgram.RemoteInfo,
    private readonly source: TftpSource,
    private readonly n: Negotiated,
  ) {
    const size = 'data' in source ? source.data.length : source.size;
    this.lock = new LockStep(size, n.blockSize, n.reply.size > 0);
    this.data = Buffer.alloc(4 + n.blockSize);
    peer.on('message', (m, r) => this.receive(m, r));
  }

  private receive(m: Buffer, r: dgram.RemoteInfo): void {
    if (r.address !== this.to.address || r.port !== this.to.port) {
      // RFC 1350: a packet from another port is answered with an error and does not end the transfer.
      this.send(errorPacket(ERR.unknownTid, 'unknown transfer ID'), r.port, r.address);
      return;
    }
    this.inbox.push(m);
    this.wake?.();
  }

  private send(p: Buffer, port = this.to.port, address = this.to.address): void {
    if (this.aborted) return;
    try {
      this.peer.send(p, port, address, () => undefined);
    } catch {
      // the socket closed under us (a stop): the transfer is ending anyway
    }
  }

  /** The client asked again before its first ACK: it did not get the first packet. */
  resendFirst(): void {
    if (!this.lock.acked && this.firstSends > 0 && this.firstSends < TFTP.firstPacketSends) {
      this.firstSends++;
      this.send(this.packet);
    }
  }

  abort(): void {
    this.aborted = true;
    this.wake?.();
  }

  private async build(): Promise<Buffer> {
    const current = this.lock.current;
    if (current === 0) return oackPacket(this.n.reply);
    const { offset, length } = this.lock.range(current);
    this.data.writeUInt16BE(OP.DATA, 0);
    this.data.writeUInt16BE(LockStep.wire(current), 2);
    const got = 'data' in this.source ? this.source.data.copy(this.data, 4, offset, offset + length) : await this.fileBytes(this.source.fh, offset, length);
    return this.data.subarray(0, 4 + got);
  }

  /** Copies a block of the file into the packet, reading the next READ_AHEAD_BYTES when it is not in memory. */
  private async fileBytes(fh: FileHandle, offset: number, length: number): Promise<number> {
    if (length === 0) return 0;
    if (!this.ahead || offset < this.aheadStart || offset + length > this.aheadStart + this.aheadBytes) {
      this.ahead ??= Buffer.alloc(Math.max(1, Math.floor(READ_AHEAD_BYTES / this.n.blockSize)) * this.n.blockSize);
      this.aheadBytes = (await fh.read(this.ahead, 0, this.ahead.length, offset)).bytesRead;
      this.aheadStart = offset;
    }
    const at = offset - this.aheadStart;
    return this.ahead.copy(this.data, 4, at, Math.min(at + length, this.aheadBytes));
  }

  /** Waits for the next packet until `until`; undefined at the deadline. */
  private async next(until: number): Promise<Buffer | undefined> {
    while (!this.aborted) {
      const m = this.inbox.shift();
      if (m) return m;
      const left = until - Date.now();
      if (left <= 0) return undefined;
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.wake = () => {
          clearTimeout(t);
          r();
        };
      });
      this.wake = undefined;
    }
    throw new Error('hvpxe is stopping');
  }

  /** Sends until the client acknowledges the current packet; false when the transfer is complete. */
  private async exchange(deadline: number): Promise<boolean> {
    this.packet = await this.build();
    for (let attempt = 0; attempt <= TFTP.retries; attempt++) {
      // Before the first ACK nothing goes out unasked: a resend answers the client's repeated request.
      if (attempt === 0 || this.lock.acked) this.send(this.packet);
      if (attempt === 0 && !this.lock.acked) this.firstSends = 1;
      const until = Math.min(deadline, Date.now() + this.n.timeoutMs);
      for (let m = await this.next(until); m; m = await this.next(until)) {
        const p = parseClientPacket(m);
        if (p.kind === 'error') throw new Error(`the client ended the transfer: ${p.message}`);
        if (p.kind !== 'ack') continue;
        const r = this.lock.ack(p.block);
        if (r !== 'ignore') return r === 'next';
      }
      if (Date.now() >= deadline) throw new Error(`transfer not finished within ${TFTP.transferCapMs / 1000} s`);
    }
    throw new Error(`no acknowledgement of ${this.lock.current === 0 ? 'the options' : `block ${this.lock.current}`} after ${TFTP.retries + 1} waits of ${this.n.timeoutMs / 1000} s`);
  }

  /** Whether the client has not acknowledged anything yet. */
  get awaitingFirstAck(): boolean {
    return !this.lock.acked;
  }

  /** Runs the transfer to its last acknowledged block; resolves with the file's size. */
  async run(): Promise<number> {
    const deadline = Date.now() + TFTP.transferCapMs;
    while (await this.exchange(deadline));
    return this.lock.size;
  }
}

export class TftpServer {
  private socket?: dgram.Socket;
  /** Transfers admitted and not ended (resolving their name or sending), counted when admitted. */
  private admitted = 0;
  private readonly perClient = new Map<string, number>();
  private readonly running = new Map<Transfer, Promise<void>>();
  /**
   * Transfers by the client's address and port, from the request on (null while its name is being
   * resolved): a repeated request is the same transfer, answered again only before the first ACK.
   */
  private readonly byPeer = new Map<string, Transfer | null>();
  private closing = false;

  constructor(private readonly opts: TftpServerOptions) {}

  get address(): { address: string; port: number } | undefined {
    return this.socket?.address();
  }

  /** Transfers in progress. */
  get active(): number {
    return this.admitted;
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
    socket.on('message', (msg, rinfo) => this.request(msg, rinfo));
    this.socket = socket;
  }

  /** Ends every transfer, waits for them (bounded), then closes the request socket. */
  async close(): Promise<void> {
    this.closing = true;
    for (const t of this.running.keys()) t.abort();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled(this.running.values()), new Promise((r) => (timer = setTimeout(r, 2_000)))]);
    clearTimeout(timer);
    const s = this.socket;
    this.socket = undefined;
    if (s) await new Promise<void>((r) => s.close(() => r()));
  }

  /** An error answer from the request socket (no transfer, no new socket). */
  private reject(rinfo: dgram.RemoteInfo, code: number, message: string): void {
    try {
      this.socket?.send(errorPacket(code, message), rinfo.port, rinfo.address, () => undefined);
    } catch {
      // stopping
    }
  }

  private request(msg: Buffer, rinfo: dgram.RemoteInfo): void {
    if (this.closing) return;
    const req = parseRequest(msg);
    if (!req) return; // stray packets on the request port are not ours to answer
    const client = rinfo.address;
    const key = `${client}:${rinfo.port}`;
    if (this.byPeer.has(key)) {
      const same = this.byPeer.get(key);
      if (same?.awaitingFirstAck) same.resendFirst();
      return;
    }
    const done = (e: Omit<TftpDone, 'filename' | 'client'>): void => this.opts.done?.({ filename: req.filename, client, ...e });
    if (req.op === 'write') {
      this.reject(rinfo, ERR.access, 'hvpxe serves TFTP read-only');
      return done({ bytes: 0, ok: false, error: 'write request' });
    }
    if (req.mode !== 'octet') {
      this.reject(rinfo, ERR.illegal, 'only octet mode is served');
      return done({ bytes: 0, ok: false, error: `mode ${req.mode.slice(0, 20)}` });
    }
    const admission = admit(this.admitted, this.perClient.get(client) ?? 0);
    if (admission !== 'ok') {
      this.reject(rinfo, ERR.undefined, 'too many transfers, try again');
      return done({ bytes: 0, ok: false, error: admission, refused: true });
    }
    // Counted now, before anything is awaited: concurrent requests cannot pass the caps together.
    this.admitted++;
    this.perClient.set(client, (this.perClient.get(client) ?? 0) + 1);
    this.byPeer.set(key, null);
    void this.serve(req.filename, req.options, rinfo, key)
      .then(done)
      .finally(() => {
        this.byPeer.delete(key);
        this.admitted--;
        const n = (this.perClient.get(client) ?? 1) - 1;
        if (n > 0) this.perClient.set(client, n);
        else this.perClient.delete(client);
      });
  }

  private async serve(filename: string, options: Map<string, string>, rinfo: dgram.RemoteInfo, key: string): Promise<Omit<TftpDone, 'filename' | 'client'>> {
    let source: TftpSource | undefined;
    try {
      source = await this.opts.resolve(filename, rinfo.address);
    } catch (err) {
      this.opts.log.error('tftp request failed', { filename, client: rinfo.address, error: (err as Error).message });
      this.reject(rinfo, ERR.undefined, 'internal error');
      return { bytes: 0, ok: false, error: 'internal error' };
    }
    if (!source) {
      this.reject(rinfo, ERR.notFound, 'file not found');
      return { bytes: 0, ok: false, error: 'file not found' };
    }
    if (this.closing) {
      if ('fh' in source) await source.fh.close().catch(() => undefined);
      return { bytes: 0, ok: false, error: 'hvpxe is stopping' };
    }
    return this.transfer(source, options, rinfo, key);
  }

  private async transfer(source: TftpSource, options: Map<string, string>, rinfo: dgram.RemoteInfo, key: string): Promise<Omit<TftpDone, 'filename' | 'client'>> {
    const peer = dgram.createSocket(rinfo.family === 'IPv6' ? 'udp6' : 'udp4');
    peer.on('error', () => undefined);
    const size = 'data' in source ? source.data.length : source.size;
    const t = new Transfer(peer, rinfo, source, negotiate(options, size));
    let finish = (): void => undefined;
    this.running.set(t, new Promise<void>((r) => (finish = r)));
    this.byPeer.set(key, t);
    try {
      await new Promise<void>((r) => peer.bind(0, this.opts.host, () => r()));
      return { bytes: await t.run(), ok: true };
    } catch (err) {
      return { bytes: 0, ok: false, error: (err as Error).message };
    } finally {
      this.running.delete(t);
      peer.close();
      if ('fh' in source) await source.fh.close().catch(() => undefined);
      finish();
    }
  }
}
