import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TarEntries, TarFormatError } from '../../../agent/preload/tar-entries.js';

// The tar bytes are built here by hand (or by GNU tar): the reader is never its own oracle.

interface Hdr {
  name: string;
  size?: number;
  /** One character; '\0' for the old regular-file flag. */
  type?: string;
  linkname?: string;
  prefix?: string;
  /** Bytes 257..265 (magic and version); ustar's by default. */
  magic?: Buffer;
  /** The raw 12 bytes of the size field, instead of the octal `size`. */
  sizeField?: Buffer;
  /** The checksum to write, from the header's unsigned and signed sums. */
  checksum?: (unsigned: number, signed: number) => number;
}

const USTAR_MAGIC = Buffer.from('ustar\u000000', 'latin1');
const GNU_MAGIC = Buffer.from('ustar  \u0000', 'latin1');
const V7_MAGIC = Buffer.alloc(8);

function octal(h: Buffer, offset: number, length: number, value: number): void {
  h.write(`${value.toString(8).padStart(length - 1, '0')}\0`, offset, length, 'latin1');
}

function header(o: Hdr): Buffer {
  const h = Buffer.alloc(512);
  h.write(o.name, 0, 100, 'utf8');
  octal(h, 100, 8, 0o644);
  octal(h, 108, 8, 0);
  octal(h, 116, 8, 0);
  if (o.sizeField) o.sizeField.copy(h, 124, 0, 12);
  else octal(h, 124, 12, o.size ?? 0);
  octal(h, 136, 12, 1_700_000_000);
  h.write(o.type ?? '0', 156, 1, 'latin1');
  h.write(o.linkname ?? '', 157, 100, 'utf8');
  (o.magic ?? USTAR_MAGIC).copy(h, 257);
  h.write(o.prefix ?? '', 345, 155, 'utf8');
  h.fill(0x20, 148, 156);
  let unsigned = 0;
  let signed = 0;
  for (const b of h) {
    unsigned += b;
    signed += b > 127 ? b - 256 : b;
  }
  const sum = o.checksum ? o.checksum(unsigned, signed) : unsigned;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'latin1');
  return h;
}

function padding(n: number): Buffer {
  return Buffer.alloc((512 - (n % 512)) % 512);
}

/** Header, body and padding; the header's size is the body's unless `h` says otherwise. */
function entry(h: Hdr, body: Buffer | string = Buffer.alloc(0)): Buffer {
  const b = typeof body === 'string' ? Buffer.from(body) : body;
  return Buffer.concat([header({ size: b.length, ...h }), b, padding(b.length)]);
}

/** A PAX record "<len> key=value\n", its length counting its own digits. */
function paxRecord(key: string, value: string): string {
  const rest = Buffer.byteLength(` ${key}=${value}\n`);
  let len = rest + 1;
  while (String(len).length + rest !== len) len = String(len).length + rest;
  return `${len} ${key}=${value}\n`;
}

function paxEntry(records: [string, string][], type = 'x'): Buffer {
  return entry({ name: 'PaxHeaders/x', type }, records.map(([k, v]) => paxRecord(k, v)).join(''));
}

/** `n` bytes no two neighbouring entries share. */
function pattern(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed * 7 + 1) & 0xff;
  return b;
}

const END = Buffer.alloc(1024);

async function* chunked(data: Buffer, size: number): AsyncGenerator<Buffer> {
  for (let i = 0; i < data.length; i += size) yield data.subarray(i, i + size);
}

interface Got {
  name: string;
  size: number;
  type: string;
  linkname: string;
  body: Buffer;
}

async function readEntries(tar: TarEntries, pieceMax = 4096): Promise<Got[]> {
  const out: Got[] = [];
  for (let e = await tar.next(); e; e = await tar.next()) {
    const parts: Buffer[] = [];
    for (let p = await tar.read(pieceMax); p; p = await tar.read(pieceMax)) {
      expect(p.length).toBeGreaterThan(0);
      expect(p.length).toBeLessThanOrEqual(pieceMax);
      parts.push(Buffer.from(p));
    }
    out.push({ ...e, body: Buffer.concat(parts) });
  }
  return out;
}

