/**
 * `hvinstall console`: the interactive installer of the live system (tty1, and the serial console
 * the kernel command line names). See installer/console/ and docs/console.md.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ExitCode, HvError } from '../../lib/errors.js';
import { Host } from '../../lib/host.js';
import { Logger } from '../../lib/logger.js';
import { Redactor } from '../../lib/redact.js';
import { Terminal } from '../../lib/tui/terminal.js';
import type { MachineFacts } from '../preflight/types.js';
import type { HarvesterConfig } from '../../config/types.js';
import { HELP_OPTION, type OptionDefs } from '../../lib/cli/definition.js';
import { describeParseError } from '../../lib/cli/parse-error.js';

export const USAGE = `usage: hvinstall console [--dry-run --write-config FILE] [--sysroot DIR | --facts FILE] [--cmdline-file F]
                         [--source S] [--bundle DIR|none] [--agent DIR|none] [--state-dir DIR] [--system-size MIB] [--no-reboot]
                         [--log FILE] [--dhcp-timeout SEC] [--refresh SEC] [--config-volume-devices DEV,...]

The interactive installer: a config medium found at start (or F2 on the mode page: a pasted config,
a volume by its label) fills the pages first, then Harvester's pages in Harvester's order (mode, role, password, disks,
network, cluster network, hostname, DNS, VIP or management address, token, NTP, proxy, SSH keys,
remote config), every field checked as it is left with the rules \`hvinstall validate\` uses, a
confirmation listing everything that will be destroyed (the consent for this run), then the install
with its steps and progress. Keys: Enter, Tab/Shift-Tab, arrows, Space, Esc (back), F5 (rescan),
Ctrl-L (redraw), Ctrl-C (asks before quitting).
  --dry-run            stop at the confirmation: write the config (--write-config) and touch no disk
  --write-config FILE  where the config is written (default /run/hvinstall/console/config.yaml)
  --sysroot DIR        read the machine from a captured tree (implies no install: needs --dry-run)
  --facts FILE         machine facts as JSON (hvinstall preflight --json; needs --dry-run)
  --cmdline-file F     kernel command line whose harvester.* keys pre-fill the pages (default /proc/cmdline)
  --source S, --bundle DIR|none, --agent DIR|none, --system-size MIB, --state-dir DIR   as for hvinstall install
  --no-reboot          after the install, stay (do not reboot or power off)
  --log FILE           the console's log, JSON lines, secrets redacted (default /var/log/hvinstall-console.log)
  --dhcp-timeout SEC   how long the network page waits for a DHCP answer (default 30)
  --dhcp-script FILE   udhcpc hook that applies the lease (default: the live system's /etc/hv-live/udhcpc.script)
  --refresh SEC        repaint the whole screen this often, over kernel messages (default 30)
  --config-volume-devices DEV[,DEV...]
                       look for config media (HARVESTER_CONFIG, cidata, config-2) only on these devices or
                       image files (default: every block device; none at start with --sysroot/--facts)
Exit codes: 0 installed (or dry run written), 1 halted by the operator, 2 usage or environment, 3 the install failed, 130 quit.`;

/** What the parser accepts: --help, completion and the man page read the same object. */
export const OPTIONS = {
  'dry-run': { type: 'boolean' },
  'write-config': { type: 'string' },
  sysroot: { type: 'string' },
  facts: { type: 'string' },
  'cmdline-file': { type: 'string' },
  source: { type: 'string' },
  bundle: { type: 'string' },
  agent: { type: 'string' },
  'state-dir': { type: 'string' },
  'system-size': { type: 'string' },
  'no-reboot': { type: 'boolean' },
  log: { type: 'string' },
  'dhcp-timeout': { type: 'string' },
  'dhcp-script': { type: 'string' },
  refresh: { type: 'string' },
  'config-volume-devices': { type: 'string' },
} as const satisfies OptionDefs;

function usageError(message: string): HvError {
  return new HvError(message, { hint: "run 'hvinstall console --help'", exitCode: ExitCode.usage });
}

function seconds(name: string, v: string | undefined, dflt: number): number {
  if (v === undefined) return dflt;
  if (!/^\d+$/.test(v)) throw usageError(`--${name} must be a whole number of seconds (got ${JSON.stringify(v)})`);
  return Number(v);
}

