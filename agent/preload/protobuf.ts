/**
 * The protobuf wire format, as much of it as containerd's API needs (protobuf.dev, "Encoding"):
 * varints, length-delimited fields (strings, bytes, messages, map entries), fixed-width fields
 * skipped when reading. Hand-written so the agent carries no generated code for a dozen messages.
 */

/** A protobuf field as read off the wire: varints as numbers, length-delimited fields as bytes. */
export interface WireField {
  field: number;
  value: number | Buffer;
}

/** The top-level fields of one protobuf message, in order (fixed-width fields are skipped). */
export function readFields(buf: Buffer): WireField[] {
  const out: WireField[] = [];
  let pos = 0;
  const varint = (): number => {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (pos >= buf.length) throw new Error('a varint runs past the end of the message');
      const b = buf[pos++]!;
      result += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return result;
      scale *= 128;
    }
    throw new Error('a varint longer than ten bytes');
  };
  while (pos < buf.length) {
    const key = varint();
    const field = Math.floor(key / 8);
    const wire = key % 8;
    if (field === 0) throw new Error('field number 0');
    if (wire === 0) out.push({ field, value: varint() });
    else if (wire === 2) {
      const len = varint();
      if (pos + len > buf.length) throw new Error(`field ${field} says ${len} bytes, ${buf.length - pos} are left`);
      out.push({ field, value: buf.subarray(pos, pos + len) });
      pos += len;
    } else if (wire === 1 || wire === 5) {
      const len = wire === 1 ? 8 : 4;
      if (pos + len > buf.length) throw new Error(`field ${field} is cut short`);
      pos += len;
    } else throw new Error(`wire type ${wire} (field ${field}) is not one containerd's API uses`);
  }
  return out;
}

export function bytesOf(buf: Buffer, field: number): Buffer[] {
  return readFields(buf).flatMap((f) => (f.field === field && Buffer.isBuffer(f.value) ? [f.value] : []));
}

export function stringsOf(buf: Buffer, field: number): string[] {
  return bytesOf(buf, field).map((b) => b.toString('utf8'));
}

function encodeVarint(n: number): Buffer {
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`cannot encode ${n} as a varint`);
  const out: number[] = [];
  while (n >= 128) {
    out.push((n % 128) | 128);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}

/** A varint field; proto3 leaves zero out. */
export function varintField(field: number, n: number): Buffer {
  return n === 0 ? Buffer.alloc(0) : Buffer.concat([encodeVarint(field * 8), encodeVarint(n)]);
}

/** The key and length of a length-delimited field whose `length` bytes follow separately. */
export function lengthPrefix(field: number, length: number): Buffer {
  return Buffer.concat([encodeVarint(field * 8 + 2), encodeVarint(length)]);
}

/** A string, bytes or message field; proto3 leaves an empty one out. */
export function bytesField(field: number, value: string | Buffer): Buffer {
  const b = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
  return b.length === 0 ? Buffer.alloc(0) : Buffer.concat([lengthPrefix(field, b.length), b]);
}

/** A map<string, string> field: one entry message (key 1, value 2) per pair, in key order. */
export function mapField(field: number, map: Readonly<Record<string, string>>): Buffer {
  const entries = Object.keys(map)
    .sort()
    .map((k) => {
      const entry = Buffer.concat([bytesField(1, k), bytesField(2, map[k]!)]);
      return Buffer.concat([lengthPrefix(field, entry.length), entry]);
    });
  return Buffer.concat(entries);
}
