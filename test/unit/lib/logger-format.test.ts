/** Log formats (readable text or JSON lines) and journald priorities (lib/journal-sink.ts); secrets redacted in both. */
import { openSync, closeSync, fstatSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { chooseLogFormat, Logger, MemorySink, type LogFormat, type LogLevel } from '../../../lib/logger.js';
import { isJournalStream, journalLine, stderrSink } from '../../../lib/journal-sink.js';
import { Redactor } from '../../../lib/redact.js';

const NOW = () => new Date('2026-12-01T10:00:00.000Z');

function logger(format: LogFormat) {
  const sink = new MemorySink();
  const redactor = new Redactor();
  redactor.add('hunter2-secret');
  return { sink, log: new Logger(sink, redactor, 'debug', { component: 'x' }, NOW, format) };
}

/** What stderr received while fn ran. */
function stderrOf(fn: () => void): string[] {
  const writes: string[] = [];
  const orig = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((s: string) => (writes.push(s), true)) as typeof process.stderr.write;
  try {
    fn();
  } finally {
    process.stderr.write = orig;
  }
  return writes;
}

describe('Logger formats', () => {
  it('text: time, level, message, then key=value (quoted when needed); the secret redacted', () => {
    const { sink, log } = logger('text');
    log.warn('disk slow', { device: '/dev/sda', note: 'two words', n: 3, token: 'hunter2-secret' });
    expect(sink.lines).toHaveLength(1);
    const line = sink.lines[0]!;
    expect(line).toMatch(/^2026-12-01T10:00:00\.000Z WARN  disk slow component=x device=\/dev\/sda note="two words" n=3 token=\S+\n$/);
    expect(line).not.toContain('hunter2-secret');
  });

  it('json: one object per line with the same fields', () => {
    const { sink, log } = logger('json');
    log.info('hello', { n: 1 });
    expect(JSON.parse(sink.lines[0]!)).toEqual({ ts: '2026-12-01T10:00:00.000Z', level: 'info', msg: 'hello', component: 'x', n: 1 });
  });

  it('hands the sink each line with its level, below the threshold nothing', () => {
    const got: Array<[string, LogLevel]> = [];
    const log = new Logger({ write: (line, level) => got.push([line, level]) }, new Redactor(), 'info', {}, NOW, 'text');
    log.debug('d');
    log.error('e');
    expect(got).toEqual([['2026-12-01T10:00:00.000Z ERROR e\n', 'error']]);
  });

  it('chooses text on a terminal, JSON otherwise, the flag over both', () => {
    expect(chooseLogFormat(undefined, { isTTY: true })).toBe('text');
    expect(chooseLogFormat(undefined, { isTTY: false })).toBe('json');
    expect(chooseLogFormat(undefined, {})).toBe('json');
    expect(chooseLogFormat('text', { isTTY: false })).toBe('text');
    expect(chooseLogFormat('json', { isTTY: true })).toBe('json');
  });
});

describe('what a log line never says', () => {
  it('leaves out fields that are undefined (no `machine=undefined`), in both formats', () => {
    for (const format of ['text', 'json'] as const) {
      const { sink, log } = logger(format);
      log.info('serving', { url: 'http://x', tftp: undefined, default: undefined, n: 0, empty: '' });
      expect(sink.lines[0]).not.toContain('undefined');
      expect(sink.lines[0]).toContain(format === 'text' ? 'n=0 empty=""' : '"n":0,"empty":""');
    }
  });

  it('escapes what a terminal would act on: C0 and C1 controls, DEL, line separators', () => {
    for (const format of ['text', 'json'] as const) {
      const { sink, log } = logger(format);
      log.warn('tftp', { filename: 'a\u001b[31mred\u009b2J\u007f\u2028b', other: '\u001b' });
      expect(sink.lines[0]).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/);
      expect(sink.lines[0]).toContain('a\\u001b[31mred\\u009b2J\\u007f\\u2028b');
      if (format === 'json') expect(JSON.parse(sink.lines[0]!).filename).toBe('a\u001b[31mred\u009b2J\u007f\u2028b');
    }
  });
});

describe('journald priorities (journalctl -p warning shows warn and error only)', () => {
  it('prefixes lines with the syslog priority of their level: error 3, warn 4, info 6, debug 7', () => {
    expect(journalLine('{"msg":"x"}\n', 'error')).toBe('<3>{"msg":"x"}\n');
    expect(journalLine('x\n', 'warn')).toBe('<4>x\n');
    expect(journalLine('x\n', 'info')).toBe('<6>x\n');
    expect(journalLine('x\n', 'debug')).toBe('<7>x\n');
  });

  it('only when stderr is the journal stream systemd named in JOURNAL_STREAM', () => {
    const stat = () => ({ dev: 25, ino: 4711 });
    expect(isJournalStream({ JOURNAL_STREAM: '25:4711' }, 2, stat)).toBe(true);
    expect(isJournalStream({ JOURNAL_STREAM: '25:4712' }, 2, stat)).toBe(false);
    expect(isJournalStream({}, 2, stat)).toBe(false);
    expect(isJournalStream({ JOURNAL_STREAM: 'garbage' }, 2, stat)).toBe(false);
  });

  it('compares the real device and inode of the descriptor (a redirected stderr does not count)', () => {
    const dir = mkdtempSync('/tmp/hv-log-');
    const fd = openSync(path.join(dir, 'f'), 'w');
    const other = openSync(path.join(dir, 'g'), 'w');
    try {
      const st = fstatSync(fd);
      const env = { JOURNAL_STREAM: `${st.dev}:${st.ino}` };
      expect(isJournalStream(env, fd)).toBe(true);
      expect(isJournalStream(env, other)).toBe(false);
      expect(isJournalStream({}, fd)).toBe(false);
    } finally {
      closeSync(fd);
      closeSync(other);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a logger writing to the journal marks every line of either format; warn and error are the only ones at priority 4 or more urgent', () => {
    const journal = { JOURNAL_STREAM: '25:4711' };
    const stat = () => ({ dev: 25, ino: 4711 });
    for (const format of ['json', 'text'] as const) {
      const lines = stderrOf(() => {
        const log = new Logger(stderrSink(journal, stat), new Redactor(), 'debug', {}, NOW, format);
        log.error('e');
        log.warn('w');
        log.info('i');
        log.debug('d');
      });
      const prio = lines.map((l) => Number(/^<(\d)>/.exec(l)?.[1]));
      expect(prio).toEqual([3, 4, 6, 7]);
      // journalctl -p warning: priorities 0..4.
      expect(lines.filter((_, i) => prio[i]! <= 4).map((l) => l.slice(3))).toEqual(
        format === 'json' ? [expect.stringContaining('"msg":"e"'), expect.stringContaining('"msg":"w"')] : ['2026-12-01T10:00:00.000Z ERROR e\n', '2026-12-01T10:00:00.000Z WARN  w\n'],
      );
    }
  });

  it('leaves lines as formatted outside systemd', () => {
    expect(stderrOf(() => stderrSink({}).write('{"level":"warn"}\n', 'warn'))).toEqual(['{"level":"warn"}\n']);
  });
});
