/** hvpxe: the PXE/HTTP boot server. See docs/pxe.md. */
import { parseArgs } from 'node:util';
import path from 'node:path';
import { runCli } from '../lib/run-cli.js';
import { ExitCode, HvError } from '../lib/errors.js';
import { HELP_OPTION, type CommandDef, type OptionDefs } from '../lib/cli/definition.js';
import { programUsage, runProgram, type Program } from '../lib/cli/program.js';
import { stderrSink } from '../lib/journal-sink.js';
import { chooseLogFormat, isLogFormat, isLogLevel, LOG_FORMATS, LOG_LEVELS, Logger } from '../lib/logger.js';
import { writeFileAtomic } from '../lib/atomic-write.js';
import { validateConfig } from '../config/index.js';
import { buildCatalog, readProfiles } from './profiles.js';
import { renderBootScript, renderMachineScript, type Platform } from './ipxe.js';
import { guessSubnet, renderDnsmasqConfig, secureBootClients } from './dnsmasq.js';
import { initExample } from './init.js';
import { PxeServer } from './server.js';
import { renderAndValidateConfigs, type Validator } from './state.js';
import { HISTORY_FILE, requestRearm } from './history.js';
import { parseHistory } from './history-document.js';
import { ADMIN_TOKEN_FILE, DEFAULT_ADMIN_LISTEN, loadAdminToken } from './admin.js';
import { listMachines } from './machines-command.js';
import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { etcdClient, etcdSettings, rearmInEtcd, SERVER_NAME_RE, STORE_OPTIONS, STORE_USAGE, type EtcdSettings } from './store-options.js';
import { EtcdStore } from './store-etcd.js';
import { ArtifactOrigin, ORIGIN_DEFAULT_GIB } from './artifact-origin.js';

const STRING = { type: 'string' } as const;
const BOOLEAN = { type: 'boolean' } as const;

