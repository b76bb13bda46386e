/** Log formats: readable text or JSON lines, journald priority prefixes, secrets redacted in both. */
import { openSync, closeSync, fstatSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { chooseLogFormat, isJournalStream, Logger, MemorySink } from '../../../lib/logger.js';
import { Redactor } from '../../../lib/redact.js';

const NOW = () => new Date('2026-12-01T10:00:00.000Z');

function logger(style: 'text' | 'json', priorityPrefix: boolean) {
  const sink = new MemorySink();
  const redactor = new Redactor();
  redactor.add('hunter2-secret');
  return { sink, log: new Logger(sink, redactor, 'debug', { component: 'x' }, NOW, { style, priorityPrefix }) };
}

describe('Logger formats', () => {
  it('text: time, level, message, then key=value (quoted when needed); the secret redacted', () => {
    const { sink, log } = logger('text', false);
    log.warn('disk slow', { device: '/dev/sda', note: 'two words', n: 3, token: 'hunter2-secret' });
    expect(sink.lines).toHaveLength(1);
    const line = sink.lines[0]!;
    expect(line).toMatch(/^2026-12-01T10:00:00\.000Z WARN  disk slow component=x device=\/dev\/sda note="two words" n=3 token=\S+\n$/);
    expect(line).not.toContain('hunter2-secret');
  });

  it('json: one object per line with the same fields', () => {
    const { sink, log } = logger('json', false);
    log.info('hello', { n: 1 });
    expect(JSON.parse(sink.lines[0]!)).toEqual({ ts: '2026-12-01T10:00:00.000Z', level: 'info', msg: 'hello', component: 'x', n: 1 });
  });

  it('journald priorities: error 3, warn 4, info 6, debug 7, before either format', () => {
    for (const style of ['json', 'text'] as const) {
      const { sink, log } = logger(style, true);
      log.error('e');
      log.warn('w');
      log.info('i');
      log.debug('d');
      expect(sink.lines.map((l) => l.slice(0, 3))).toEqual(['<3>', '<4>', '<6>', '<7>']);
      if (style === 'json') expect(JSON.parse(sink.lines[0]!.slice(3)).msg).toBe('e');
    }
  });

  it('chooses text on a terminal, JSON otherwise, the flag over both; the prefix only for the journal stream itself', () => {
    const dir = mkdtempSync('/tmp/hv-log-');
    const fd = openSync(path.join(dir, 'f'), 'w');
    const other = openSync(path.join(dir, 'g'), 'w');
    try {
      const st = fstatSync(fd);
      const env = { JOURNAL_STREAM: `${st.dev}:${st.ino}` };
      expect(isJournalStream(fd, env)).toBe(true);
      expect(isJournalStream(other, env)).toBe(false);
      expect(isJournalStream(fd, {})).toBe(false);
      expect(chooseLogFormat(undefined, { isTTY: true, fd: other }, env)).toEqual({ style: 'text', priorityPrefix: false });
      expect(chooseLogFormat(undefined, { isTTY: false, fd }, env)).toEqual({ style: 'json', priorityPrefix: true });
      expect(chooseLogFormat('text', { isTTY: false, fd }, env)).toEqual({ style: 'text', priorityPrefix: true });
      expect(chooseLogFormat('json', { isTTY: true }, env)).toEqual({ style: 'json', priorityPrefix: false });
    } finally {
      closeSync(fd);
      closeSync(other);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
