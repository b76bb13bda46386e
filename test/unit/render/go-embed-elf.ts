/**
 * A stand-in for a Go program's binary, for tests that need one without a Go toolchain: a 64-bit
 * little-endian ELF executable with one loaded segment holding the files' names and data and an
 * embed.FS table in Go's layout ({name string, data string, hash [16]byte}, strings as (address,
 * length) word pairs: go/src/embed/embed.go). The name of each file also appears once before the
 * table as a decoy, as a Go binary carries the same bytes in other strings. Not a runnable program.
 * test/integration/render/go-embed.test.ts reads a binary Go itself built.
 */
const BASE = 0x400000;
const ELF_HEADER = 64;
const PROGRAM_HEADER = 56;

export function goEmbedElf(files: Record<string, string | Buffer>): Buffer {
  const chunks: Buffer[] = [];
  let size = ELF_HEADER + PROGRAM_HEADER;
  const place = (b: Buffer): number => {
    const at = size;
    chunks.push(b);
    size += b.length;
    return at;
  };
  const entries: Array<{ name: number; nameLen: number; data: number; dataLen: number }> = [];
  for (const [name, content] of Object.entries(files)) {
    place(Buffer.from(`decoy:${name};`));
    const n = Buffer.from(name);
    const d = Buffer.isBuffer(content) ? content : Buffer.from(content);
    entries.push({ name: place(n), nameLen: n.length, data: place(d), dataLen: d.length });
  }
  place(Buffer.alloc((8 - (size % 8)) % 8));
  for (const e of entries) {
    const row = Buffer.alloc(40);
    row.writeBigUInt64LE(BigInt(BASE + e.name), 0);
    row.writeBigUInt64LE(BigInt(e.nameLen), 8);
    row.writeBigUInt64LE(BigInt(BASE + e.data), 16);
    row.writeBigUInt64LE(BigInt(e.dataLen), 24);
    place(row);
  }
  const head = Buffer.alloc(ELF_HEADER + PROGRAM_HEADER);
  head.writeUInt32BE(0x7f454c46, 0);
  head[4] = 2; // ELFCLASS64
  head[5] = 1; // little-endian
  head[6] = 1;
  head.writeUInt16LE(2, 0x10); // ET_EXEC
  head.writeUInt16LE(0x3e, 0x12); // x86-64
  head.writeBigUInt64LE(BigInt(ELF_HEADER), 0x20); // e_phoff
  head.writeUInt16LE(ELF_HEADER, 0x34);
  head.writeUInt16LE(PROGRAM_HEADER, 0x36);
  head.writeUInt16LE(1, 0x38);
  const ph = ELF_HEADER;
  head.writeUInt32LE(1, ph); // PT_LOAD
  head.writeBigUInt64LE(0n, ph + 8); // p_offset
  head.writeBigUInt64LE(BigInt(BASE), ph + 16); // p_vaddr
  head.writeBigUInt64LE(BigInt(size), ph + 32); // p_filesz
  head.writeBigUInt64LE(BigInt(size), ph + 40); // p_memsz
  return Buffer.concat([head, ...chunks]);
}
