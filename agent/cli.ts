/** hvagent: the resident node agent. `run` (daemon), `once` (one pass) and `status`. */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { runCli } from '../lib/run-cli.js';
import { ExitCode, HvError } from '../lib/errors.js';
import { HELP_OPTION, type CommandDef, type OptionDefs } from '../lib/cli/definition.js';
import { describeParseError } from '../lib/cli/parse-error.js';
import { programUsage, runProgram, type Program } from '../lib/cli/program.js';
import { stderrSink } from '../lib/journal-sink.js';
import { chooseLogFormat, isLogFormat, isLogLevel, LOG_FORMATS, LOG_LEVELS, Logger } from '../lib/logger.js';
import { Redactor } from '../lib/redact.js';
import { GUARD_ORDER, type GuardName } from './guard.js';
import { loadSettings, SETTINGS_PATH } from './settings.js';
import { formatStatusTable, isProcessAlive, readStatus, statusFile } from './status.js';
import { ASSESSMENT_USAGE, assessmentCommand, assessmentLine, readAssessmentView } from './assessment/command.js';

const COMMON = `  --guard NAME   only this guard (repeatable), without its dependencies: for debugging one guard
  --root DIR     every node path (/oem, /etc, /run, /sys, …) under DIR (default /)
  --settings F   agent settings (default <root>${SETTINGS_PATH})
  --log-level L  debug, info, warn or error (default: the settings' logLevel)
  --log-format F text (a terminal's default) or json (JSON lines, the default otherwise); under
                 systemd each line carries its journald priority

guards: ${GUARD_ORDER.join(', ')}`;

const LOG_OPTIONS = {
  'log-level': { type: 'string', choices: LOG_LEVELS },
  'log-format': { type: 'string', choices: LOG_FORMATS },
} as const satisfies OptionDefs;
const GUARD_OPTIONS = {
  guard: { type: 'string', multiple: true, choices: GUARD_ORDER },
  root: { type: 'string' },
  settings: { type: 'string' },
  ...LOG_OPTIONS,
} as const satisfies OptionDefs;

/** hvagent's commands: the parser, --help, completion and the man page all read these. */
export const COMMANDS = {
  run: {
    name: 'run',
    summary: 'run the guards as a daemon: each keeps its state after success (SIGTERM stops cleanly)',
    usage: `usage: hvagent run [--guard NAME]... [--root DIR] [--settings FILE] [--log-level LEVEL] [--log-format text|json]\n\nRuns the guards as a daemon: each keeps its state after success (SIGTERM stops cleanly).\n${COMMON}`,
    options: GUARD_OPTIONS,
  },
  once: {
    name: 'once',
    summary: 'one pass of the guards; exit 0 when every guard succeeded or was skipped, 1 otherwise',
    usage: `usage: hvagent once [--guard NAME]... [--root DIR] [--settings FILE] [--log-level LEVEL] [--log-format text|json]\n\nOne pass; exit code 0 when every guard succeeded or was skipped, 1 otherwise.\n${COMMON}`,
    options: GUARD_OPTIONS,
  },
  status: {
    name: 'status',
    summary: "each guard's phase, attempts, detail or last error, next retry and timestamps",
    usage: `usage: hvagent status [--json] [--root DIR]\n\nEach guard's phase, attempts, detail or last error, next retry and timestamps.\n  --json       the status document as JSON (always JSON, also when there is no status yet)\n  --root DIR   the node's root (default /)\nExit codes: 0 no guard failed, 1 a guard failed, 2 usage or no status to read.`,
    options: { json: { type: 'boolean' }, root: { type: 'string' } },
  },
  assessment: {
    name: 'assessment',
    summary: "boot assessment of upgrades: status, or the operator's disarm and arm (docs/upgrade.md)",
    usage: ASSESSMENT_USAGE,
    options: { json: { type: 'boolean' }, root: { type: 'string' } },
  },
  console: {
    name: 'console',
    summary: "the node's status screen for tty1 (docs/console.md)",
    usage: `usage: hvagent console [--root DIR] [--settings FILE] [--refresh SEC]\n\nThe node's status screen for tty1: management URL, role, node and cluster state, each guard's\nphase and diagnosis, refreshed; F12 opens a shell (docs/console.md).\n  --root DIR     the node's root (default /)\n  --settings F   agent settings (default <root>${SETTINGS_PATH})\n  --refresh SEC  repaint this often (default 5)`,
    options: { root: { type: 'string' }, settings: { type: 'string' }, refresh: { type: 'string' } },
  },
} as const satisfies Record<string, CommandDef>;
type CommandName = keyof typeof COMMANDS;