async function rejection(p: Promise<unknown>): Promise<TarFormatError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof TarFormatError) return err;
    throw err;
  }
  throw new Error('expected a TarFormatError');
}

const file = (name: string, body: Buffer): Got => ({ name, size: body.length, type: '0', linkname: '', body });

describe('TarEntries: ustar entries', () => {
  it('yields each entry’s name, size, type and exact body, bodies of every length around a block', async () => {
    const sizes = [0, 1, 511, 512, 513, 1024 + 7];
    const bodies = sizes.map((n, i) => pattern(n, i));
    const data = Buffer.concat([...bodies.map((b, i) => entry({ name: `dir/f${i}` }, b)), END]);
    expect(await readEntries(new TarEntries(chunked(data, data.length)))).toEqual(bodies.map((b, i) => file(`dir/f${i}`, b)));
  });

  it.each([1, 7, 600])('reads the same entries when the stream comes %i bytes at a time', async (size) => {
    const bodies = [1, 511, 513, 1031, 4000].map((n, i) => pattern(n, i + 3));
    const data = Buffer.concat([...bodies.map((b, i) => entry({ name: `e${i}` }, b)), END]);
    const want = bodies.map((b, i) => file(`e${i}`, b));
    expect(await readEntries(new TarEntries(chunked(data, size)), 100)).toEqual(want);
    expect(await readEntries(new TarEntries(chunked(data, size)))).toEqual(want);
  });

  it('reports a symlink’s linkname, and directories, hard links and the old NUL type flag', async () => {
    const data = Buffer.concat([
      entry({ name: 'b/layer.tar', type: '2', linkname: '../a/layer.tar' }),
      entry({ name: 'dir/', type: '5' }),
      entry({ name: 'hard', type: '1', linkname: 'dir/x' }),
      entry({ name: 'old', type: '\0' }, 'v7'),
      END,
    ]);
    expect(await readEntries(new TarEntries(chunked(data, 512)))).toEqual([
      { name: 'b/layer.tar', size: 0, type: '2', linkname: '../a/layer.tar', body: Buffer.alloc(0) },
      { name: 'dir/', size: 0, type: '5', linkname: '', body: Buffer.alloc(0) },
      { name: 'hard', size: 0, type: '1', linkname: 'dir/x', body: Buffer.alloc(0) },
      file('old', Buffer.from('v7')),
    ]);
  });

  it('joins a ustar prefix to the name, and ignores bytes there in GNU and v7 headers', async () => {
    const data = Buffer.concat([
      entry({ name: 'c.txt', prefix: 'a/b' }, 'one'),
      entry({ name: 'gnu.txt', prefix: 'atime', magic: GNU_MAGIC }, 'two'),
      entry({ name: 'v7.txt', prefix: 'junk', magic: V7_MAGIC }, 'three'),
      END,
    ]);
    expect((await readEntries(new TarEntries(chunked(data, 100)))).map((e) => [e.name, e.body.toString()])).toEqual([
      ['a/b/c.txt', 'one'],
      ['gnu.txt', 'two'],
      ['v7.txt', 'three'],
    ]);
  });

  it('takes a 100-byte name that fills its field (no NUL)', async () => {
    const name = `${'n'.repeat(96)}.bin`;
    const data = Buffer.concat([entry({ name, linkname: 'l'.repeat(100), type: '2' }), END]);
    const [e] = await readEntries(new TarEntries(chunked(data, 9)));
    expect(e).toMatchObject({ name, linkname: 'l'.repeat(100) });
  });

  it('reads octal sizes padded with spaces, as old tars write them', async () => {
    const data = Buffer.concat([header({ name: 'sp', sizeField: Buffer.from('        764 ', 'latin1') }), pattern(500, 1), padding(500), END]);
    const [e] = await readEntries(new TarEntries(chunked(data, 64)));
    expect(e).toEqual(file('sp', pattern(500, 1)));
  });
});

