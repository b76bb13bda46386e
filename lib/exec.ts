import { execa, type Options as ExecaOptions } from 'execa';
import { HvError, ExitCode } from './errors.js';
import { Redactor } from './redact.js';

export interface RunOptions {
  /** Kill the command after this many ms (every external call has a deadline). Default 10 min. */
  timeoutMs?: number;
  input?: string | Buffer;
  cwd?: string;
  env?: Record<string, string | undefined>;
  /** Secrets in args/output are redacted in the error message. */
  redactor?: Redactor;
  /** Do not throw on a non-zero exit; return it. */
  allowFailure?: boolean;
  /** Binary stdout (Buffer) instead of a string. */
  encoding?: 'utf8' | 'buffer';
  /** Aborting it kills the command (SIGTERM); the error names the abort's reason. */
  signal?: AbortSignal;
}

export interface RunResult {
  command: string;
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** A command that failed, with the full command line and its stderr in the message. */
export class CommandError extends HvError {
  constructor(
    readonly command: string,
    readonly exitCode_: number | undefined,
    readonly stderr: string,
    readonly stdout: string,
    reason: string,
  ) {
    super(`${reason}: ${command}${stderr.trim() ? `\n${indent(stderr.trim())}` : ''}`, {
      exitCode: ExitCode.installFailed,
    });
    this.name = 'CommandError';
  }
}

function indent(s: string): string {
  const lines = s.split('\n');
  const tail = lines.length > 40 ? ['    …', ...lines.slice(-40)] : lines;
  return tail.map((l) => `    ${l}`).join('\n');
}

export function formatCommand(file: string, args: readonly string[]): string {
  return [file, ...args].map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}

/** Runs an external tool with a deadline; throws CommandError naming the command and its stderr. */
export async function run(file: string, args: readonly string[] = [], opts: RunOptions = {}): Promise<RunResult> {
  const redactor = opts.redactor ?? new Redactor();
  const command = redactor.redactString(formatCommand(file, args));
  const execaOpts: ExecaOptions = {
    timeout: opts.timeoutMs ?? 600_000,
    input: opts.input,
    cwd: opts.cwd,
    env: opts.env,
    reject: false,
    stripFinalNewline: false,
    encoding: 'utf8',
    ...(opts.signal ? { cancelSignal: opts.signal } : {}),
  };
  const r = await execa(file, [...args], execaOpts);
  if (r.isCanceled) {
    const why = opts.signal?.reason instanceof Error ? opts.signal.reason.message : String(opts.signal?.reason ?? 'aborted');
    throw new CommandError(command, r.exitCode, redactor.redactString(String(r.stderr ?? '')), String(r.stdout ?? ''), `stopped (${why})`);
  }
  const stdout = String(r.stdout ?? '');
  const stderr = redactor.redactString(String(r.stderr ?? ''));
  if (r.timedOut) {
    throw new CommandError(command, r.exitCode, stderr, stdout, `timed out after ${execaOpts.timeout} ms`);
  }
  if ((r as { code?: string }).code === 'ENOENT' || /ENOENT/.test(String((r as { originalMessage?: string }).originalMessage ?? ''))) {
    throw new CommandError(command, undefined, '', '', `command not found (install the package that provides ${file})`);
  }
  const exitCode = r.exitCode ?? -1;
  if (exitCode !== 0 && !opts.allowFailure) {
    const reason = r.signal ? `killed by ${r.signal}` : `exited with status ${exitCode}`;
    throw new CommandError(command, exitCode, stderr, redactor.redactString(stdout), reason);
  }
  return { command, exitCode, stdout, stderr };
}

/** True when a command is on PATH. */
export async function hasCommand(name: string): Promise<boolean> {
  const r = await execa('sh', ['-c', `command -v ${name}`], { reject: false });
  return r.exitCode === 0;
}
