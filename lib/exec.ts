import { spawn, type ChildProcess } from 'node:child_process';
import { constants, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
    // Its own process group (detached), so a deadline, an abort or the end of the run stops
    // whatever it started too (a chroot command's children, grub-install's helpers).
    const child = spawn(file, [...args], { cwd: opts.cwd, env: opts.env ? { ...process.env, ...opts.env } : process.env, stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'], detached: true });
    const record = track(child, formatCommand(file, args));
    let settled = false;
    const stop = (): void => {
      killGroup(child, 'SIGTERM');
      killTimer ??= setTimeout(() => {
        killGroup(child, 'SIGKILL');
        // A process in uninterruptible sleep (I/O to a disk that stopped answering) outlives
        // SIGKILL: the deadline still ends the wait, and the command is named as stuck.
        killTimer = setTimeout(() => finish({ exitCode: undefined, signal: undefined, stuck: true }), KILL_GRACE_MS);
      }, KILL_GRACE_MS);
    };
    const finish = (end: { exitCode?: number; signal?: NodeJS.Signals; stuck?: boolean }): void => {
      if (settled) return;
      settled = true;
      if (!end.stuck) record.done(); // a stuck one stays recorded, for a re-run to find
      clearTimeout(deadline);
      clearTimeout(killTimer);
      opts.signal?.removeEventListener('abort', onAbort);
      resolve({ exitCode: end.exitCode, signal: end.signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') + (end.stuck ? `\n(did not end ${(2 * KILL_GRACE_MS) / 1000} s after SIGTERM and SIGKILL: stuck in the kernel, left behind)` : ''), timedOut, canceled, spawnError });
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
    child.on('close', (code, signal) => finish({ exitCode: code ?? undefined, signal: signal ?? undefined }));
  });
}

/** Signals a child's whole process group (it leads one); a group already gone is no error. */
function killGroup(child: ChildProcess, sig: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, sig);
  } catch {
    child.kill(sig);
  }
}

interface Tracked {
  child: ChildProcess;
  command: string;
  file?: string;
}

const live = new Set<Tracked>();
let recordDir: string | undefined;

/**
 * Records every command run() starts from now on as `<dir>/<pid>` (its start time and command)
 * while it runs, so that a later process can find the ones a killed run left behind
 * (stopRecordedGroups). undefined stops recording.
 */
export function recordChildrenIn(dir: string | undefined): void {
  recordDir = dir;
  if (dir) mkdirSync(dir, { recursive: true, mode: 0o700 });
}

function track(child: ChildProcess, command: string): { done(): void } {
  const t: Tracked = { child, command };
  live.add(t);
  if (recordDir && child.pid !== undefined) {
    const start = processStartTime(child.pid);
    const file = path.join(recordDir, String(child.pid));
    try {
      writeFileSync(file, JSON.stringify({ pid: child.pid, start, command }) + '\n', { mode: 0o600 });
      t.file = file;
    } catch {
      // best effort: the record helps a later run, it is not needed by this one
    }
  }
  return {
    done() {
      live.delete(t);
      if (t.file) rmSync(t.file, { force: true });
    },
  };
}

/** /proc/<pid>/stat's start time (clock ticks since boot), which tells a pid reused by another process apart. */
function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Waits up to ms for every one of the groups to be gone. */
async function waitGroupsGone(groups: ReadonlyArray<{ pgid: number }>, ms: number): Promise<void> {
  for (const end = Date.now() + ms; Date.now() < end && groups.some((g) => groupAlive(g.pgid)); ) await new Promise((r) => setTimeout(r, 50));
}

/** The process groups of run()'s commands still tracked (running, or stuck in the kernel). */
function liveGroups(): Array<{ pgid: number; command: string }> {
  return [...live].filter((t) => t.child.pid !== undefined).map((t) => ({ pgid: t.child.pid!, command: t.command }));
}

async function stopGroups(groups: Array<{ pgid: number; command: string }>, graceMs: number): Promise<string[]> {
  const signal = (sig: NodeJS.Signals): void => {
    for (const g of groups) {
      try {
        process.kill(-g.pgid, sig);
      } catch {
        // gone already
      }
    }
  };
  signal('SIGTERM');
  await waitGroupsGone(groups, graceMs);
  signal('SIGKILL');
  await waitGroupsGone(groups, graceMs);
  // A process in uninterruptible sleep (I/O to a disk that stopped answering) outlives SIGKILL.
  return groups.filter((g) => groupAlive(g.pgid)).map((g) => `process group ${g.pgid} (${g.command}) did not end within ${(2 * graceMs) / 1000} s of SIGTERM and SIGKILL`);
}

/** The commands run() started that are still running, oldest first. */
export function runningCommands(): string[] {
  return [...live].map((t) => t.command);
}

/**
 * Stops every command run() started that is still running, with its process group: SIGTERM, then
 * SIGKILL after graceMs, and waits for them. Returns those still there after that (a process stuck
 * in the kernel). For the end of a run: nothing it started may outlive its verdict.
 */
export async function stopLiveChildren(graceMs = KILL_GRACE_MS): Promise<string[]> {
  const groups = liveGroups();
  return groups.length ? stopGroups(groups, graceMs) : [];
}

/**
 * Waits up to ms for the process groups of run()'s commands that are still there (ones
 * stopLiveChildren found stuck in the kernel) to end: such a command ends, and does what it was
 * doing, when its disk answers again. Returns those still there after the wait.
 */
export async function waitForLiveChildren(ms: number): Promise<string[]> {
  const groups = liveGroups();
  await waitGroupsGone(groups, ms);
  return groups.filter((g) => groupAlive(g.pgid)).map((g) => `process group ${g.pgid} (${g.command})`);
}

/**
 * Stops the process groups an earlier (killed) run recorded in `dir` (recordChildrenIn) and that
 * still run, and waits for them. Returns what was stopped and what could not be.
 */
export async function stopRecordedGroups(dir: string, graceMs = KILL_GRACE_MS): Promise<{ stopped: string[]; stuck: string[] }> {
  const groups: Array<{ pgid: number; command: string }> = [];
  for (const name of readdirSafe(dir)) {
    try {
      const r = JSON.parse(readFileSync(path.join(dir, name), 'utf8')) as { pid: number; start?: string; command: string };
      // The leader with its recorded start time, or the leader gone and its group still there (a
      // pid is not handed out again while a group of that id lives): the earlier run's group.
      const leader = processStartTime(r.pid);
      if (leader === undefined ? groupAlive(r.pid) : leader === r.start) groups.push({ pgid: r.pid, command: r.command });
    } catch {
      // not a record of ours
    }
    rmSync(path.join(dir, name), { force: true });
  }
  const stuck = groups.length ? await stopGroups(groups, graceMs) : [];
  return { stopped: groups.map((g) => `${g.pgid} (${g.command})`), stuck };
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
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