function base256(n: number): Buffer {
  const b = Buffer.alloc(12);
  for (let i = 11; i >= 1; i--) {
    b[i] = n % 256;
    n = Math.floor(n / 256);
  }
  b[0] = 0x80;
  return b;
}

describe('TarEntries: base-256 sizes and checksums', () => {
  it('parses a base-256 size (high bit of byte 124, big-endian after it) and reads that many bytes', async () => {
    const body = pattern(600, 5);
    const data = Buffer.concat([header({ name: 'big', sizeField: base256(600) }), body, padding(600), entry({ name: 'next' }, 'n'), END]);
    expect(await readEntries(new TarEntries(chunked(data, 7)))).toEqual([file('big', body), file('next', Buffer.from('n'))]);
  });

  it('parses a base-256 size beyond what 11 octal digits hold', async () => {
    const size = 2 ** 33 + 5;
    const tar = new TarEntries(chunked(header({ name: 'huge', sizeField: base256(size) }), 512));
    expect(await tar.next()).toEqual({ name: 'huge', size, type: '0', linkname: '' });
  });

  it('refuses a base-256 size too large to count exactly', async () => {
    const field = base256(0);
    field[1] = 0x01;
    const err = await rejection(new TarEntries(chunked(header({ name: 'absurd', sizeField: field }), 512)).next());
    expect(err.message).toMatch(/size is too large/);
  });

  it('refuses a header whose checksum is off by one, naming the checksum and where the header is', async () => {
    const data = Buffer.concat([entry({ name: 'ok' }, 'hello'), entry({ name: 'bad', checksum: (u) => u + 1 }, 'x'), END]);
    const tar = new TarEntries(chunked(data, 100));
    expect(await tar.next()).toMatchObject({ name: 'ok' });
    const err = await rejection(tar.next());
    expect(err.message).toMatch(/checksum/);
    expect(err.message).toContain('byte 1024');
  });

  it('refuses a checksum of zero on a non-empty header', async () => {
    const err = await rejection(new TarEntries(chunked(entry({ name: 'z', checksum: () => 0 }), 512)).next());
    expect(err.message).toMatch(/checksum/);
  });

  it('accepts a checksum summed over signed bytes as well as one over unsigned bytes', async () => {
    const name = 'caf\u00e9-\u00fc\u00f1\u00ef.txt';
    let sums: number[] = [];
    header({ name, checksum: (u, s) => ((sums = [u, s]), u) });
    expect(sums[0]).not.toBe(sums[1]);
    for (const checksum of [(u: number) => u, (_u: number, s: number) => s]) {
      const data = Buffer.concat([entry({ name, checksum }, 'body'), END]);
      expect(await readEntries(new TarEntries(chunked(data, 512)))).toEqual([file(name, Buffer.from('body'))]);
    }
  });

  it('refuses a block that is not a tar header', async () => {
    const err = await rejection(new TarEntries(chunked(Buffer.alloc(512, 'A'), 512)).next());
    expect(err).toBeInstanceOf(TarFormatError);
  });

  it.each([
    ['a letter', '0000001x23\0'],
    ['a digit 8', '00000000008\0'],
    ['a sign', '-0000000001\0'],
  ])('refuses a size field holding %s, saying the size is not a number', async (_what, field) => {
    const err = await rejection(new TarEntries(chunked(header({ name: 'n', sizeField: Buffer.from(field, 'latin1') }), 512)).next());
    expect(err.message).toMatch(/size is not a number/);
  });
});

