import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import path from 'node:path';
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

/** After a deadline's SIGTERM, how long a command gets before SIGKILL. */
const KILL_GRACE_MS = 5_000;

interface Finished {
  exitCode?: number;
  signal?: NodeJS.Signals;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  canceled: boolean;
  spawnError?: NodeJS.ErrnoException;
}

/** Spawns and waits: output collected, stdin fed from `input` (else /dev/null), deadline and abort kill it. */
function spawnAndWait(file: string, args: readonly string[], opts: RunOptions, timeoutMs: number): Promise<Finished> {
  return new Promise((resolve) => {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let timedOut = false;
    let canceled = false;
    let spawnError: NodeJS.ErrnoException | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    // Like a shell: the caller's env adds to (or with undefined, removes from) this process's.
    const child = spawn(file, [...args], { cwd: opts.cwd, env: opts.env ? { ...process.env, ...opts.env } : process.env, stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    const stop = (): void => {
      child.kill('SIGTERM');
      killTimer ??= setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS);
    };
    const deadline = setTimeout(() => {
      timedOut = true;
      stop();
    }, timeoutMs);
    const onAbort = (): void => {
      canceled = true;
      stop();
    };
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener('abort', onAbort, { once: true });
    child.stdout!.on('data', (d: Buffer) => out.push(d));
    child.stderr!.on('data', (d: Buffer) => err.push(d));
    if (child.stdin) {
      // A command that exits without reading its input is not an error of ours.
      child.stdin.on('error', () => undefined);
      child.stdin.end(opts.input);
    }
    child.on('error', (e: NodeJS.ErrnoException) => (spawnError = e));
    child.on('close', (code, signal) => {
      clearTimeout(deadline);
      clearTimeout(killTimer);
      opts.signal?.removeEventListener('abort', onAbort);
      resolve({ exitCode: code ?? undefined, signal: signal ?? undefined, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), timedOut, canceled, spawnError });
    });
  });
}

/** Runs an external tool with a deadline; throws CommandError naming the command and its stderr. */
export async function run(file: string, args: readonly string[] = [], opts: RunOptions = {}): Promise<RunResult> {
  const redactor = opts.redactor ?? new Redactor();
  const command = redactor.redactString(formatCommand(file, args));
  const timeoutMs = opts.timeoutMs ?? 600_000;
  const r = await spawnAndWait(file, args, opts, timeoutMs);
  if (r.canceled) {
    const why = opts.signal?.reason instanceof Error ? opts.signal.reason.message : String(opts.signal?.reason ?? 'aborted');
    throw new CommandError(command, r.exitCode, redactor.redactString(r.stderr), r.stdout, `stopped (${why})`);
  }
  const stdout = r.stdout;
  const stderr = redactor.redactString(r.stderr);
  if (r.timedOut) {
    throw new CommandError(command, r.exitCode, stderr, stdout, `timed out after ${timeoutMs} ms`);
  }
  if (r.spawnError?.code === 'ENOENT') {
    throw new CommandError(command, undefined, '', '', `command not found (install the package that provides ${file})`);
  }
  if (r.spawnError) throw new CommandError(command, undefined, '', '', `cannot run it (${r.spawnError.code ?? r.spawnError.message})`);
  const exitCode = r.exitCode ?? -1;
  if (exitCode !== 0 && !opts.allowFailure) {
    const reason = r.signal ? `killed by ${r.signal}` : `exited with status ${exitCode}`;
    throw new CommandError(command, exitCode, stderr, redactor.redactString(stdout), reason);
  }
  return { command, exitCode, stdout, stderr };
}

/** True when a command is on PATH (an executable regular file in one of its directories, as execvp finds it). */
export async function hasCommand(name: string): Promise<boolean> {
  if (!name || name.includes('/')) return false;
  for (const dir of (process.env.PATH ?? '').split(':').filter(Boolean)) {
    const file = path.join(dir, name);
    const st = await stat(file).catch(() => undefined);
    if (st?.isFile() && (await access(file, constants.X_OK).then(() => true, () => false))) return true;
  }
  return false;
}
