import { fstatSync } from 'node:fs';
import { Redactor } from './redact.js';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export const LOG_FORMATS = ['text', 'json'] as const;
/** text: one readable line (a terminal); json: JSON lines (journald, files, log shippers). */
export type LogStyle = (typeof LOG_FORMATS)[number];
export interface LogFormat {
  style: LogStyle;
  /** Prefix each line with its syslog priority (`<3>`), which journald reads as the entry's PRIORITY. */
  priorityPrefix: boolean;
}

/** Each level's syslog priority (sd-daemon(3)): error 3, warning 4, info 6, debug 7. */
export const JOURNAL_PRIORITY: Record<LogLevel, number> = { error: 3, warn: 4, info: 6, debug: 7 };

export interface LogSink {
  write(line: string): void;
}

const JSON_LINES: LogFormat = { style: 'json', priorityPrefix: false };

function textValue(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  return JSON.stringify(v) ?? String(v);
}

/**
 * The logger. Every record passes through the Redactor, so a secret registered once (or under a
 * secret-named key) never reaches a log line, in either format.
 */
export class Logger {
  constructor(
    private readonly sink: LogSink = { write: (l) => process.stderr.write(l) },
    readonly redactor: Redactor = new Redactor(),
    private readonly level: LogLevel = 'info',
    private readonly fields: Record<string, unknown> = {},
    private readonly now: () => Date = () => new Date(),
    private readonly format: LogFormat = JSON_LINES,
  ) {}

  child(fields: Record<string, unknown>): Logger {
    return new Logger(this.sink, this.redactor, this.level, { ...this.fields, ...fields }, this.now, this.format);
  }

  log(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): void {
    if (ORDER[level] < ORDER[this.level]) return;
    const record = this.redactor.redact({ ts: this.now().toISOString(), level, msg, ...this.fields, ...fields }) as Record<string, unknown>;
    let line: string;
    if (this.format.style === 'json') line = JSON.stringify(record);
    else {
      const { ts, level: _level, msg: text, ...rest } = record;
      line = [ts, level.toUpperCase().padEnd(5), text, ...Object.entries(rest).map(([k, v]) => `${k}=${textValue(v)}`)].join(' ');
    }
    this.sink.write(`${this.format.priorityPrefix ? `<${JOURNAL_PRIORITY[level]}>` : ''}${line}\n`);
  }

  debug(msg: string, fields?: Record<string, unknown>): void { this.log('debug', msg, fields); }
  info(msg: string, fields?: Record<string, unknown>): void { this.log('info', msg, fields); }
  warn(msg: string, fields?: Record<string, unknown>): void { this.log('warn', msg, fields); }
  error(msg: string, fields?: Record<string, unknown>): void { this.log('error', msg, fields); }
}

/**
 * True when `fd` is the stream journald gave this service: systemd sets JOURNAL_STREAM to the
 * device:inode of that stream (systemd.exec(5)), so a redirected stderr does not count.
 */
export function isJournalStream(fd: number, env: NodeJS.ProcessEnv = process.env): boolean {
  const m = /^(\d+):(\d+)$/.exec(env.JOURNAL_STREAM ?? '');
  if (!m) return false;
  try {
    const st = fstatSync(fd, { bigint: true });
    return st.dev === BigInt(m[1]!) && st.ino === BigInt(m[2]!);
  } catch {
    return false;
  }
}

/**
 * The format a daemon's stderr log uses: the flag when given, else text on a terminal and JSON lines
 * otherwise; the journald priority prefix whenever stderr is the service's journal stream.
 */
export function chooseLogFormat(flag: LogStyle | undefined, stream: { isTTY?: boolean; fd?: number } = process.stderr, env: NodeJS.ProcessEnv = process.env): LogFormat {
  return { style: flag ?? (stream.isTTY ? 'text' : 'json'), priorityPrefix: stream.fd !== undefined && isJournalStream(stream.fd, env) };
}

/** A flag's log format or level, checked: a usage error names the choices. */
export function isLogStyle(v: unknown): v is LogStyle {
  return (LOG_FORMATS as readonly unknown[]).includes(v);
}
export function isLogLevel(v: unknown): v is LogLevel {
  return (LOG_LEVELS as readonly unknown[]).includes(v);
}

/** A sink that keeps lines in memory, for tests and for install logs written later. */
export class MemorySink implements LogSink {
  readonly lines: string[] = [];
  write(line: string): void { this.lines.push(line); }
}