describe('TarEntries: PAX and GNU extended headers', () => {
  const longName = `${'p'.repeat(120)}/${'q'.repeat(130)}.json`;
  const longLink = `../${'l'.repeat(200)}/layer.tar`;

  it('applies PAX path, linkpath and size records to the entry after them, and to that entry only', async () => {
    const body = pattern(700, 2);
    const data = Buffer.concat([
      paxEntry([['mtime', '1700000000.5'], ['path', longName]]),
      entry({ name: longName.slice(0, 100) }, body),
      paxEntry([['linkpath', longLink]]),
      entry({ name: 'sym', type: '2', linkname: 'short' }),
      paxEntry([['size', '700']]),
      header({ name: 'sized', size: 0 }),
      body,
      padding(700),
      entry({ name: 'plain' }, 'p'),
      END,
    ]);
    expect(await readEntries(new TarEntries(chunked(data, 7)))).toEqual([
      file(longName, body),
      { name: 'sym', size: 0, type: '2', linkname: longLink, body: Buffer.alloc(0) },
      file('sized', body),
      file('plain', Buffer.from('p')),
    ]);
  });

  it('counts a PAX record’s length in bytes, so a multi-byte UTF-8 path comes out whole', async () => {
    const name = 'd\u00efr/\u00f1ame-\u20ac-\u{1f600}.txt';
    const data = Buffer.concat([paxEntry([['path', name], ['uname', 'r\u00f6ot']]), entry({ name: 'ascii' }, 'u'), END]);
    expect(await readEntries(new TarEntries(chunked(data, 3)))).toEqual([file(name, Buffer.from('u'))]);
  });

  it('passes over a global PAX header without renaming the entries after it', async () => {
    const data = Buffer.concat([paxEntry([['path', 'global-name']], 'g'), entry({ name: 'own' }, 'o'), END]);
    expect(await readEntries(new TarEntries(chunked(data, 512)))).toEqual([file('own', Buffer.from('o'))]);
  });

  it('refuses a PAX record whose length runs past the extended header', async () => {
    const data = Buffer.concat([entry({ name: 'PaxHeaders/x', type: 'x' }, '99 path=x\n'), entry({ name: 'f' }), END]);
    const err = await rejection(new TarEntries(chunked(data, 512)).next());
    expect(err.message).toMatch(/PAX/);
  });

  it('takes GNU long names (L) and long link names (K) for the entry after them', async () => {
    const body = pattern(513, 4);
    const data = Buffer.concat([
      entry({ name: '././@LongLink', type: 'L' }, `${longName}\0`),
      entry({ name: longName.slice(0, 100) }, body),
      entry({ name: '././@LongLink', type: 'K' }, `${longLink}\0`),
      entry({ name: 'gnu-sym', type: '2', linkname: longLink.slice(0, 100) }),
      entry({ name: 'after' }, 'a'),
      END,
    ]);
    expect(await readEntries(new TarEntries(chunked(data, 600)))).toEqual([
      file(longName, body),
      { name: 'gnu-sym', size: 0, type: '2', linkname: longLink, body: Buffer.alloc(0) },
      file('after', Buffer.from('a')),
    ]);
  });
});

