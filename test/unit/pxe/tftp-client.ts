/**
 * A minimal TFTP client for the tests (RFC 1350 with options): reads one file, acknowledging every
 * block; `dropFirstAck` leaves the first DATA unanswered to see the server send it again.
 */
import dgram from 'node:dgram';

export type TftpResult = { data: Buffer; oack: Map<string, string>; blocks: number; dataPackets: number } | { error: number; message: string };

export async function tftpGet(port: number, filename: string, opts: { options?: Record<string, string>; mode?: string; dropFirstAck?: boolean; write?: boolean } = {}): Promise<TftpResult> {
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
  const fields = [filename, opts.mode ?? 'octet', ...Object.entries(opts.options ?? {}).flat()];
  const rrq = Buffer.concat([Buffer.from([0, opts.write ? 2 : 1]), Buffer.from(fields.join('\0') + '\0', 'latin1')]);
  const chunks: Buffer[] = [];
  const oack = new Map<string, string>();
  let blockSize = Number(opts.options?.blksize ?? 512);
  let expected = 1;
  let blocks = 0;
  let dataPackets = 0;
  let dropped = false;
  try {
    return await new Promise<TftpResult>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`tftp ${filename}: no answer within 30 s`)), 30_000);
      const ack = (n: number, to: dgram.RemoteInfo): void => {
        const p = Buffer.alloc(4);
        p.writeUInt16BE(4, 0);
        p.writeUInt16BE(n & 0xffff, 2);
        sock.send(p, to.port, to.address);
      };
      sock.on('message', (m, r) => {
        const op = m.readUInt16BE(0);
        if (op === 5) {
          clearTimeout(timer);
          resolve({ error: m.readUInt16BE(2), message: m.subarray(4).toString('latin1').replace(/\0.*$/s, '') });
        } else if (op === 6) {
          const f = m.subarray(2).toString('latin1').split('\0');
          for (let i = 0; i + 1 < f.length; i += 2) oack.set(f[i], f[i + 1]);
          if (oack.has('blksize')) blockSize = Number(oack.get('blksize'));
          ack(0, r);
        } else if (op === 3) {
          dataPackets++;
          const n = m.readUInt16BE(2);
          if (opts.dropFirstAck && !dropped) {
            dropped = true;
            return;
          }
          if (n === (expected & 0xffff)) {
            chunks.push(Buffer.from(m.subarray(4)));
            blocks++;
            expected++;
          }
          ack(n, r);
          if (m.length - 4 < blockSize) {
            clearTimeout(timer);
            resolve({ data: Buffer.concat(chunks), oack, blocks, dataPackets });
          }
        }
      });
      sock.send(rrq, port, '127.0.0.1');
    });
  } finally {
    sock.close();
  }
}
