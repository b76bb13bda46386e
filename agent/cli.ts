/** hvagent: the resident node agent. `run` (daemon), `once` (one pass) and `status`. */
import path from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { runCli } from '../lib/run-cli.js';
import { ExitCode, HvError } from '../lib/errors.js';
import { Logger } from '../lib/logger.js';
import { Redactor } from '../lib/redact.js';
import { GUARD_ORDER, type GuardName } from './guard.js';
import { configCandidates, loadNodeConfig, registerConfigSecrets } from './node-config.js';
import { runGuards, statusFile } from './runner.js';
import { loadSettings, SETTINGS_PATH } from './settings.js';
import { formatStatusTable, isProcessAlive, readStatus } from './status.js';
import { stderrSink } from './journal-sink.js';
import { detectBootstrapMode } from './mode.js';
import { systemdNotifier } from './sd-notify.js';

const USAGE = `usage: hvagent <run|once|status|console> [options]

  run    [--guard NAME]... [--root DIR] [--settings FILE] [--log-level LEVEL]
         run the guards as a daemon: each keeps its state after success (SIGTERM stops cleanly)
  once   [--guard NAME]... [--root DIR] [--settings FILE] [--log-level LEVEL]
         one pass; exit code 0 when every guard succeeded or was skipped, 1 otherwise
  status [--json] [--root DIR]
         each guard's phase, attempts, detail or last error, next retry and timestamps
  console [--root DIR] [--settings FILE] [--refresh SEC]
         the node's status screen for tty1: management URL, role, node and cluster state, each
         guard's phase and diagnosis, refreshed; F12 opens a shell (docs/console.md)

  --guard NAME   only this guard (repeatable), without its dependencies: for debugging one guard
  --root DIR     every node path (/oem, /etc, /run, /sys, …) under DIR (default /)
  --settings F   agent settings (default <root>${SETTINGS_PATH})

guards: ${GUARD_ORDER.join(', ')}`;

function usageError(msg: string): HvError {
  return new HvError(msg, { hint: "run 'hvagent --help' for usage", exitCode: ExitCode.usage });
}

function parse(args: string[], options: NonNullable<ParseArgsConfig['options']>): Record<string, unknown> {
  try {
    const { values, positionals } = parseArgs({ args, options, allowPositionals: true, strict: true });
    if (positionals.length > 0) throw new Error(`unexpected argument '${positionals[0]}'`);
    return values;
  } catch (err) {
    throw usageError((err as Error).message);
  }
}

async function runCommand(mode: 'run' | 'once', args: string[]): Promise<number> {
  const v = parse(args, {
    guard: { type: 'string', multiple: true },
    root: { type: 'string' },
    settings: { type: 'string' },
    'log-level': { type: 'string' },
  });
  const only = (v.guard as string[] | undefined)?.map((g) => {
    if (!GUARD_ORDER.includes(g as GuardName)) throw usageError(`unknown guard '${g}' (guards: ${GUARD_ORDER.join(', ')})`);
    return g as GuardName;
  });
  const rootDir = path.resolve((v.root as string | undefined) ?? '/');
  const root = (p: string): string => (rootDir === '/' ? p : path.join(rootDir, p));
  const settings = await loadSettings((v.settings as string | undefined) ?? root(SETTINGS_PATH));
  const level = (v['log-level'] as string | undefined) ?? settings.logLevel;
  if (!['debug', 'info', 'warn', 'error'].includes(level)) throw usageError(`--log-level must be debug, info, warn or error, got '${level}'`);

  const redactor = new Redactor();
  const log = new Logger(stderrSink(), redactor, level as 'info');
  const node = await loadNodeConfig(root, configCandidates(settings.common));
  registerConfigSecrets(redactor, node.config);
  for (const p of node.problems) log.warn('node config', { problem: p });
  if (node.source) log.info('node config loaded', { source: node.source });

  const bootstrap = await detectBootstrapMode(rootDir, settings.common.bootstrapper);
  const notify = systemdNotifier(process.env, log);
  await notify({ STATUS: `preparing the node (bootstrap: ${bootstrap.by})` });

  const stop = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => {
    log.info('stopping', { signal: sig });
    stop.abort(new Error(`stopped by ${sig}`));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
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
      onReady: (status) => notify({ READY: '1', STATUS: status }),
    });
    if (result.stopped) return mode === 'run' ? ExitCode.ok : ExitCode.checkFailed;
    return result.ok ? ExitCode.ok : ExitCode.checkFailed;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

async function statusCommand(args: string[]): Promise<number> {
  const v = parse(args, { json: { type: 'boolean' }, root: { type: 'string' } });
  const rootDir = path.resolve((v.root as string | undefined) ?? '/');
  const doc = await readStatus(statusFile(rootDir));
  if (v.json) process.stdout.write(JSON.stringify(doc, null, 2) + '\n');
  else process.stdout.write(formatStatusTable(doc, { now: Date.now(), alive: isProcessAlive(doc.pid) }));
  return doc.guards.some((g) => g.phase === 'failed') ? ExitCode.checkFailed : ExitCode.ok;
}

async function consoleCommand(args: string[]): Promise<number> {
  const v = parse(args, { root: { type: 'string' }, settings: { type: 'string' }, refresh: { type: 'string' } });
  if (!process.stdin.isTTY || !process.stdout.isTTY) throw new HvError('hvagent console needs a terminal', { hint: 'it runs on tty1 (hvagent-console.service); elsewhere use hvagent status', exitCode: ExitCode.usage });
  const refresh = (v.refresh as string | undefined) ?? '5';
  if (!/^\d+$/.test(refresh) || Number(refresh) < 1) throw usageError(`--refresh must be a whole number of seconds, got '${refresh}'`);
  const rootDir = path.resolve((v.root as string | undefined) ?? '/');
  const settings = await loadSettings((v.settings as string | undefined) ?? path.join(rootDir, SETTINGS_PATH));
  const { runDashboard } = await import('./console/run.js');
  return runDashboard({ rootDir, settings, refreshMs: Number(refresh) * 1000, shell: process.env.SHELL || '/bin/bash' });
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (!cmd || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    process.stdout.write(USAGE + '\n');
    return cmd ? ExitCode.ok : ExitCode.usage;
  }
  if (cmd === 'run' || cmd === 'once') return runCommand(cmd, rest);
  if (cmd === 'status') return statusCommand(rest);
  if (cmd === 'console') return consoleCommand(rest);
  process.stderr.write(`hvagent: unknown command '${cmd}'\n\n${USAGE}\n`);
  return ExitCode.usage;
}

// No top-level await: the bundled hvagent (agent/sea-entry.ts, CommonJS) includes this module.
if (import.meta.url === `file://${process.argv[1]}`) void runCli(main, 'hvagent');