describe('TarEntries: reading bodies', () => {
  it('hands out pieces of at most `max` bytes that share the source’s memory (no copy)', async () => {
    const body = pattern(513, 6);
    const data = Buffer.concat([entry({ name: 'f' }, body), END]);
    const tar = new TarEntries(chunked(data, data.length));
    await tar.next();
    const pieces: Buffer[] = [];
    for (let p = await tar.read(100); p; p = await tar.read(100)) pieces.push(p);
    expect(pieces.map((p) => p.length)).toEqual([100, 100, 100, 100, 100, 13]);
    expect(pieces[0]!.buffer).toBe(data.buffer);
    expect(pieces[0]!.byteOffset).toBe(data.byteOffset + 512);
    expect(Buffer.concat(pieces)).toEqual(body);
    expect(await tar.read(100)).toBeUndefined();
  });

  it('returns no piece for an empty body', async () => {
    const tar = new TarEntries(chunked(Buffer.concat([entry({ name: 'empty' }), entry({ name: 'x' }, 'x'), END]), 512));
    expect(await tar.next()).toMatchObject({ name: 'empty', size: 0 });
    expect(await tar.read(10)).toBeUndefined();
    expect(await tar.next()).toMatchObject({ name: 'x', size: 1 });
  });

  it.each([1, 511, 512, 513, 1024 + 7])('next() after reading part of a %i-byte body lands on the next entry', async (size) => {
    const body = pattern(size, 8);
    const data = Buffer.concat([entry({ name: 'first' }, body), entry({ name: 'second' }, 'second-body'), END]);
    for (const chunk of [7, 600, data.length]) {
      for (const taken of [0, 1, Math.floor(size / 2), size - 1]) {
        const tar = new TarEntries(chunked(data, chunk));
        expect(await tar.next()).toMatchObject({ name: 'first', size });
        let got = 0;
        while (got < taken) got += (await tar.read(taken - got))!.length;
        expect(await readEntries(tar)).toEqual([file('second', Buffer.from('second-body'))]);
      }
    }
  });

  it('readAll returns the whole body, across source chunks, and the rest after a partial read', async () => {
    const body = pattern(1031, 9);
    const data = Buffer.concat([entry({ name: 'a' }, body), entry({ name: 'b' }, body), entry({ name: 'c' }), END]);
    const tar = new TarEntries(chunked(data, 7));
    await tar.next();
    expect(await tar.readAll(1031, 'a')).toEqual(body);
    expect(await tar.read(10)).toBeUndefined();
    expect(await tar.next()).toMatchObject({ name: 'b' });
    const head = await tar.read(5);
    expect(Buffer.concat([head!, await tar.readAll(2000, 'b')])).toEqual(body);
    expect(await tar.next()).toMatchObject({ name: 'c' });
    expect(await tar.readAll(0, 'c')).toEqual(Buffer.alloc(0));
    expect(await tar.next()).toBeUndefined();
  });

  it('readAll refuses a body over its limit, naming the file and both sizes, and the entry can still be skipped', async () => {
    const data = Buffer.concat([entry({ name: 'manifest.json' }, pattern(100, 1)), entry({ name: 'next' }, 'n'), END]);
    const tar = new TarEntries(chunked(data, 512));
    await tar.next();
    const err = await rejection(tar.readAll(99, 'manifest.json'));
    expect(err.message).toContain('manifest.json');
    expect(err.message).toContain('100 bytes');
    expect(err.message).toContain('99');
    expect(await readEntries(tar)).toEqual([file('next', Buffer.from('n'))]);
  });
});

/** A source that notes when it has handed out its last byte and been asked for more. */
function tracked(data: Buffer, size: number): { source: AsyncGenerator<Buffer>; ended: () => boolean } {
  let ended = false;
  async function* gen(): AsyncGenerator<Buffer> {
    yield* chunked(data, size);
    ended = true;
  }
  return { source: gen(), ended: () => ended };
}