/** hvpxe's commands: the parser, --help, completion and the man page all read these. */
export const COMMANDS = {
  init: {
    name: 'init',
    summary: 'scaffold an example: profiles.yaml (three-node fleet), artifacts/, README.md',
    usage: 'usage: hvpxe init DIR\n\nScaffolds an example in DIR: profiles.yaml (a three-node fleet), artifacts/, README.md.',
    options: {},
  },
  serve: {
    name: 'serve',
    summary: 'serve boot scripts, configs and artifacts; /machines and /metrics on the admin listener (SIGHUP or systemctl reload re-reads profiles.yaml)',
    usage: `usage: hvpxe serve --root DIR --profiles FILE [--listen ADDR:PORT] [--server-url URL] [--tls-cert FILE --tls-key FILE]
                   [--tftp ADDR[:PORT]] [--state-dir DIR] [--admin-listen ADDR:PORT] [--admin-token-file FILE]
                   [--store file|etcd --etcd-endpoints URL,… [--etcd-prefix /hvpxe/FLEET] [--etcd-ca FILE --etcd-cert FILE --etcd-key FILE]]
                   [--server-name NAME] [--artifacts-origin URL [--artifacts-cache DIR] [--artifacts-cache-gib N]]
                   [--log-level LEVEL] [--log-format text|json]

Serves boot scripts, configs and artifacts to booting machines; /machines and /metrics (Prometheus
text format) on the admin listener, to the operator's token only. SIGHUP (systemctl reload hvpxe)
re-reads profiles.yaml.
  --root DIR          the artifacts to serve (profiles.yaml, keys and the state directory must be outside it)
  --profiles FILE     profiles.yaml
  --listen ADDR:PORT  where machines reach it (default 0.0.0.0:8080)
  --server-url URL    the URL machines reach this server at (default: profiles.yaml's server_url)
  --tls-cert FILE, --tls-key FILE   serve https (both listeners)
  --tftp ADDR[:PORT]  serve TFTP too (port 69 by default): shim, grub and its scripts for boot: grub-signed
  --state-dir DIR     the machine history (default: state/ next to profiles.yaml)
  --admin-listen ADDR:PORT   the admin listener: /machines, /metrics, /healthz (default ${DEFAULT_ADMIN_LISTEN})
  --admin-token-file FILE    the operator's bearer token, 0600 (default: <state dir>/${ADMIN_TOKEN_FILE}, created when missing)
${STORE_USAGE}
  --server-name NAME  this server's name in the fleet's store (default: host name-port)
  --artifacts-origin URL     fetch declared artifacts missing under --root from URL/<path> (verified, cached; docs/fleet.md)
  --artifacts-cache DIR      where they are cached (default: <state dir>/artifacts-cache)
  --artifacts-cache-gib N    the cache's size bound in GiB (default ${ORIGIN_DEFAULT_GIB})
  --log-level LEVEL   debug, info, warn or error (default info)
  --log-format F      text (a terminal's default) or json (JSON lines, the default otherwise)`,
    options: {
      root: STRING,
      profiles: STRING,
      listen: STRING,
      'server-url': STRING,
      'tls-cert': STRING,
      'tls-key': STRING,
      tftp: STRING,
      'state-dir': STRING,
      'admin-listen': STRING,
      'admin-token-file': STRING,
      ...STORE_OPTIONS,
      'server-name': STRING,
      'artifacts-origin': STRING,
      'artifacts-cache': STRING,
      'artifacts-cache-gib': STRING,
      'log-level': { type: 'string', choices: LOG_LEVELS },
      'log-format': { type: 'string', choices: LOG_FORMATS },
    },
  },
  machines: {
    name: 'machines',
    summary: 'list the machines a running hvpxe serve knows: what they boot next, how far their install got',
    usage: `usage: hvpxe machines [--admin-url URL] [--admin-token-file FILE | --state-dir DIR | --profiles FILE] [--json]

Lists the machines a running hvpxe serve knows (its admin listener's /machines, with the operator's
token): what each boots next and why, its install's progress, refused requests.
  --admin-url URL          the admin listener (default http://${DEFAULT_ADMIN_LISTEN})
  --admin-token-file FILE  the operator's token (default: <state dir>/${ADMIN_TOKEN_FILE})
  --state-dir DIR          the state directory hvpxe serve uses
  --profiles FILE          or the profiles.yaml whose state/ is next to it
  --json                   print /machines as it is`,
    options: { 'admin-url': STRING, 'admin-token-file': STRING, 'state-dir': STRING, profiles: STRING, json: BOOLEAN },
  },
  rearm: {
    name: 'rearm',
    summary: 'install MACHINE again on its next network boot (after a finished install, or a hold)',
    usage: `usage: hvpxe rearm [--state-dir DIR | --profiles FILE | --store etcd --etcd-endpoints URL,… [--etcd-prefix P]] MACHINE...

Installs each MACHINE (again) on its next network boot, wiping its disk: one that reported a
finished install, or one hvpxe holds on local boot because it cannot tell whether it finished.
  --state-dir DIR   the state directory hvpxe serve uses
  --profiles FILE   or the profiles.yaml whose state/ is next to it
${STORE_USAGE}`,
    options: { 'state-dir': STRING, profiles: STRING, ...STORE_OPTIONS },
  },
  'render-dnsmasq': {
    name: 'render-dnsmasq',
    summary: 'print a dnsmasq configuration: proxy-DHCP + TFTP, or a DHCP server that also answers UEFI HTTP Boot',
    usage: `usage: hvpxe render-dnsmasq --profiles FILE [--server-url URL] [--subnet NET] [--netmask MASK] [--tftp-root DIR] [--interface IF]
                            [--dhcp-range START,END --router IP [--lease-time T] [--no-tftp]] [--http-boot-file PATH] [--tftp-server IP]

Prints a dnsmasq configuration: proxy-DHCP + TFTP, or with --dhcp-range a DHCP server that also
answers UEFI HTTP Boot.
  --profiles FILE        profiles.yaml (for its server_url)
  --server-url URL       the boot server's URL (instead of, or over, profiles.yaml's)
  --subnet NET           the subnet to answer proxy-DHCP on (default: guessed from the server URL)
  --netmask MASK         its netmask
  --tftp-root DIR        where dnsmasq serves the iPXE binaries from
  --interface IF         listen only on this interface
  --dhcp-range START,END be the DHCP server, handing out these addresses (needs --router)
  --router IP            the default route handed out (the installer needs one)
  --lease-time T         the lease time (with --dhcp-range)
  --no-tftp              no TFTP server (with --dhcp-range): only UEFI HTTP Boot and iPXE get boot files
  --http-boot-file PATH  what UEFI HTTP Boot loads, under hvpxe's --root (default ipxe.efi)
  --tftp-server IP       where Secure Boot machines (boot: grub-signed) load shim and grub from: hvpxe
                         serve --tftp (default: the server URL's host)`,
    options: { profiles: STRING, 'server-url': STRING, subnet: STRING, netmask: STRING, 'tftp-root': STRING, interface: STRING, 'dhcp-range': STRING, router: STRING, 'lease-time': STRING, 'http-boot-file': STRING, 'no-tftp': BOOLEAN, 'tftp-server': STRING },
  },
  'render-ipxe': {
    name: 'render-ipxe',
    summary: 'print (or write to DIR) the iPXE scripts, for your own HTTP server',
    usage: `usage: hvpxe render-ipxe --profiles FILE [--server-url URL] [--platform efi|pcbios] [--out DIR]

Prints (or writes to DIR) the iPXE scripts, for your own HTTP server.
  --profiles FILE   profiles.yaml
  --server-url URL  the boot server's URL (default: profiles.yaml's server_url)
  --platform P      efi or pcbios (default: both, chosen by iPXE at boot)
  --out DIR         write boot.ipxe, ipxe/<machine>.ipxe and config/<machine>.yaml (validated) into DIR`,
    options: { profiles: STRING, 'server-url': STRING, platform: { type: 'string', choices: ['efi', 'pcbios'] }, out: STRING },
  },
} as const satisfies Record<string, CommandDef>;
type CommandName = keyof typeof COMMANDS;

