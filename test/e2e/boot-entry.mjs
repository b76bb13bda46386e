// The UEFI boot entry the install wrote, read from the firmware's own store: the OVMF VARS file
// the install VM ran with. Variables there are an authenticated variable header (60 bytes: StartId
// 0x55AA, State, …, NameSize at 36, DataSize at 40, VendorGuid), the UTF-16 name, then the data; a
// live variable has State 0x3F (older copies are marked deleted). Finds the live Boot#### whose
// EFI_LOAD_OPTION (u32 attributes, u16 file path length, UTF-16 description, file path) is
// described LABEL and names LOADER, and checks the live BootOrder starts with it.
// usage: node boot-entry.mjs VARS.fd LABEL LOADER
import { readFileSync } from 'node:fs';

const [vars, label, loader] = process.argv.slice(2);
const buf = readFileSync(vars);
const u16 = (s) => Buffer.from(`${s}\0`, 'utf16le');
const fail = (m) => { console.error(`boot-entry: ${m}`); process.exit(1); };

/** Live variables whose name matches: { name, data }. */
function variables(match) {
  const out = [];
  for (let at = buf.indexOf(Buffer.from([0xaa, 0x55])); at >= 0; at = buf.indexOf(Buffer.from([0xaa, 0x55]), at + 1)) {
    if (at + 60 > buf.length || buf[at + 2] !== 0x3f) continue;
    const nameSize = buf.readUInt32LE(at + 36);
    const dataSize = buf.readUInt32LE(at + 40);
    if (nameSize < 2 || nameSize > 512 || dataSize > 65536) continue;
    const name = buf.subarray(at + 60, at + 60 + nameSize).toString('utf16le').replace(/\0$/, '');
    if (match.test(name)) out.push({ name, data: buf.subarray(at + 60 + nameSize, at + 60 + nameSize + dataSize) });
  }
  return out;
}

const want = u16(label);
const entry = variables(/^Boot[0-9A-F]{4}$/).find((v) => v.data.subarray(6, 6 + want.length).equals(want));
if (!entry) fail(`no live Boot#### variable described "${label}" in ${vars}`);
const pathLen = entry.data.readUInt16LE(4);
const filePath = entry.data.subarray(6 + want.length, 6 + want.length + pathLen);
if (!filePath.includes(Buffer.from(loader, 'utf16le'))) fail(`${entry.name} "${label}" does not name ${loader}`);
const orders = variables(/^BootOrder$/);
if (orders.length !== 1) fail(`${orders.length} live BootOrder variables in ${vars}`);
const order = [];
for (let i = 0; i + 1 < orders[0].data.length; i += 2) order.push(orders[0].data.readUInt16LE(i).toString(16).toUpperCase().padStart(4, '0'));
if (`Boot${order[0]}` !== entry.name) fail(`BootOrder ${order.join(',')} does not start with ${entry.name} "${label}"`);
console.log(`${entry.name} "${label}" -> ${loader}, BootOrder ${order.join(',')}`);