describe('TarEntries: the end of the archive and the bytes taken', () => {
  it('ends at the zero blocks, and drain() reads the record padding and anything else after them', async () => {
    const archive = Buffer.concat([entry({ name: 'a' }, 'aa'), END]);
    const data = Buffer.concat([archive, Buffer.alloc(10240 - archive.length), Buffer.from('trailing junk')]);
    const { source, ended } = tracked(data, 1000);
    const tar = new TarEntries(source);
    expect(await readEntries(tar)).toEqual([file('a', Buffer.from('aa'))]);
    expect(tar.consumed).toBeLessThanOrEqual(archive.length);
    expect(ended()).toBe(false);
    await tar.drain();
    expect(ended()).toBe(true);
    expect(tar.consumed).toBe(data.length);
  });

  it('ends at a clean end of stream between entries', async () => {
    const data = Buffer.concat([entry({ name: 'a' }, 'aa'), entry({ name: 'b' }, pattern(512, 1))]);
    const tar = new TarEntries(chunked(data, 7));
    expect((await readEntries(tar)).map((e) => e.name)).toEqual(['a', 'b']);
    expect(tar.consumed).toBe(data.length);
  });

  it('has no entry in an empty stream', async () => {
    const tar = new TarEntries(chunked(Buffer.alloc(0), 1));
    expect(await tar.next()).toBeUndefined();
    expect(tar.consumed).toBe(0);
  });

  it.each([1, 7, 600, 100_000])('counts exactly the bytes taken, fed %i bytes at a time', async (size) => {
    const a = entry({ name: 'a' }, pattern(513, 1));
    const pax = paxEntry([['path', 'x'.repeat(150)]]);
    const data = Buffer.concat([a, pax, entry({ name: 'b' }, 'bbbbbbb'), END]);
    const tar = new TarEntries(chunked(data, size));
    expect(tar.consumed).toBe(0);
    await tar.next();
    expect(tar.consumed).toBe(512);
    const piece = await tar.read(100);
    expect(tar.consumed).toBe(512 + piece!.length);
    expect(await tar.next()).toMatchObject({ name: 'x'.repeat(150), size: 7 });
    expect(tar.consumed).toBe(a.length + pax.length + 512);
    await tar.readAll(7, 'b');
    expect(tar.consumed).toBe(a.length + pax.length + 512 + 7);
    await tar.drain();
    expect(tar.consumed).toBe(data.length);
  });

  it('drain() in the middle of an entry reads the whole stream', async () => {
    const data = Buffer.concat([entry({ name: 'a' }, pattern(3000, 1)), entry({ name: 'b' }, 'b'), END]);
    const { source, ended } = tracked(data, 600);
    const tar = new TarEntries(source);
    await tar.next();
    await tar.read(10);
    await tar.drain();
    expect(ended()).toBe(true);
    expect(tar.consumed).toBe(data.length);
  });
});

describe('TarEntries: a stream cut short', () => {
  it.each([1, 7, 512])('refuses a stream cut inside a header (fed %i bytes at a time)', async (size) => {
    const data = Buffer.concat([entry({ name: 'a' }, 'aa'), header({ name: 'b', size: 1 }).subarray(0, 300)]);
    const tar = new TarEntries(chunked(data, size));
    expect(await tar.next()).toMatchObject({ name: 'a' });
    const err = await rejection(tar.next());
    expect(err.message).toMatch(/inside a header/);
    expect(err.message).toContain('300 of 512');
    expect(err.message).toMatch(/cut short/);
  });

  const cut = Buffer.concat([header({ name: 'big', size: 1000 }), pattern(400, 2)]);

  it('refuses a body cut short while reading it', async () => {
    const tar = new TarEntries(chunked(cut, 64));
    await tar.next();
    let read = 0;
    const err = await rejection(
      (async () => {
        for (let p = await tar.read(1000); p; p = await tar.read(1000)) read += p.length;
      })(),
    );
    expect(read).toBe(400);
    expect(err.message).toMatch(/inside an entry/);
    expect(err.message).toMatch(/cut short/);
  });

  it('refuses a body cut short while skipping it with next()', async () => {
    const tar = new TarEntries(chunked(cut, 64));
    await tar.next();
    expect((await rejection(tar.next())).message).toMatch(/cut short/);
  });

  it('refuses a body cut short in readAll', async () => {
    const tar = new TarEntries(chunked(cut, 64));
    await tar.next();
    expect((await rejection(tar.readAll(4096, 'big'))).message).toMatch(/cut short/);
  });

  it('refuses a stream cut inside a PAX extended header', async () => {
    const records = `200 path=${'p'.repeat(190)}\n`;
    expect(records.length).toBe(200);
    const data = Buffer.concat([header({ name: 'PaxHeaders/x', type: 'x', size: 200 }), Buffer.from(records).subarray(0, 100)]);
    const err = await rejection(new TarEntries(chunked(data, 7)).next());
    expect(err.message).toMatch(/extended header/);
    expect(err.message).toMatch(/cut short/);
  });

  it('refuses a stream cut inside a GNU long name', async () => {
    const data = Buffer.concat([header({ name: '././@LongLink', type: 'L', size: 300 }), Buffer.from('n'.repeat(50))]);
    expect((await rejection(new TarEntries(chunked(data, 512)).next())).message).toMatch(/cut short/);
  });
});

