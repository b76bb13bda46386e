/**
 * What every program (hvinstall, hvagent, hvpxe) does the same way before a command runs: help,
 * `help CMD`, `--version`/`version [--json]`, `completion SHELL`, and unknown commands (with a
 * did-you-mean). Usage goes to stdout with exit 0 only when asked for; otherwise to stderr, exit 2.
 */
import { EXIT_CODES_LINE, ExitCode } from '../errors.js';
import { completionScript, SHELLS, type Shell } from './completion.js';
import type { ProgramDef } from './definition.js';
import { suggest } from './suggest.js';
import { formatVersion, versionInfo } from './version.js';

export interface Program {
  name: string;
  usage: string;
  commandNames: readonly string[];
  /** The full definition (may load every command module): for completion and man pages. */
  define(): Promise<ProgramDef>;
  run(command: string, argv: string[]): Promise<number>;
}

/**
 * A program's top-level usage: its commands, the words every program answers itself, and the exit
 * codes. `help` reads "help CMD [SUB]" for a program with subcommands (hvinstall fetch config).
 */
export function programUsage(name: string, commands: ReadonlyArray<{ name: string; summary: string }>, opts: { subcommands?: boolean } = {}): string {
  const width = Math.max(...commands.map((c) => c.name.length), 'completion'.length);
  const line = (n: string, summary: string): string => `  ${n.padEnd(width)}  ${summary}`;
  return [
    `usage: ${name} <command> [options]`,
    '',
    'commands:',
    ...commands.map((c) => line(c.name, c.summary)),
    line('help', `help CMD${opts.subcommands ? ' [SUB]' : ''}: a command's options (as CMD --help)`),
    line('version', 'the version and the git commit it was built from (--json)'),
    line('completion', 'completion bash|zsh|fish: a shell completion script'),
    '',
    `Run '${name} <command> --help' for a command's options.`,
    EXIT_CODES_LINE,
  ].join('\n');
}

/** The words a program answers itself, beside its commands. */
export const BUILTIN_COMMANDS = ['help', 'version', 'completion'] as const;

const out = (s: string): void => void process.stdout.write(s.endsWith('\n') ? s : s + '\n');
const err = (s: string): void => void process.stderr.write(s.endsWith('\n') ? s : s + '\n');

function unknown(p: Program, what: string, given: string, known: readonly string[]): number {
  const near = suggest(given, known);
  err(`${p.name}: unknown ${what} '${given}'${near ? ` (did you mean '${near}'?)` : ''}\n  hint: run '${p.name} --help' for the commands`);
  return ExitCode.usage;
}

export async function runProgram(p: Program, argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) {
    err(p.usage);
    return ExitCode.usage;
  }
  if (name === '-h' || name === '--help' || (name === 'help' && rest.length === 0)) {
    out(p.usage);
    return ExitCode.ok;
  }
  if (name === 'help') {
    const [cmd, ...sub] = rest;
    if (!p.commandNames.includes(cmd!)) return unknown(p, 'command', cmd!, p.commandNames);
    return p.run(cmd!, [...sub, '--help']);
  }
  // -V and -v: what people type for a version (node -v, many tools -V); neither is a command of ours.
  if (name === '--version' || name === 'version' || name === '-V' || name === '-v') {
    const extra = rest.filter((a) => a !== '--json');
    if (extra.length) {
      err(`${p.name}: ${name} takes only --json (got '${extra[0]}')`);
      return ExitCode.usage;
    }
    out(formatVersion(versionInfo(p.name), rest.includes('--json')));
    return ExitCode.ok;
  }
  if (name === 'completion') {
    const [shell, ...more] = rest;
    if (shell === '-h' || shell === '--help') {
      out(`usage: ${p.name} completion bash|zsh|fish\n\nPrints a completion script, e.g.\n  ${p.name} completion bash > /etc/bash_completion.d/${p.name}`);
      return ExitCode.ok;
    }
    if (!SHELLS.includes(shell as Shell) || more.length) {
      err(`usage: ${p.name} completion bash|zsh|fish${shell === undefined ? '' : ` (got '${[shell, ...more].join(' ')}')`}`);
      return ExitCode.usage;
    }
    out(completionScript(await p.define(), shell as Shell));
    return ExitCode.ok;
  }
  if (!p.commandNames.includes(name)) return unknown(p, 'command', name, [...p.commandNames, ...BUILTIN_COMMANDS]);
  return p.run(name, rest);
}
