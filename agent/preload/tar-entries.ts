/**
 * Reads a tar stream entry by entry without copying bodies: ustar and GNU headers, PAX path, link
 * and size records, GNU long names, base-256 sizes (POSIX.1-2001 pax and GNU tar's formats, as Go's
 * archive/tar reads them, which is what ctr uses). A header whose checksum is wrong, or a stream that
 * ends inside an entry, is a TarFormatError: the archive is corrupt or cut short.
 */

const BLOCK = 512;

export class TarFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TarFormatError';
  }
}

export interface TarEntry {
  /** The path as written (PAX or GNU long name when there is one). */
  name: string;
  size: number;
  /** '0' regular (also for the old '\0'), '2' symlink, '5' directory, … */
  type: string;
  linkname: string;
}

function cString(b: Buffer): string {
  const end = b.indexOf(0);
  return b.subarray(0, end === -1 ? b.length : end).toString('utf8');
}

/** A numeric header field: octal text, or base-256 (GNU) when its first byte has the high bit set. */
function headerNumber(b: Buffer, what: string): number {
  if (b[0]! & 0x80) {
    let n = b[0]! & 0x7f;
    for (let i = 1; i < b.length; i++) n = n * 256 + b[i]!;
    if (!Number.isSafeInteger(n)) throw new TarFormatError(`a tar header's ${what} is too large`);
    return n;
  }
  // Go's reader trims spaces and NULs on both sides of the digits.
  const text = b.toString('latin1').replace(/^[ \0]+|[ \0]+$/g, '');
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text)) throw new TarFormatError(`a tar header's ${what} is not a number (${JSON.stringify(text)}): not a tar, or corrupt`);
  return parseInt(text, 8);
}

/** Go's archive/tar accepts a checksum of the header summed as unsigned or as signed bytes. */
function checksumMatches(h: Buffer): boolean {
  const stored = headerNumber(h.subarray(148, 156), 'checksum');
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK; i++) {
    const b = i >= 148 && i < 156 ? 0x20 : h[i]!;
    unsigned += b;
    signed += b > 127 ? b - 256 : b;
  }
  return stored === unsigned || stored === signed;
}

/** PAX extended header records: "<length> <key>=<value>\n". */
function paxRecords(body: Buffer): Map<string, string> {
  const out = new Map<string, string>();
  let pos = 0;
  while (pos < body.length) {
    const space = body.indexOf(0x20, pos);
    const len = space === -1 ? NaN : Number(body.subarray(pos, space).toString('ascii'));
    if (!Number.isInteger(len) || len <= 0 || pos + len > body.length) throw new TarFormatError('a PAX header record is malformed');
    const record = body.subarray(space + 1, pos + len - 1).toString('utf8');
    const eq = record.indexOf('=');
    if (eq > 0) out.set(record.slice(0, eq), record.slice(eq + 1));
    pos += len;
  }
  return out;
}

/** Entries of a tar stream, each body read in pieces before the next entry is asked for. */
export class TarEntries {
  /** Bytes of the stream taken so far. */
  consumed = 0;
  private readonly chunks: Buffer[] = [];
  private buffered = 0;
  private done = false;
  private readonly source: AsyncIterator<Buffer>;
  /** Body bytes of the current entry not yet read, and its padding. */
  private bodyLeft = 0;
  private padLeft = 0;

  /**
   * The first read, asked at once: a stream's async iterator attaches to the stream only when first
   * asked, and a child process's pipe left unread when the child exits is set flowing by Node
   * (child_process flushStdio), its bytes dropped.
   */
  private first: Promise<IteratorResult<Buffer>> | undefined;

  constructor(source: AsyncIterable<Buffer>) {
    this.source = source[Symbol.asyncIterator]();
    this.first = this.source.next();
    this.first.catch(() => undefined);
  }

  /** Takes the next non-empty chunk of the source; false at its end. */
  private async fill(): Promise<boolean> {
    while (!this.done) {
      const pending = this.first ?? this.source.next();
      this.first = undefined;
      const r = await pending;
      if (r.done) {
        this.done = true;
        break;
      }
      if (r.value.length === 0) continue;
      this.chunks.push(r.value);
      this.buffered += r.value.length;
      return true;
    }
    return false;
  }

  /** Up to `max` bytes as they were buffered (no copy); empty only at the end of the stream. */
  private async take(max: number): Promise<Buffer> {
    if (this.buffered === 0 && !(await this.fill())) return Buffer.alloc(0);
    const first = this.chunks[0]!;
    const piece = first.length <= max ? first : first.subarray(0, max);
    if (piece === first) this.chunks.shift();
    else this.chunks[0] = first.subarray(max);
    this.buffered -= piece.length;
    this.consumed += piece.length;
    return piece;
  }