const USAGE = programUsage('hvpxe', Object.values(COMMANDS));

const validate: Validator = (raw, opts) => validateConfig(raw, opts);

function usageError(msg: string): HvError {
  return new HvError(msg, { hint: "run 'hvpxe --help'", exitCode: ExitCode.usage });
}

/** Parses a command's arguments by its definition; `help` is set when --help was given. */
function parse<const T extends OptionDefs>(cmd: CommandName, options: T, argv: string[], allowPositionals = false) {
  try {
    return parseArgs({ args: argv, options: { ...options, ...HELP_OPTION }, allowPositionals, strict: true });
  } catch (err) {
    throw new HvError((err as Error).message, { hint: `run 'hvpxe ${cmd} --help'`, exitCode: ExitCode.usage });
  }
}

function help(cmd: CommandName): number {
  process.stdout.write(COMMANDS[cmd].usage + '\n');
  return ExitCode.ok;
}

export function parseListen(listen: string, flag = '--listen'): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(listen);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw usageError(`${flag} must be ADDR:PORT (e.g. 0.0.0.0:8080 or [::]:8080), got '${listen}'`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}

async function serverUrlFrom(flag: string | undefined, profilesPath: string): Promise<string> {
  const url = flag ?? (await readProfiles(profilesPath)).server_url;
  if (!url) throw usageError('no server URL: pass --server-url or set server_url in profiles.yaml');
  if (!/^https?:\/\/[^/\s?#]+\/?$/.test(url)) throw usageError(`server URL must look like http://HOST[:PORT], got '${url}'`);
  return url.replace(/\/+$/, '');
}

/** The state directory: --state-dir, else state/ next to profiles.yaml. Never under the served root (the history names machines). */
export function stateDirFor(stateDir: string | undefined, profilesPath: string, root?: string): string {
  const dir = path.resolve(stateDir ?? path.join(path.dirname(path.resolve(profilesPath)), 'state'));
  if (root) {
    const rel = path.relative(path.resolve(root), dir);
    if (rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel))) throw usageError(`the state directory ${dir} is inside --root ${root}, which hvpxe serves: pass --state-dir outside it`);
  }
  return dir;
}

type ServeOpts = Omit<ConstructorParameters<typeof PxeServer>[0], 'log' | 'admin' | 'store' | 'origin'> & {
  admin: { host: string; port: number; tokenFile: string };
  etcd?: EtcdSettings;
  origin?: { url: string; dir: string; maxBytes: number };
};

