/**
 * Log lines for journald: under systemd, stderr is a journal stream and a line starting with `<N>`
 * gets syslog priority N (SyslogLevelPrefix=, on by default; systemd sd-daemon.h SD_ERR … SD_DEBUG),
 * so `journalctl -p warning -u hvagent` shows warnings and errors only. Elsewhere (a terminal, a
 * pipe, the tests) lines stay as the logger formatted them. hvagent and hvpxe log through it.
 */
import { fstatSync } from 'node:fs';
import type { LogLevel, LogSink } from './logger.js';

/** sd-daemon.h: SD_ERR 3, SD_WARNING 4, SD_INFO 6, SD_DEBUG 7. The one level-to-priority map. */
export const SYSLOG_PRIORITY: Record<LogLevel, number> = { error: 3, warn: 4, info: 6, debug: 7 };

export function journalLine(line: string, level: LogLevel): string {
  return `<${SYSLOG_PRIORITY[level]}>${line}`;
}

type FdStat = (fd: number) => { dev: number | bigint; ino: number | bigint };
// bigint: a device or inode number past 2^53 still compares exactly.
const fdStat: FdStat = (fd) => fstatSync(fd, { bigint: true });

/**
 * True when fd is the journal stream systemd connected: JOURNAL_STREAM is "<dev>:<ino>" of it
 * (systemd.exec(5)), so a stderr redirected elsewhere by a child of the service does not count.
 */
export function isJournalStream(env: NodeJS.ProcessEnv, fd: number, stat: FdStat = fdStat): boolean {
  const m = /^(\d+):(\d+)$/.exec(env.JOURNAL_STREAM ?? '');
  if (!m) return false;
  try {
    const st = stat(fd);
    return String(st.dev) === m[1] && String(st.ino) === m[2];
  } catch {
    return false;
  }
}

/** A sink writing to stderr, with priority prefixes when stderr is the journal. */
export function stderrSink(env: NodeJS.ProcessEnv = process.env, stat: FdStat = fdStat): LogSink {
  const journal = isJournalStream(env, 2, stat);
  return { write: (line, level) => void process.stderr.write(journal ? journalLine(line, level) : line) };
}
