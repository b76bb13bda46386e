/** The one ELF fact the payload needs: which machine a binary is for. */

/** The ELF e_machine of a file's first bytes, or undefined when it is not a 64-bit little-endian ELF. Pure. */
export function elfMachine(head: Buffer): number | undefined {
  if (head.length < 20 || head.readUInt32BE(0) !== 0x7f454c46) return undefined;
  if (head[4] !== 2 || head[5] !== 1) return undefined; // ELFCLASS64, little endian
  return head.readUInt16LE(18);
}