  private async exactly(n: number, what: string): Promise<Buffer | undefined> {
    const parts: Buffer[] = [];
    let got = 0;
    while (got < n) {
      const p = await this.take(n - got);
      if (p.length === 0) {
        if (got === 0 && what === 'header') return undefined;
        throw new TarFormatError(`the tar ends inside a ${what} (${got} of ${n} bytes): the archive is cut short`);
      }
      parts.push(p);
      got += p.length;
    }
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  }

  private async skip(n: number, what: string): Promise<void> {
    while (n > 0) {
      const p = await this.take(n);
      if (p.length === 0) throw new TarFormatError(`the tar ends inside ${what}: the archive is cut short`);
      n -= p.length;
    }
  }

  /** The current entry's next body piece (at most `max` bytes), or undefined at its end. */
  async read(max: number): Promise<Buffer | undefined> {
    if (this.bodyLeft === 0) return undefined;
    const p = await this.take(Math.min(max, this.bodyLeft));
    if (p.length === 0) throw new TarFormatError(`the tar ends inside an entry (${this.bodyLeft} bytes missing): the archive is cut short`);
    this.bodyLeft -= p.length;
    return p;
  }

  /** The current entry's whole body; refuses one over `limit` bytes. */
  async readAll(limit: number, name: string): Promise<Buffer> {
    if (this.bodyLeft > limit) throw new TarFormatError(`${name} is ${this.bodyLeft} bytes, more than the ${limit} a metadata file may have`);
    const body = (await this.exactly(this.bodyLeft, 'entry')) ?? Buffer.alloc(0);
    this.bodyLeft = 0;
    return body;
  }

  /** Reads whatever is left of the stream, to its end, and drops it. */
  async drain(): Promise<void> {
    while ((await this.take(Number.MAX_SAFE_INTEGER)).length > 0);
  }

  /** The next entry, the rest of the current one skipped; undefined at the end of the archive. */
  async next(): Promise<TarEntry | undefined> {
    await this.skip(this.bodyLeft + this.padLeft, 'an entry');
    this.bodyLeft = this.padLeft = 0;
    let pax = new Map<string, string>();
    let longName: string | undefined;
    let longLink: string | undefined;
    for (;;) {
      const h = await this.exactly(BLOCK, 'header');
      // Go's reader, too, ends at a clean end of stream between entries.
      if (!h) return undefined;
      // The end is two zero blocks (or the stream's end after one); a lone zero block inside is not a tar.
      if (h.every((b) => b === 0)) {
        const second = await this.exactly(BLOCK, 'header');
        if (second && !second.every((b) => b === 0)) throw new TarFormatError(`a zero block at byte ${this.consumed - 2 * BLOCK} is followed by more entries: not a tar, or corrupt`);
        return undefined;
      }
      if (!checksumMatches(h)) throw new TarFormatError(`a tar header's checksum is wrong at byte ${this.consumed - BLOCK}: not a tar, or corrupt`);
      const type = h[156] === 0 ? '0' : String.fromCharCode(h[156]!);
      let size = headerNumber(h.subarray(124, 136), 'size');
      const magic = h.subarray(257, 263).toString('latin1');
      const prefix = magic === 'ustar\0' ? cString(h.subarray(345, 500)) : '';
      const base = cString(h.subarray(0, 100));
      if (type === 'x' || type === 'g' || type === 'L' || type === 'K') {
        const body = (await this.exactly(size, 'extended header')) ?? Buffer.alloc(0);
        await this.skip((BLOCK - (size % BLOCK)) % BLOCK, 'an extended header');
        if (type === 'x') pax = paxRecords(body);
        else if (type === 'L') longName = cString(body);
        else if (type === 'K') longLink = cString(body);
        continue;
      }
      const paxSize = pax.get('size');
      if (paxSize !== undefined) {
        size = Number(paxSize);
        if (!Number.isSafeInteger(size) || size < 0) throw new TarFormatError(`a PAX size record is not a size (${paxSize})`);
      }
      const name = pax.get('path') ?? longName ?? (prefix ? `${prefix}/${base}` : base);
      const linkname = pax.get('linkpath') ?? longLink ?? cString(h.subarray(157, 257));
      // Only regular files carry a body Go's reader hands out; others' sizes are skipped the same way.
      this.bodyLeft = size;
      this.padLeft = (BLOCK - (size % BLOCK)) % BLOCK;
      return { name, size, type, linkname };
    }
  }
}
