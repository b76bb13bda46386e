/**
 * Walking `hvinstall console` page by page as an operator would, for the console tests: each step
 * waits for the page's title first, so a page that did not appear fails with the screen in the
 * message. Also small servers the pages talk to (NTP over UDP, HTTP for SSH keys and remote configs),
 * all on 127.0.0.1.
 */
import { createSocket, type Socket } from 'node:dgram';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import { KEYS, REPO, Session, type SessionOptions } from './session.js';
import { testTempDir } from '../temp-dir.js';

export const FIXTURES = path.join(REPO, 'test/fixtures/sysroot');

export const TITLES = {
  hardware: 'Hardware Checks',
  mode: 'Choose installation mode',
  role: 'Choose installation role',
  password: 'Configure the password to access the node',
  disk: 'Choose installation target and data disk. Device will be formatted',
  network: 'Configure network',
  clusterNetwork: 'Configure cluster network',
  hostname: 'Configure hostname for this instance',
  dns: 'Configure DNS servers',
  vip: 'Configure VIP',
  serverUrl: 'Configure management address',
  token: 'Configure cluster token',
  ntp: 'Configure NTP servers',
  proxy: 'Optional: configure proxy',
  ssh: 'Optional: import SSH keys',
  configUrl: 'Optional: remote Harvester config',
  summary: 'Confirm installation options',
} as const;

/** A temp dir for one console test, removed when the test finishes (call it in the test). */
export function tempDir(): string {
  return testTempDir('hvconsole-');
}

export interface Started {
  s: Session;
  dir: string;
  configFile: string;
  logFile: string;
}

/** A dry-run console on a fixture machine (or captured facts), writing its config and log in a temp dir. */
export function startDryRun(machine: { sysroot?: string; facts?: string }, extra: string[] = [], opts: SessionOptions = {}): Started {
  const dir = tempDir();
  const configFile = path.join(dir, 'config.yaml');
  const logFile = path.join(dir, 'console.log');
  const where = machine.facts ? ['--facts', machine.facts] : ['--sysroot', path.join(FIXTURES, machine.sysroot ?? 'prod-nvme')];
  const s = Session.console(['--dry-run', ...where, '--write-config', configFile, '--log', logFile, '--cmdline-file', '/dev/null', ...extra], opts);
  return { s, dir, configFile, logFile };
}

/** Clears the focused text field, types a value and leaves the field with Enter. */
export async function fill(s: Session, value: string): Promise<void> {
  await s.keys(KEYS.ctrlU);
  if (value) await s.type(value);
  await s.keys(KEYS.enter);
}

export interface CreateAnswers {
  password?: string;
  hostname?: string;
  vip?: string;
  token?: string;
  ntp?: string;
  configUrl?: string;
  sshKeyUrl?: string;
  proxy?: string;
  /** Return right after filling this page (its check is the test's business). */
  stopAfter?: 'ssh' | 'configUrl';
}

/**
 * From the mode page to `title` in create mode with the defaults (password typed twice, the
 * suggested disk, the first NIC by DHCP, the default cluster network), for tests of one page.
 */
export async function toPage(s: Session, title: string): Promise<void> {
  await s.page(TITLES.mode);
  await s.keys(KEYS.enter);
  await s.page(TITLES.password);
  if (title === TITLES.password) return;
  await fill(s, 'Passw0rd!');
  await fill(s, 'Passw0rd!');
  await s.page(TITLES.disk);
  if (title === TITLES.disk) return;
  for (let i = 0; i < 6 && (await s.settle()).includes(TITLES.disk); i++) await s.keys(KEYS.enter);
  await s.page(TITLES.network);
  if (title === TITLES.network) return;
  await s.keys(KEYS.enter, KEYS.enter, KEYS.enter, KEYS.enter);
  await s.page(TITLES.clusterNetwork);
  if (title === TITLES.clusterNetwork) return;
  await s.keys(KEYS.enter, KEYS.enter, KEYS.enter);
  await s.page(title);
}

/** From the mode page to the summary, creating a cluster with DHCP on the first NIC and a static VIP. */
export async function walkCreate(s: Session, a: CreateAnswers = {}, seen: string[] = []): Promise<void> {
  const at = async (title: string): Promise<void> => {
    await s.page(title);
    seen.push(title);
  };
  await at(TITLES.mode);
  await s.keys(KEYS.enter);
  await at(TITLES.password);
  await fill(s, a.password ?? 'Passw0rd!');
  await fill(s, a.password ?? 'Passw0rd!');
  await at(TITLES.disk);
  // Installation disk, data disk (when there are two), persistent size: the defaults.
  for (let i = 0; i < 6 && (await s.settle()).includes(TITLES.disk); i++) await s.keys(KEYS.enter);
  await at(TITLES.network);
  await s.keys(KEYS.enter, KEYS.enter, KEYS.enter, KEYS.enter); // tick the first NIC, VLAN, bond mode, DHCP
  await at(TITLES.clusterNetwork);
  await s.keys(KEYS.enter, KEYS.enter, KEYS.enter);
  await at(TITLES.hostname);
  await fill(s, a.hostname ?? 'node-1');
  await at(TITLES.dns);
  await fill(s, '');
  await at(TITLES.vip);
  await s.keys(KEYS.down, KEYS.enter);
  await fill(s, a.vip ?? '10.0.0.100');
  await at(TITLES.token);
  await fill(s, a.token ?? 'cluster-token-1');
  await at(TITLES.ntp);
  await fill(s, a.ntp ?? '');
  if (!a.ntp) {
    await s.waitFor('Empty NTP Server is not recommended');
    await s.keys(KEYS.enter);
  }
  await at(TITLES.proxy);
  await fill(s, a.proxy ?? '');
  await at(TITLES.ssh);
  await fill(s, a.sshKeyUrl ?? '');
  if (a.stopAfter === 'ssh') return;
  await at(TITLES.configUrl);
  await fill(s, a.configUrl ?? '');
  if (a.stopAfter === 'configUrl') return;
  await at(TITLES.summary);
}

/** A UDP server on 127.0.0.1 answering NTP client packets with a 48-byte reply. */
export async function ntpResponder(): Promise<{ address: string; close(): void }> {
  const sock: Socket = createSocket('udp4');
  sock.on('message', (msg, rinfo) => {
    const reply = Buffer.alloc(48);
    reply[0] = 0x24; // version 4, mode 4 (server)
    if (msg.length >= 48) sock.send(reply, rinfo.port, rinfo.address);
  });
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
  return { address: `127.0.0.1:${sock.address().port}`, close: () => sock.close() };
}

/** An HTTP server on 127.0.0.1 serving fixed bodies by path. */
export async function httpServer(routes: Record<string, { status?: number; body: string; type?: string }>): Promise<{ url: string; hits: string[]; close(): Promise<void> }> {
  const hits: string[] = [];
  const server: Server = createServer((req, res) => {
    hits.push(req.url ?? '');
    const r = routes[req.url ?? ''];
    res.writeHead(r?.status ?? (r ? 200 : 404), { 'content-type': r?.type ?? 'text/plain' });
    res.end(r?.body ?? 'not found');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, hits, close: () => new Promise((r) => server.close(() => r())) };
}
