import { Redactor } from './redact.js';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface LogSink {
  /** One JSON line (newline included), with its level for sinks that mark it (journald priorities). */
  write(line: string, level: LogLevel): void;
}

/**
 * JSON-lines logger. Every record passes through the Redactor, so a secret registered once
 * (or under a secret-named key) never reaches a log line.
 */
export class Logger {
  constructor(
    private readonly sink: LogSink = { write: (l) => process.stderr.write(l) },
    readonly redactor: Redactor = new Redactor(),
    private readonly level: LogLevel = 'info',
    private readonly fields: Record<string, unknown> = {},
    private readonly now: () => Date = () => new Date(),
  ) {}

  child(fields: Record<string, unknown>): Logger {
    return new Logger(this.sink, this.redactor, this.level, { ...this.fields, ...fields }, this.now);
  }

  log(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): void {
    if (ORDER[level] < ORDER[this.level]) return;
    const record = this.redactor.redact({ ts: this.now().toISOString(), level, msg, ...this.fields, ...fields });
    this.sink.write(JSON.stringify(record) + '\n', level);
  }

  debug(msg: string, fields?: Record<string, unknown>): void { this.log('debug', msg, fields); }
  info(msg: string, fields?: Record<string, unknown>): void { this.log('info', msg, fields); }
  warn(msg: string, fields?: Record<string, unknown>): void { this.log('warn', msg, fields); }
  error(msg: string, fields?: Record<string, unknown>): void { this.log('error', msg, fields); }
}

/** A sink that keeps lines in memory, for tests and for install logs written later. */
export class MemorySink implements LogSink {
  readonly lines: string[] = [];
  write(line: string): void { this.lines.push(line); }
}
