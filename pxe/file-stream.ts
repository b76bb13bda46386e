/**
 * Streams a byte range of an open file to an HTTP response: artifact bodies where sendfile is not
 * used (zero-copy-send.ts: TLS, no addon, a queued pipelined response, every sending thread busy).
 * Two reused buffers: the next chunk is read (in libuv's thread pool) while the previous one is
 * written, nothing is allocated per chunk (flat memory, little GC) and a slow client holds at most
 * two chunks. Callbacks rather than promises: the event loop is hvpxe's one thread for every
 * socket, and per chunk it does one read completion and one write, nothing more.
 */
import { read } from 'node:fs';
import type http from 'node:http';
import type { FileHandle } from 'node:fs/promises';

/**
 * Sends bytes [start, end] of `fh` in chunks of `chunk` bytes; resolves to the bytes handed to the
 * socket once the response is complete or abandoned (client gone, write or read failed, the file
 * shrank: the connection is destroyed, so the client sees a short body). Never resolves while a
 * read is in flight: the caller closes `fh` next, and its descriptor must not be reused under a read.
 */
export function streamFileRange(fh: FileHandle, res: http.ServerResponse, start: number, end: number, chunk: number): Promise<number> {
  return new Promise((resolve) => {
    const bufs = [Buffer.allocUnsafeSlow(chunk), Buffer.allocUnsafeSlow(chunk)];
    let next = start; // the first byte not yet read
    let sent = 0;
    let which = 0; // the buffer the next read fills
    let ready: Buffer | undefined; // read, not yet written
    let reading = false;
    let writing = false;
    let stopped = false; // short file, read or write error, client gone: no more reads or writes
    let ending = false;
    let settled = false;
    const settle = (): void => {
      if (settled || reading) return;
      if (stopped) {
        settled = true;
        res.off('close', onClose);
        res.destroy();
        resolve(sent);
      } else if (next > end && !ready && !writing && !ending) {
        ending = true;
        res.end(() => {
          settled = true;
          res.off('close', onClose);
          resolve(sent);
        });
      }
    };
    // A write or end callback may never come once the socket is gone: 'close' ends the wait.
    const onClose = (): void => {
      stopped = true;
      settle();
    };
    const startRead = (): void => {
      const buf = bufs[which]!;
      which ^= 1;
      reading = true;
      read(fh.fd, buf, 0, Math.min(buf.length, end - next + 1), next, (err, n) => {
        reading = false;
        if (err || n === 0) stopped = true; // n === 0: the file shrank under us
        else {
          next += n;
          ready = n === buf.length ? buf : buf.subarray(0, n);
          startWrite();
        }
        settle();
      });
    };
    const startWrite = (): void => {
      if (writing || stopped || !ready) return;
      const c = ready;
      ready = undefined;
      writing = true;
      sent += c.length;
      res.write(c, (err) => {
        writing = false;
        if (err) stopped = true;
        else startWrite();
        settle();
      });
      // The other buffer's write has completed (only one is in flight): read into it meanwhile.
      if (next <= end) startRead();
    };
    res.on('close', onClose);
    startRead();
  });
}
