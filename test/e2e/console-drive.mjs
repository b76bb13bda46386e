// Drives `hvinstall console` in a QEMU guest over its serial line, from the host, as a person at a
// serial terminal would: a headless terminal emulator (@xterm/headless) shows the screen, keys are
// sent as a VT220 sends them, and the emulator answers the console's size query. Walks Harvester's
// pages (create mode, DHCP on the NIC through slirp then a static address, a static VIP), checks the confirmation lists the
// disk to be destroyed, confirms, and waits for the install to finish; the console then reboots the
// guest (QEMU runs with -no-reboot, so it exits). slirp with restrict=on leases an address but no
// router, so the DHCP test of the network page must refuse it with Harvester's "No default route
// found" and the driver then gives a static address and gateway instead. Used by test/e2e/console.sh.
//   node test/e2e/console-drive.mjs --socket S --device /dev/nvme0n1 --timeout SEC --report FILE
import { connect } from 'node:net';
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import xterm from '@xterm/headless';

const { values } = parseArgs({ options: { socket: { type: 'string' }, device: { type: 'string' }, timeout: { type: 'string' }, report: { type: 'string' } } });
const installTimeoutMs = Number(values.timeout ?? 3600) * 1000;
const term = new xterm.Terminal({ cols: 80, rows: 24, allowProposedApi: true, scrollback: 0 });
const t0 = Date.now();
const report = { steps: [] };
const mark = (what) => {
  report.steps.push({ what, atS: Math.round((Date.now() - t0) / 100) / 10 });
  console.log(`[console-drive ${((Date.now() - t0) / 1000).toFixed(1)} s] ${what}`);
};