const USAGE = programUsage('hvagent', Object.values(COMMANDS));

function usageError(msg: string): HvError {
  return new HvError(msg, { hint: "run 'hvagent --help' for usage", exitCode: ExitCode.usage });
}

/** Parses a command's arguments by its definition; undefined when --help was given (and printed). */
function parse(cmd: CommandName, args: string[]): Record<string, unknown> | undefined {
  const def: CommandDef = COMMANDS[cmd];
  let values: Record<string, unknown>;
  try {
    const parsed = parseArgs({ args, options: { ...def.options, ...HELP_OPTION }, allowPositionals: true, strict: true });
    const allowed = cmd === 'assessment' ? 1 : 0;
    if (parsed.positionals.length > allowed) throw new Error(`unexpected argument '${parsed.positionals[allowed]}'`);
    values = { ...parsed.values, positionals: parsed.positionals };
  } catch (err) {
    throw new HvError(describeParseError(err, { ...def.options, ...HELP_OPTION }) ?? (err as Error).message, { hint: `run 'hvagent ${cmd} --help' for usage`, exitCode: ExitCode.usage });
  }
  if (values.help) {
    process.stdout.write(def.usage + '\n');
    return undefined;
  }
  return values;
}

async function runCommand(mode: 'run' | 'once', args: string[]): Promise<number> {
  const v = parse(mode, args);
  if (!v) return ExitCode.ok;
  const only = (v.guard as string[] | undefined)?.map((g) => {
    if (!GUARD_ORDER.includes(g as GuardName)) throw usageError(`unknown guard '${g}' (guards: ${GUARD_ORDER.join(', ')})`);
    return g as GuardName;
  });
  const rootDir = path.resolve((v.root as string | undefined) ?? '/');
  const root = (p: string): string => (rootDir === '/' ? p : path.join(rootDir, p));
  const settings = await loadSettings((v.settings as string | undefined) ?? root(SETTINGS_PATH));
  const level = (v['log-level'] as string | undefined) ?? settings.logLevel;
  if (!isLogLevel(level)) throw usageError(`--log-level must be ${LOG_LEVELS.join(', ')}, got '${level}'`);
  const style = v['log-format'];
  if (style !== undefined && !isLogFormat(style)) throw usageError(`--log-format must be text or json, got '${String(style)}'`);

  // The guards and what drives them are loaded by run and once only: status, assessment and the
  // console (tty1, started beside the agent at boot) do without them. The runner loads only the
  // guards it drives, and the boot assessment is the daemon's alone.
  const withAssessment = mode === 'run' && !only;
  const [{ configCandidates, loadNodeConfig, registerConfigSecrets }, { runGuards }, { detectBootstrapMode }, { systemdNotifier }, assessmentWire] = await Promise.all([
    import('./node-config.js'),
    import('./runner.js'),
    import('./mode.js'),
    import('./sd-notify.js'),
    withAssessment ? import('./assessment/wire.js') : undefined,
  ]);
  const redactor = new Redactor();
  const log = new Logger(stderrSink(), redactor, level, {}, undefined, chooseLogFormat(style));
  const node = await loadNodeConfig(root, configCandidates(settings.common));
  registerConfigSecrets(redactor, node.config);
  for (const p of node.problems) log.warn('node config', { problem: p });
  if (node.source) log.info('node config loaded', { source: node.source });

  const bootstrap = await detectBootstrapMode(rootDir, settings.common.bootstrapper);
  const notify = systemdNotifier(process.env, log);
  // Not awaited: the guards start while systemd-notify runs (a process start is most of a second on
  // a busy booting node); READY=1 goes out after it, so systemd sees the two in order.
  const preparing = notify({ STATUS: `preparing the node (bootstrap: ${bootstrap.by})` });

  const stop = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => {
    log.info('stopping', { signal: sig });
    stop.abort(new Error(`stopped by ${sig}`));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // Boot assessment beside the guards (docs/upgrade.md): only the daemon, and only with every guard.
  const assessment = assessmentWire ? assessmentWire.startAssessment(rootDir, settings, log, stop.signal, node.config) : Promise.resolve();
  try {
    const result = await runGuards({
      mode,
      rootDir,
      settings,
      config: node.config,
      log,
      signal: stop.signal,
      only,
      bootstrap,
      onReady: async (status) => {
        await preparing;
        await notify({ READY: '1', STATUS: status });
      },
    });
    await assessment;
    if (result.stopped) return mode === 'run' ? ExitCode.ok : ExitCode.checkFailed;
    return result.ok ? ExitCode.ok : ExitCode.checkFailed;
  } finally {
    await preparing;
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

async function statusCommand(args: string[]): Promise<number> {
  const v = parse('status', args);
  if (!v) return ExitCode.ok;
  const rootDir = path.resolve((v.root as string | undefined) ?? '/');
  let doc;
  try {
    doc = await readStatus(statusFile(rootDir));
  } catch (err) {
    if (!v.json || !(err instanceof HvError)) throw err;
    // --json promises JSON on stdout: the same message and hint, and the same exit code.
    process.stdout.write(JSON.stringify({ error: { message: err.message, hint: err.hint ?? null } }, null, 2) + '\n');
    return err.exitCode;
  }
  const assessment = await readAssessmentView(rootDir).catch(() => undefined);
  if (v.json) process.stdout.write(JSON.stringify({ ...doc, assessment: assessment ?? null }, null, 2) + '\n');
  else process.stdout.write(formatStatusTable(doc, { now: Date.now(), alive: isProcessAlive(doc.pid) }) + assessmentLine(assessment) + '\n');
  return doc.guards.some((g) => g.phase === 'failed') ? ExitCode.checkFailed : ExitCode.ok;
}

async function consoleCommand(args: string[]): Promise<number> {
  const v = parse('console', args);
  if (!v) return ExitCode.ok;
  if (!process.stdin.isTTY || !process.stdout.isTTY) throw new HvError('hvagent console needs a terminal', { hint: 'it runs on tty1 (hvagent-console.service); elsewhere use hvagent status', exitCode: ExitCode.usage });
  const refresh = (v.refresh as string | undefined) ?? '5';
  if (!/^\d+$/.test(refresh) || Number(refresh) < 1) throw usageError(`--refresh must be a whole number of seconds, got '${refresh}'`);
  const rootDir = path.resolve((v.root as string | undefined) ?? '/');
  const settings = await loadSettings((v.settings as string | undefined) ?? path.join(rootDir, SETTINGS_PATH));
  const { runDashboard } = await import('./console/run.js');
  return runDashboard({ rootDir, settings, refreshMs: Number(refresh) * 1000, shell: process.env.SHELL || '/bin/bash' });
}

export const program: Program = {
  name: 'hvagent',
  usage: USAGE,
  commandNames: Object.keys(COMMANDS),
  define: async () => ({ name: 'hvagent', summary: 'the resident node agent of an installed Harvester node', usage: USAGE, commands: Object.values(COMMANDS).map((c) => ({ ...c, options: { ...c.options, ...HELP_OPTION } })) }),
  run(cmd, rest) {
    if (cmd === 'run' || cmd === 'once') return runCommand(cmd, rest);
    if (cmd === 'status') return statusCommand(rest);
    if (cmd === 'assessment') {
      const v = parse('assessment', rest);
      if (!v) return Promise.resolve(ExitCode.ok);
      return assessmentCommand((v.positionals as string[])[0] ?? 'status', path.resolve((v.root as string | undefined) ?? '/'), v.json === true);
    }
    return consoleCommand(rest);
  },
};

export function main(argv: string[]): Promise<number> {
  return runProgram(program, argv);
}

// No top-level await: the bundled hvagent (agent/sea-entry.ts, CommonJS) includes this module.
if (import.meta.url === `file://${process.argv[1]}`) void runCli(main, 'hvagent');
