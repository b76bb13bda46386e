import { Redactor } from './redact.js';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export const LOG_FORMATS = ['text', 'json'] as const;
/** text: one readable line (a terminal); json: JSON lines (journald, files, log shippers). */
export type LogFormat = (typeof LOG_FORMATS)[number];

/**
 * Where log lines go. The logger formats the line; the sink gets its level too, so a sink that
 * marks priorities (lib/journal-sink.ts, for journald) does so in one place for every format.
 */
export interface LogSink {
  /** One line (newline included) and its level. */
  write(line: string, level: LogLevel): void;
}

/**
 * Characters a terminal or a log viewer would act on, beyond what JSON escapes: DEL, the C1 controls
 * (CSI 0x9b starts an escape sequence like ESC [) and the Unicode line and paragraph separators.
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u007f-\u009f\u2028\u2029]/g;

function escapeUnsafe(s: string): string {
  return s.replace(UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** A field's value in a text line: bare when it is one plain word, else JSON (control characters escaped). */
function textValue(v: unknown): string {
  // eslint-disable-next-line no-control-regex
  if (typeof v === 'string') return /^[^\s"=\u0000-\u001f\u007f-\u009f\u2028\u2029]+$/.test(v) ? v : escapeUnsafe(JSON.stringify(v));
  return escapeUnsafe(JSON.stringify(v) ?? String(v));
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
    private readonly format: LogFormat = 'json',
  ) {}

  child(fields: Record<string, unknown>): Logger {
    return new Logger(this.sink, this.redactor, this.level, { ...this.fields, ...fields }, this.now, this.format);
  }

  log(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): void {
    if (ORDER[level] < ORDER[this.level]) return;
    const record = this.redactor.redact({ ts: this.now().toISOString(), level, msg, ...this.fields, ...fields }) as Record<string, unknown>;
    let line: string;
    if (this.format === 'json') line = escapeUnsafe(JSON.stringify(record));
    else {
      const { ts, level: _level, msg: text, ...rest } = record;
      // A field left undefined is left out: a line never says `machine=undefined`.
      const fieldsText = Object.entries(rest).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}=${textValue(v)}`);
      line = [ts, level.toUpperCase().padEnd(5), escapeUnsafe(String(text)), ...fieldsText].join(' ');
    }
    this.sink.write(line + '\n', level);
  }

  debug(msg: string, fields?: Record<string, unknown>): void { this.log('debug', msg, fields); }
  info(msg: string, fields?: Record<string, unknown>): void { this.log('info', msg, fields); }
  warn(msg: string, fields?: Record<string, unknown>): void { this.log('warn', msg, fields); }
  error(msg: string, fields?: Record<string, unknown>): void { this.log('error', msg, fields); }
}

/** A daemon's log format: the flag when given, else text on a terminal and JSON lines otherwise. */
export function chooseLogFormat(flag: LogFormat | undefined, stream: { isTTY?: boolean } = process.stderr): LogFormat {
  return flag ?? (stream.isTTY ? 'text' : 'json');
}

/** A flag's log format or level, checked: a usage error names the choices. */
export function isLogFormat(v: unknown): v is LogFormat {
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