async function open(path) {
  for (let i = 0; i < 100; i++) {
    try {
      return await new Promise((resolve, reject) => {
        const s = connect(path, () => resolve(s));
        s.once('error', reject);
      });
    } catch {
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  throw new Error(`cannot connect to the serial socket ${path}`);
}

const sock = await open(values.socket);
let pending = Promise.resolve();
let raw = '';
sock.on('data', (d) => {
  raw += d.toString('latin1');
  pending = pending.then(() => new Promise((r) => term.write(d, r)));
});
term.onData((d) => sock.write(d));
let closed = false;
sock.on('close', () => (closed = true));

const rows = () => {
  const b = term.buffer.active;
  return Array.from({ length: term.rows }, (_, i) => (b.getLine(b.viewportY + i)?.translateToString(true) ?? '').trimEnd());
};
const flat = () => rows().slice(1, -1).map((r) => r.trim()).join(' ').replace(/\s+/g, ' ');
const screen = () => rows().join('\n');

function fail(msg) {
  console.error(`console-drive: ${msg}\n--- screen ---\n${screen()}\n--------------`);
  if (values.report) writeFileSync(values.report, JSON.stringify({ ...report, failed: msg, screen: screen() }, null, 2));
  process.exit(1);
}

/** Waits for text; every 10 s asks for a repaint (Ctrl-L), as a person would after kernel messages. */
async function waitText(text, timeoutMs = 120_000) {
  const deadline = Date.now() + timeoutMs;
  let repaint = Date.now() + 10_000;
  for (;;) {
    await pending;
    if (flat().includes(text)) return flat();
    if (closed) fail(`the serial line closed before the screen showed ${JSON.stringify(text)}`);
    if (Date.now() > deadline) fail(`the screen did not show ${JSON.stringify(text)} within ${timeoutMs / 1000} s`);
    if (Date.now() > repaint) {
      sock.write('\x0c');
      repaint = Date.now() + 10_000;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function page(title, timeoutMs) {
  await waitText(title, timeoutMs);
  const deadline = Date.now() + (timeoutMs ?? 120_000);
  while (rows()[1]?.trim() !== title && `${rows()[1]?.trim()} ${rows()[2]?.trim()}` !== title) {
    if (Date.now() > deadline) fail(`page ${JSON.stringify(title)} did not come`);
    await new Promise((r) => setTimeout(r, 100));
  }
  mark(`page: ${title}`);
}

/** Sends a key and waits until the screen has been quiet for a moment (a slow guest takes its time). */
async function key(k, quietMs = 400) {
  sock.write(k);
  let last = '';
  let since = Date.now();
  const deadline = Date.now() + 30_000;
  for (;;) {
    await pending;
    const s = screen();
    if (s !== last) {
      last = s;
      since = Date.now();
    } else if (Date.now() - since >= quietMs) return;
    if (Date.now() > deadline) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}
const ENTER = '\r';
const DOWN = '\x1b[B';
const UP = '\x1b[A';
async function fill(text) {
  await key('\x15'); // Ctrl-U: clear the field
  for (const ch of text) sock.write(ch);
  await key(ENTER);
}

// The guest boots and the live init starts the console on ttyS0: up to a few minutes under TCG.
await page('Hardware Checks', 600_000);
report.firstScreenS = (Date.now() - t0) / 1000;
await waitText('Do you wish to proceed?');
await key(ENTER);
await page('Choose installation mode');
await key(ENTER);
await page('Configure the password to access the node');
await fill('e2e-Passw0rd');
await fill('e2e-Passw0rd');
await page('Choose installation target and data disk. Device will be formatted');
const disks = flat();
if (!disks.includes(values.device)) fail(`${values.device} is not offered on the disk page`);
await key(ENTER); // the suggested disk
await fill('150Gi');
await page('Configure network');
await key(ENTER); // tick the NIC
await key(ENTER); // VLAN
await key(ENTER); // bond mode
await key(ENTER); // DHCP: the console asks slirp for a lease
await waitText('No default route found. Please check the router setting on the DHCP server.', 120_000);
mark('DHCP lease without a router refused');
await key(DOWN); // Static: the address fields appear
await key(ENTER);
await fill('10.0.2.15/24');
await key(ENTER); // the mask, filled from the /24
await fill('10.0.2.2');
await fill(''); // MTU
await page('Configure cluster network', 120_000);
await key(ENTER);
await key(ENTER);
await key(ENTER);
await page('Configure hostname for this instance');
await fill('e2e-console-node');
await page('Configure DNS servers');
await fill('10.0.2.3');
await page('Configure VIP');
await key(DOWN);
await key(ENTER);
await fill('10.0.2.100');
await page('Configure cluster token');
await fill('e2e-console-token');
await page('Configure NTP servers');
await fill('');
await waitText('Empty NTP Server is not recommended');
await key(ENTER);
await page('Optional: configure proxy');
await fill('');
await page('Optional: import SSH keys');
await fill('');
await page('Optional: remote Harvester config');
await fill('');
await page('Confirm installation options');
await waitText('Continue?');
for (let i = 0; i < 5; i++) await key('\x1b[5~'); // PgUp to the top: the list of what will be destroyed
const summary = flat();
if (!summary.includes('EVERYTHING ON THESE DISKS WILL BE DESTROYED:') || !summary.includes(`- ${values.device} (`)) fail(`the confirmation does not list ${values.device} as destroyed`);
await key(DOWN);
await key(UP); // back on "Yes"
await key(ENTER);
await page('Installing Harvester');
const installStart = Date.now();
await waitText(`Harvester was installed on ${values.device}`, installTimeoutMs);
report.installS = (Date.now() - installStart) / 1000;
mark('installed');
await waitText('The system will reboot in');
await key(ENTER); // "Reboot now"
// The guest reboots; QEMU (-no-reboot) exits and the serial socket closes.
const deadline = Date.now() + 120_000;
while (!closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
if (!closed) fail('the guest did not reboot after the install');
if (/[^\x00-\x7f]/.test(raw)) fail('the console sent 8-bit characters to a VT220');
report.totalS = (Date.now() - t0) / 1000;
if (values.report) writeFileSync(values.report, JSON.stringify(report, null, 2));
mark('rebooted');
process.exit(0);