type Values = ReturnType<typeof parseArgs<{ args: string[]; options: typeof OPTIONS & typeof HELP_OPTION; strict: true }>>['values'];

export default async function consoleCommand(argv: string[]): Promise<number> {
  const values = parseConsoleArgs(argv);
  if (!values) return ExitCode.ok;
  const captured = values.sysroot ?? values.facts;
  await checkConsoleArgs(values, !!captured);
  const logFile = values.log ?? '/var/log/hvinstall-console.log';
  const { appendFileSync, mkdirSync } = await import('node:fs');
  mkdirSync(path.dirname(logFile), { recursive: true });
  const redactor = new Redactor();
  const log = new Logger({ write: (l) => appendFileSync(logFile, l, { mode: 0o600 }) }, redactor, 'info', { component: 'console', tty: process.env.HV_CONSOLE_TTY ?? undefined });
  const readFacts = (): Promise<MachineFacts> => machineFacts(values);
  const facts = await readFacts();
  const cmdline = await consoleCmdline(values, !!captured, log);
  redactor.addFrom(cmdline.config);
  const app = await consoleApp(values, { facts, readFacts, base: cmdline.config, defaultTty: cmdline.defaultTty, allowLegacyBios: cmdline.allowLegacyBios, log, logFile, captured: !!captured });
  return runConsoleApp(app.app, app.term, log);
}

/** The options, or undefined after --help. */
function parseConsoleArgs(argv: string[]): Values | undefined {
  let values: Values;
  try {
    ({ values } = parseArgs({ args: argv, options: { ...OPTIONS, ...HELP_OPTION }, strict: true }));
  } catch (err) {
    throw usageError(describeParseError(err, { ...OPTIONS, ...HELP_OPTION }) ?? (err as Error).message);
  }
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return undefined;
  }
  return values;
}

/** What can be refused before the screen is taken: combinations, a terminal, root, and the paths given. */
async function checkConsoleArgs(values: Values, captured: boolean): Promise<void> {
  if (values.sysroot && values.facts) throw usageError('give --sysroot or --facts, not both');
  if (captured && !values['dry-run']) throw usageError('--sysroot and --facts describe another machine: add --dry-run (nothing can be installed there)');
  if (!process.stdin.isTTY || !process.stdout.isTTY) {
    throw new HvError('hvinstall console needs a terminal on standard input and output', { hint: 'run it on a console or over ssh -t; for unattended installs use hvinstall install --config FILE --yes', exitCode: ExitCode.usage });
  }
  if (!values['dry-run'] && process.getuid?.() !== 0) throw new HvError('hvinstall console must run as root to install (or use --dry-run)', { exitCode: ExitCode.usage });
  seconds('dhcp-timeout', values['dhcp-timeout'], 30);
  seconds('refresh', values.refresh, 30);
  if (values.bundle !== undefined) await (await import('../steps/bundle-source.js')).resolveBundleSource(values.bundle);
  if (values.agent !== undefined) await (await import('../steps/agent-source.js')).resolveAgentArg(values.agent);
}

/** This machine, a captured sysroot, or a facts file (--dry-run only). */
async function machineFacts(values: Values): Promise<MachineFacts> {
  if (values.facts) {
    try {
      return JSON.parse(await readFile(values.facts, 'utf8')) as MachineFacts;
    } catch (err) {
      throw new HvError(`cannot read machine facts from ${values.facts}: ${(err as Error).message}`, { hint: 'write them with hvinstall preflight --json', exitCode: ExitCode.usage });
    }
  }
  const { gatherMachineFacts } = await import('../preflight/index.js');
  return gatherMachineFacts(new Host(path.resolve(values.sysroot ?? '/')));
}