describe('TarEntries against archives GNU tar wrote', () => {
  let dir = '';
  const longDir = 'd'.repeat(90);
  const files: [string, Buffer][] = [
    [`${longDir}/${'f'.repeat(120)}.bin`, pattern(1031, 1)],
    ['short.txt', Buffer.from('x')],
    [`${'e'.repeat(110)}/${'g'.repeat(40)}`, pattern(511, 2)],
    ['empty', Buffer.alloc(0)],
    [`${longDir}/${'h'.repeat(101)}`, pattern(513, 3)],
  ];
  const linkTarget = `${'t'.repeat(150)}/layer.tar`;

  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'tar-entries-test-'));
    for (const [name, body] of files) {
      mkdirSync(path.join(dir, path.dirname(name)), { recursive: true });
      writeFileSync(path.join(dir, name), body);
    }
    symlinkSync(linkTarget, path.join(dir, 'link'));
  });

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it.each(['pax', 'gnu'])('yields exactly the names, sizes and bodies written, --format=%s', async (format) => {
    expect(files.filter(([n]) => n.length > 100)).toHaveLength(3);
    const names = [...files.map(([n]) => n), 'link'];
    const args = [`--format=${format}`, '--owner=0', '--group=0', '--numeric-owner', '-cf', '-', '-C', dir, ...names];
    const data = execFileSync('tar', args, { env: { ...process.env, LC_ALL: 'C' }, maxBuffer: 1 << 24 });
    const want = [...files.map(([n, b]) => file(n, b)), { name: 'link', size: 0, type: '2', linkname: linkTarget, body: Buffer.alloc(0) }];
    for (const size of [1, 7, 600, data.length]) {
      const tar = new TarEntries(chunked(data, size));
      expect(await readEntries(tar, 256)).toEqual(want);
      await tar.drain();
      expect(tar.consumed).toBe(data.length);
    }
  });
});

describe('TarEntries: as Go’s archive/tar reads the edges', () => {
  it('passes over empty chunks from its source, between entries and inside a header', async () => {
    const data = Buffer.concat([entry({ name: 'a' }, 'aa'), entry({ name: 'b' }, 'bbb'), END]);
    async function* withEmpties(): AsyncGenerator<Buffer> {
      yield data.subarray(0, 1024);
      yield Buffer.alloc(0);
      yield data.subarray(1024, 1100);
      yield Buffer.alloc(0);
      yield data.subarray(1100);
    }
    expect(await readEntries(new TarEntries(withEmpties()))).toEqual([file('a', Buffer.from('aa')), file('b', Buffer.from('bbb'))]);
  });

  it('refuses a lone zero block followed by more entries, naming where it is', async () => {
    const data = Buffer.concat([entry({ name: 'a' }, 'aa'), Buffer.alloc(512), entry({ name: 'b' }, 'bbb'), END]);
    const tar = new TarEntries(chunked(data, 600));
    expect(await tar.next()).toMatchObject({ name: 'a' });
    const err = await rejection(tar.next());
    expect(err.message).toBe('a zero block at byte 1024 is followed by more entries: not a tar, or corrupt');
  });

  it('ends at one zero block when the stream ends right after it', async () => {
    const data = Buffer.concat([entry({ name: 'a' }, 'aa'), Buffer.alloc(512)]);
    expect((await readEntries(new TarEntries(chunked(data, 7)))).map((e) => e.name)).toEqual(['a']);
  });

  it('reads an octal size with NULs before its digits', async () => {
    const sizeField = Buffer.from(`${'\x00'.repeat(7)}1750\x00`, 'latin1');
    const body = pattern(1000, 3);
    const data = Buffer.concat([header({ name: 'n', sizeField }), body, padding(1000), END]);
    expect(await readEntries(new TarEntries(chunked(data, 600)))).toEqual([file('n', body)]);
  });
});
