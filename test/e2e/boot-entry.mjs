// The UEFI boot entry the install wrote, read from the firmware's own store: the OVMF VARS file
// the install VM ran with. Finds the Boot#### variable whose EFI_LOAD_OPTION description is the
// label (UEFI spec 3.1.3: u32 attributes, u16 file path length, then the UTF-16 description), checks
// its file path names the loader, and that the last-written BootOrder starts with it.
// usage: node boot-entry.mjs VARS.fd LABEL LOADER  (prints "Boot0004 first in BootOrder 0004,0001,...")
import { readFileSync } from 'node:fs';

const [vars, label, loader] = process.argv.slice(2);
const buf = readFileSync(vars);
const u16 = (s) => Buffer.from(`${s}\0`, 'utf16le');
const fail = (m) => { console.error(`boot-entry: ${m}`); process.exit(1); };

let entry;
for (let at = buf.indexOf(u16(label)); at >= 0; at = buf.indexOf(u16(label), at + 1)) {
  const name = buf.subarray(at - 6 - 18, at - 6).toString('utf16le');
  if (/^Boot[0-9A-F]{4}\0$/.test(name)) entry = { num: name.slice(4, 8), at };
}
if (!entry) fail(`no Boot#### variable described "${label}" in ${vars}`);
const pathLen = buf.readUInt16LE(entry.at - 2);
const filePath = buf.subarray(entry.at + u16(label).length, entry.at + u16(label).length + pathLen);
if (!filePath.includes(Buffer.from(loader, 'utf16le'))) fail(`Boot${entry.num} "${label}" does not name ${loader}`);
const orderAt = buf.lastIndexOf(u16('BootOrder'));
if (orderAt < 0) fail(`no BootOrder in ${vars}`);
const data = orderAt + u16('BootOrder').length;
const order = [];
for (let i = 0; i < 8; i++) {
  const n = buf.readUInt16LE(data + 2 * i).toString(16).toUpperCase().padStart(4, '0');
  order.push(n);
}
if (order[0] !== entry.num) fail(`BootOrder starts ${order[0]}, not Boot${entry.num} "${label}"`);
console.log(`Boot${entry.num} "${label}" -> ${loader}, first in BootOrder`);