/** The kernel command line: its harvester.* keys (pre-filled answers), install.tty, and this run's consents. */
async function consoleCmdline(values: Values, captured: boolean, log: Logger): Promise<{ config: HarvesterConfig; allowLegacyBios: boolean; defaultTty?: string }> {
  const { cmdlineConfig } = await import('../../config/index.js');
  const { legacyBiosFromCmdline } = await import('../../config/cmdline.js');
  const cmdlineFile = values['cmdline-file'] ?? (captured ? undefined : '/proc/cmdline');
  const cmdlineText = cmdlineFile ? await readFile(cmdlineFile, 'utf8').catch(() => '') : '';
  // Most console boots carry no harvester.* key: then there is nothing to parse.
  const base = /(^|\s)harvester\./.test(cmdlineText) ? await cmdlineConfig(cmdlineText, cmdlineFile ?? '<cmdline>') : { config: {} as HarvesterConfig, errors: [], warnings: [] };
  for (const f of [...base.errors, ...base.warnings]) log.warn('kernel command line', { path: f.path, message: f.message });
  // Harvester's console defaults install.tty to the first active console (the installed system's
  // kernel then talks where this installer did: a serial line stays a serial line), when neither the
  // command line nor a config taken on the first page names one.
  const active = await readFile(path.join(path.resolve(values.sysroot ?? '/'), 'sys/class/tty/console/active'), 'utf8').catch(() => '');
  const first = active.trim().split(/\s+/)[0];
  return { config: base.config, allowLegacyBios: legacyBiosFromCmdline(cmdlineText), defaultTty: first || undefined };
}

interface AppInputs {
  facts: MachineFacts;
  readFacts: () => Promise<MachineFacts>;
  base: HarvesterConfig;
  defaultTty?: string;
  allowLegacyBios: boolean;
  log: Logger;
  logFile: string;
  captured: boolean;
}

async function consoleApp(values: Values, a: AppInputs): Promise<{ app: import('../console/app.js').ConsoleApp; term: Terminal }> {
  const { ConsoleApp } = await import('../console/app.js');
  const { defaultDhcpClient, LIVE_DHCP_SCRIPT } = await import('../console/probes.js');
  const { sha512Crypt, isCryptHash } = await import('../render/crypt.js');
  const { existsSync } = await import('node:fs');
  const runDir = '/run/hvinstall/console';
  const term = new Terminal({ input: process.stdin, output: process.stdout }, { refreshMs: seconds('refresh', values.refresh, 30) * 1000 });
  const app = new ConsoleApp(term, {
    facts: a.facts,
    allowLegacyBios: a.allowLegacyBios,
    rescan: a.readFacts,
    base: a.base,
    defaultTty: a.defaultTty,
    configVolumes: configVolumesOf(values, a.captured),
    log: a.log,
    logFile: a.logFile,
    dryRun: values['dry-run'] === true,
    configFile: values['write-config'] ?? path.join(runDir, 'config.yaml'),
    runDir,
    stateDir: values['state-dir'] ?? '/var/lib/hvinstall',
    source: values.source,
    bundle: values.bundle,
    agent: values.agent,
    systemSizeMiB: values['system-size'] === undefined ? undefined : (await import('./plan.js')).parseSystemSize(values['system-size']),
    noReboot: values['no-reboot'] === true,
    probeLinks: !a.captured,
    dhcp: { client: defaultDhcpClient(), script: values['dhcp-script'] ?? (existsSync(LIVE_DHCP_SCRIPT) ? LIVE_DHCP_SCRIPT : undefined), timeoutMs: seconds('dhcp-timeout', values['dhcp-timeout'], 30) * 1000 },
    hashPassword: (clear, salt) => (isCryptHash(clear) ? clear : sha512Crypt(clear, salt)),
  });
  return { app, term };
}

/** Where config media are looked for at start: the devices given, else every one of this machine's (not a captured one's). */
function configVolumesOf(values: Values, captured: boolean): { among?: string[] } | undefined {
  const given = values['config-volume-devices']?.split(',').map((d) => d.trim()).filter(Boolean);
  if (given?.length) return { among: given.map((d) => path.resolve(d)) };
  return captured ? undefined : {};
}

/** Runs the screen; whatever goes wrong inside is logged and shown in a line, never as a stack trace over it. */
async function runConsoleApp(app: import('../console/app.js').ConsoleApp, term: Terminal, log: Logger): Promise<number> {
  const restore = (): void => term.stop();
  process.on('uncaughtException', (err) => {
    log.error('internal error', { error: err.message, stack: err.stack });
    app.internalError(err);
  });
  process.on('unhandledRejection', (err) => {
    log.error('internal error', { error: String((err as Error)?.message ?? err), stack: (err as Error)?.stack });
    app.internalError(err);
  });
  process.once('exit', restore);
  for (const sig of ['SIGTERM', 'SIGHUP'] as const) {
    process.once(sig, () => {
      restore();
      process.exit(143);
    });
  }
  try {
    const code = await app.run();
    log.info('console exited', { code });
    return code;
  } finally {
    restore();
  }
}