/** --artifacts-origin and its cache, checked. */
function originOptions(v: Record<string, string | undefined>, stateDir: string): ServeOpts['origin'] {
  const url = v['artifacts-origin'];
  if (!url) {
    if (v['artifacts-cache'] || v['artifacts-cache-gib']) throw usageError('--artifacts-cache and --artifacts-cache-gib need --artifacts-origin URL');
    return undefined;
  }
  if (!/^https?:\/\/[^\s?#]+$/.test(url)) throw usageError(`--artifacts-origin must be an http(s) URL, got '${url}'`);
  const gib = Number(v['artifacts-cache-gib'] ?? ORIGIN_DEFAULT_GIB);
  if (!(gib > 0)) throw usageError(`--artifacts-cache-gib must be a positive number, got '${v['artifacts-cache-gib']}'`);
  return { url: url.replace(/\/+$/, ''), dir: path.resolve(v['artifacts-cache'] ?? path.join(stateDir, 'artifacts-cache')), maxBytes: Math.floor(gib * 2 ** 30) };
}

/** serve's options, checked, as PxeServer takes them (the admin token is read, the store and the origin built, later). */
async function serveOptions(values: Record<string, string | boolean | undefined>): Promise<ServeOpts> {
  const v = values as Record<string, string | undefined>;
  if (!v.root || !v.profiles) throw usageError('serve needs --root DIR and --profiles FILE');
  const stateDir = stateDirFor(v['state-dir'], v.profiles, v.root);
  if (!!v['tls-cert'] !== !!v['tls-key']) throw usageError('--tls-cert and --tls-key go together');
  const { host, port } = parseListen(v.listen ?? '0.0.0.0:8080');
  const admin = parseListen(v['admin-listen'] ?? DEFAULT_ADMIN_LISTEN, '--admin-listen');
  const tftp = v.tftp === undefined ? undefined : parseListen(/:\d{1,5}$/.test(v.tftp) ? v.tftp : `${v.tftp}:69`, '--tftp');
  const profilesPath = path.resolve(v.profiles);
  let serverUrl = v['server-url'] ?? (await readProfiles(profilesPath)).server_url;
  const wildcard = host === '0.0.0.0' || host === '::' || host === '';
  if (!serverUrl && wildcard) throw usageError(`listening on ${host} needs a URL machines can reach: pass --server-url or set server_url in profiles.yaml`);
  if (serverUrl && !/^https?:\/\/[^/\s?#]+\/?$/.test(serverUrl)) throw usageError(`server URL must look like http://HOST[:PORT], got '${serverUrl}'`);
  serverUrl = serverUrl?.replace(/\/+$/, '');
  const serverName = v['server-name'] ?? `${hostname()}-${port}`;
  if (!SERVER_NAME_RE.test(serverName)) throw usageError(`--server-name must be letters, digits, . _ : - (at most 128), got '${serverName}'`);
  return {
    root: path.resolve(v.root),
    profilesPath,
    host,
    port,
    serverUrl,
    tls: v['tls-cert'] ? { certFile: path.resolve(v['tls-cert']), keyFile: path.resolve(v['tls-key']!) } : undefined,
    validate,
    stateDir,
    tftp,
    serverName,
    etcd: etcdSettings(values),
    origin: originOptions(v, stateDir),
    admin: { ...admin, tokenFile: path.resolve(v['admin-token-file'] ?? path.join(stateDir, ADMIN_TOKEN_FILE)) },
  };
}

/** The log `hvpxe serve` writes, by --log-level and --log-format. */
function serveLogger(values: { 'log-level'?: string; 'log-format'?: string }): Logger {
  const level = values['log-level'] ?? 'info';
  if (!isLogLevel(level)) throw usageError(`--log-level must be ${LOG_LEVELS.join(', ')}, got '${level}'`);
  const style = values['log-format'];
  if (style !== undefined && !isLogFormat(style)) throw usageError(`--log-format must be text or json, got '${style}'`);
  return new Logger(stderrSink(), undefined, level, {}, undefined, chooseLogFormat(style));
}

/** The server with its store (etcd for a fleet) and its artifacts origin. */
async function buildServer(opts: ServeOpts, log: Logger): Promise<PxeServer> {
  const { token, created } = await loadAdminToken(opts.admin.tokenFile);
  if (created) log.info('admin token created', { file: opts.admin.tokenFile });
  const { etcd, origin, ...rest } = opts;
  let server: PxeServer | undefined;
  const store = etcd ? new EtcdStore({ client: etcdClient(etcd), prefix: etcd.prefix, server: opts.serverName!, url: () => server?.url ?? '', log }) : undefined;
  const artifactOrigin = origin ? new ArtifactOrigin({ ...origin, log }) : undefined;
  server = new PxeServer({ ...rest, log, admin: { ...opts.admin, token }, store, origin: artifactOrigin });
  return server;
}

async function serve(argv: string[]): Promise<number> {
  // A SIGHUP during start-up (systemctl reload right after start) must not kill hvpxe: it is
  // remembered and applied once the server is up.
  let hupDuringStart = false;
  const earlyHup = (): void => {
    hupDuringStart = true;
  };
  process.on('SIGHUP', earlyHup);
  const { values } = parse('serve', COMMANDS.serve.options, argv);
  if (values.help) return help('serve');
  const opts = await serveOptions(values);
  const log = serveLogger(values);
  log.info('starting', { root: opts.root, profiles: opts.profilesPath, stateDir: opts.stateDir, store: opts.etcd ? 'etcd' : 'file', server: opts.serverName });
  const server = await buildServer(opts, log);
  const url = await server.start();
  process.stdout.write(`hvpxe: serving ${url} (root ${values.root}, profiles ${values.profiles}); admin ${server.adminUrl} (token in ${opts.admin.tokenFile}); SIGHUP reloads\n`);
  let reloading = Promise.resolve(true);
  const reload = (): void => {
    reloading = reloading.then(() => server.reload());
  };
  process.on('SIGHUP', reload);
  process.off('SIGHUP', earlyHup);
  if (hupDuringStart) reload();
  await new Promise<void>((resolve) => {
    const stop = (sig: string): void => {
      log.info('stopping', { signal: sig });
      void server.close().then(resolve);
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  return ExitCode.ok;
}

/** The machine history as `hvpxe rearm` reads it: exit 2 when it cannot be read or is not a history. */
async function readHistoryFile(file: string): Promise<ReturnType<typeof parseHistory>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new HvError(`cannot read the machine history ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { hint: 'pass the --state-dir hvpxe serve uses', exitCode: ExitCode.usage });
  }
  try {
    return parseHistory(text);
  } catch (err) {
    throw new HvError(`${file}: ${(err as Error).message}`, { hint: 'hvpxe serve sets a broken history aside at start-up; restart it first', exitCode: ExitCode.usage });
  }
}

/** `hvpxe rearm --store etcd`: each machine's record re-armed in etcd; every server sees it by its watch. */
async function rearmEtcd(settings: EtcdSettings, names: string[]): Promise<number> {
  const client = etcdClient(settings);
  try {
    for (const name of names) {
      const r = await rearmInEtcd(client, settings.prefix, name).catch((err: Error) => {
        if (err instanceof HvError) throw err;
        throw new HvError(`cannot re-arm ${name} in etcd (${client.where} ${settings.prefix}): ${err.message}`, { hint: 'nothing was changed; check that etcd has quorum (etcdctl endpoint health) and try again', exitCode: ExitCode.usage });
      });
      if (r.kind === 'unknown') throw new HvError(`no machine named ${name} under ${settings.prefix}`, { hint: `machines in the store: ${r.known.join(', ') || 'none'}`, exitCode: ExitCode.checkFailed });
      if (r.kind === 'not-installed') {
        process.stdout.write(`hvpxe: ${name} has not reported a finished install: its next network boot installs it anyway\n`);
        continue;
      }
      const was = r.was.installed ? `installed ${r.was.installed.at}` : `held: ${r.was.hold?.why}`;
      process.stdout.write(`hvpxe: ${name} (${was}) re-armed in ${settings.prefix}: its next network boot, through any server, installs it again, wiping its disk\n`);
    }
  } finally {
    await client.close();
  }
  return ExitCode.ok;
}

async function rearm(argv: string[]): Promise<number> {
  const { values, positionals } = parse('rearm', COMMANDS.rearm.options, argv, true);
  if (values.help) return help('rearm');
  if (positionals.length === 0) throw usageError('rearm needs at least one machine name');
  const etcd = etcdSettings(values);
  if (etcd) return rearmEtcd(etcd, positionals);
  if (!values['state-dir'] && !values.profiles) throw usageError('rearm needs --state-dir DIR (or --profiles FILE, for the state/ next to it)');
  const dir = stateDirFor(values['state-dir'], values.profiles ?? '.');
  const file = path.join(dir, HISTORY_FILE);
  const history = await readHistoryFile(file);
  const unknown = positionals.filter((name) => !history.machines.some((x) => x.name === name) && !history.lost);
  if (unknown.length > 0) {
    throw new HvError(`no machine named ${unknown.join(', ')} in ${file}`, { hint: `machines in the history: ${history.machines.map((x) => x.name).join(', ') || 'none'}`, exitCode: ExitCode.checkFailed });
  }
  for (const name of positionals) {
    const m = history.machines.find((x) => x.name === name);
    if (m && !m.installed && !m.hold && !history.lost) {
      process.stdout.write(`hvpxe: ${name} has not reported a finished install: its next network boot installs it anyway\n`);
      continue;
    }
    const marker = await requestRearm(dir, name);
    const was = m?.installed ? `installed ${m.installed.at}` : m?.hold ? `held: ${m.hold.why}` : `history lost at ${history.lost?.at}`;
    process.stdout.write(`hvpxe: ${name} (${was}) re-armed: its next network boot installs it again, wiping its disk (${marker})\n`);
  }
  return ExitCode.ok;
}

async function machines(argv: string[]): Promise<number> {
  const { values } = parse('machines', COMMANDS.machines.options, argv);
  if (values.help) return help('machines');
  const tokenFile = values['admin-token-file'] ?? path.join(stateDirFor(values['state-dir'], values.profiles ?? '.'), ADMIN_TOKEN_FILE);
  if (!values['admin-token-file'] && !values['state-dir'] && !values.profiles) throw usageError('machines needs --admin-token-file FILE, --state-dir DIR or --profiles FILE (for the operator token)');
  const { token } = await loadAdminToken(tokenFile, false);
  process.stdout.write(await listMachines(values['admin-url'] ?? `http://${DEFAULT_ADMIN_LISTEN}`, token, !!values.json));
  return ExitCode.ok;
}

async function renderDnsmasq(argv: string[]): Promise<number> {
  const { values } = parse('render-dnsmasq', COMMANDS['render-dnsmasq'].options, argv);
  if (values.help) return help('render-dnsmasq');
  if (!values.profiles && !values['server-url']) throw usageError('render-dnsmasq needs --profiles FILE or --server-url URL');
  if (!values['dhcp-range'] !== !values.router) throw usageError('--dhcp-range START,END and --router IP go together (dnsmasq as the DHCP server must announce a router)');
  if (values['lease-time'] && !values['dhcp-range']) throw usageError('--lease-time needs --dhcp-range');
  const range = values['dhcp-range']?.split(',');
  if (range && range.length !== 2) throw usageError(`--dhcp-range must be START,END, got '${values['dhcp-range']}'`);
  const dhcp = range ? { start: range[0]!, end: range[1]!, router: values.router!, leaseTime: values['lease-time'] } : undefined;
  const serverUrl = values.profiles ? await serverUrlFrom(values['server-url'], values.profiles) : values['server-url']!.replace(/\/+$/, '');
  const subnet = values.subnet ?? (dhcp ? undefined : guessSubnet(serverUrl));
  if (!subnet && !dhcp) throw usageError('the server URL has no IPv4 address to guess the subnet from: pass --subnet NET (e.g. 10.0.0.0)');
  const catalog = values.profiles ? buildCatalog(await readProfiles(values.profiles), values.profiles) : undefined;
  try {
    const secureBoot = catalog ? secureBootClients(catalog, values['tftp-server'] ?? new URL(serverUrl).hostname) : undefined;
    process.stdout.write(
      renderDnsmasqConfig({ serverUrl, subnet, netmask: values.netmask, tftpRoot: values['tftp-root'], interface: values.interface, dhcp, httpBootFile: values['http-boot-file'], noTftp: values['no-tftp'], secureBoot }),
    );
  } catch (err) {
    throw usageError((err as Error).message);
  }
  if (!values.subnet && !dhcp) process.stderr.write(`hvpxe: answering proxy-DHCP on ${subnet} (guessed from ${serverUrl}; pass --subnet to change)\n`);
  return ExitCode.ok;
}

async function renderIpxe(argv: string[]): Promise<number> {
  const { values } = parse('render-ipxe', COMMANDS['render-ipxe'].options, argv);
  if (values.help) return help('render-ipxe');
  if (!values.profiles) throw usageError('render-ipxe needs --profiles FILE');
  if (values.platform && values.platform !== 'efi' && values.platform !== 'pcbios') throw usageError('--platform is efi or pcbios');
  const serverUrl = await serverUrlFrom(values['server-url'], values.profiles);
  const catalog = buildCatalog(await readProfiles(values.profiles), values.profiles);
  const platform = values.platform as Platform | undefined;
  const files: Array<{ name: string; text: string; mode: number }> = [{ name: 'boot.ipxe', text: renderBootScript(serverUrl), mode: 0o644 }];
  for (const m of catalog.machines) files.push({ name: `ipxe/${m.name}.ipxe`, text: renderMachineScript(catalog, m, serverUrl, { platform }), mode: 0o644 });
  if (values.out) {
    const rendered = await renderAndValidateConfigs(catalog, serverUrl, validate);
    if (rendered.errors.length) {
      throw new HvError(`configs invalid:\n${rendered.errors.map((e) => `  - ${rendered.redactor.redactString(e)}`).join('\n')}`, { exitCode: ExitCode.checkFailed });
    }
    for (const [name, yaml] of rendered.configs) files.push({ name: `config/${name}.yaml`, text: yaml, mode: 0o600 });
    for (const f of files) await writeFileAtomic(path.join(values.out, f.name), f.text, { mode: f.mode });
    process.stdout.write(files.map((f) => path.join(values.out!, f.name)).join('\n') + '\n');
    process.stderr.write(
      'hvpxe: these scripts chain to /ipxe/auto, which needs hvpxe serve; with a static server, point each machine at ipxe/<machine>.ipxe (e.g. per-MAC DHCP filename).\n',
    );
  } else {
    process.stdout.write(files.map((f) => `### ${f.name}\n${f.text}`).join('\n'));
  }
  return ExitCode.ok;
}

async function init(argv: string[]): Promise<number> {
  const { positionals, values } = parse('init', COMMANDS.init.options, argv, true);
  if (values.help) return help('init');
  if (positionals.length !== 1) throw usageError('init needs exactly one directory');
  const written = await initExample(positionals[0]!);
  process.stdout.write(`hvpxe: wrote\n${written.map((f) => `  ${f}`).join('\n')}\nNext: read ${path.join(positionals[0]!, 'README.md')}\n`);
  return ExitCode.ok;
}

const RUN: Record<CommandName, (argv: string[]) => Promise<number>> = { init, serve, machines, rearm, 'render-dnsmasq': renderDnsmasq, 'render-ipxe': renderIpxe };

export const program: Program = {
  name: 'hvpxe',
  usage: USAGE,
  commandNames: Object.keys(COMMANDS),
  define: async () => ({ name: 'hvpxe', summary: 'the PXE/HTTP boot server for Harvester installs', usage: USAGE, commands: Object.values(COMMANDS).map((c) => ({ ...c, options: { ...c.options, ...HELP_OPTION } })) }),
  run: (cmd, rest) => RUN[cmd as CommandName](rest),
};

export function main(argv: string[]): Promise<number> {
  return runProgram(program, argv);
}

if (import.meta.url === `file://${process.argv[1]}`) await runCli(main, 'hvpxe');
