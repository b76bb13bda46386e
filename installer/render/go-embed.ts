/**
 * A file embedded in a Go program with `//go:embed`, read from the program itself. Go's linker lays
 * an embed.FS out as a table of `struct { name string; data string; hash [16]byte }` (go/src/embed/
 * embed.go, `type file`), each string a pair of machine words: the virtual address of its bytes and
 * their length. So the name's bytes are found in the file, their address computed from the loaded
 * segments, and the entry that points at them gives the data's address and length.
 *
 * Read from a 64-bit little-endian ELF executable that is not position-independent, which is how Go
 * builds a linux/amd64 or arm64 program by default and how Harvester builds harvester-installer
 * (CGO_ENABLED=0, -extldflags -static: harvester/harvester-installer scripts/build). A PIE's table
 * is filled in by relocations at load time, so it is not found here. Pure.
 */

const PT_LOAD = 1;

interface Segment {
  offset: number;
  vaddr: number;
  size: number;
}

/** The PT_LOAD segments of an ELF64 LE file, or undefined when it is not one. */
function loadSegments(elf: Buffer): Segment[] | undefined {
  if (elf.length < 64 || elf.readUInt32BE(0) !== 0x7f454c46 || elf[4] !== 2 || elf[5] !== 1) return undefined;
  const phoff = Number(elf.readBigUInt64LE(0x20));
  const phentsize = elf.readUInt16LE(0x36);
  const phnum = elf.readUInt16LE(0x38);
  const segments: Segment[] = [];
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    if (at + 56 > elf.length) return undefined;
    if (elf.readUInt32LE(at) !== PT_LOAD) continue;
    segments.push({ offset: Number(elf.readBigUInt64LE(at + 8)), vaddr: Number(elf.readBigUInt64LE(at + 16)), size: Number(elf.readBigUInt64LE(at + 32)) });
  }
  return segments;
}

function vaddrOf(segments: Segment[], offset: number): number | undefined {
  const s = segments.find((g) => offset >= g.offset && offset < g.offset + g.size);
  return s ? s.vaddr + (offset - s.offset) : undefined;
}

function offsetOf(segments: Segment[], vaddr: number, length: number): number | undefined {
  const s = segments.find((g) => vaddr >= g.vaddr && vaddr + length <= g.vaddr + g.size);
  return s ? s.offset + (vaddr - s.vaddr) : undefined;
}

function words(a: number, b: number): Buffer {
  const w = Buffer.alloc(16);
  w.writeBigUInt64LE(BigInt(a), 0);
  w.writeBigUInt64LE(BigInt(b), 8);
  return w;
}

function* occurrences(haystack: Buffer, needle: Buffer): Generator<number> {
  for (let i = haystack.indexOf(needle); i >= 0; i = haystack.indexOf(needle, i + 1)) yield i;
}

/** The bytes of the embedded file `name` (its path as //go:embed names it, e.g. templates/x.yaml), or undefined. */
export function readGoEmbedded(elf: Buffer, name: string): Buffer | undefined {
  const segments = loadSegments(elf);
  if (!segments?.length) return undefined;
  const nameBytes = Buffer.from(name, 'utf8');
  for (const at of occurrences(elf, nameBytes)) {
    const vaddr = vaddrOf(segments, at);
    if (vaddr === undefined) continue;
    for (const entry of occurrences(elf, words(vaddr, nameBytes.length))) {
      if (entry % 8 !== 0 || entry + 32 > elf.length) continue;
      const dataAddr = Number(elf.readBigUInt64LE(entry + 16));
      const dataLen = Number(elf.readBigUInt64LE(entry + 24));
      const off = offsetOf(segments, dataAddr, dataLen);
      if (off !== undefined) return elf.subarray(off, off + dataLen);
    }
  }
  return undefined;
}
