import { describe, expect, it } from 'vitest';
import { EventBus, jsonSink, plainSink, ttySink, describeEvent, progressModeOf, type StampedEvent } from '../../../installer/steps/progress.js';
import { ExitCode, HvError } from '../../../lib/errors.js';
import { Redactor } from '../../../lib/redact.js';

function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}
const collect = () => {
  const out: string[] = [];
  return { out, w: { write: (s: string) => out.push(s) } };
};

describe('install progress', () => {
  it('json: one JSON line per event with ts and elapsed; secrets redacted', () => {
    const c = clock();
    const { out, w } = collect();
    const bus = new EventBus([jsonSink(w)], new Redactor().add('s3cr3t-token'), c.now);
    c.advance(1500);
    bus.emit({ type: 'message', level: 'error', message: 'curl https://x/?t=s3cr3t-token failed' });
    const e = JSON.parse(out[0]!) as StampedEvent;
    expect(e).toMatchObject({ type: 'message', elapsedMs: 1500 });
    expect(out[0]).not.toContain('s3cr3t-token');
    expect(out[0]!.endsWith('\n')).toBe(true);
  });

  it('bytes: average rate since the first event, unchanged and too-frequent updates dropped', () => {
    const c = clock();
    const { out, w } = collect();
    const bus = new EventBus([jsonSink(w)], undefined, c.now);
    bus.bytes('deploy', 0, 100 << 20);
    c.advance(1000);
    bus.bytes('deploy', 50 << 20, 100 << 20);
    c.advance(50);
    bus.bytes('deploy', 51 << 20, 100 << 20); // too soon: dropped
    bus.bytes('deploy', 51 << 20, 100 << 20); // unchanged: dropped
    c.advance(1000);
    bus.bytes('deploy', 100 << 20, 100 << 20);
    const ev = out.map((l) => JSON.parse(l));
    expect(ev.map((e) => e.done)).toEqual([0, 50 << 20, 100 << 20]);
    expect(ev[1].rateBytesPerSec).toBe(50 << 20);
    expect(ev[2].rateBytesPerSec).toBe(Math.round(((100 << 20) * 1000) / 2050));
  });

  it('plain: step lines always, byte lines at most every interval, and the last one', () => {
    const c = clock();
    const { out, w } = collect();
    const bus = new EventBus([plainSink(w, 5000)], undefined, c.now);
    bus.emit({ type: 'step', phase: 'started', step: 'deploy', index: 6, total: 10 });
    for (let i = 1; i <= 20; i++) {
      c.advance(1000);
      bus.bytes('deploy', i << 20, 20 << 20);
    }
    const lines = out.join('').trim().split('\n');
    expect(lines[0]).toBe('[00:00] [6/10] deploy started');
    const byteLines = lines.filter((l) => l.includes('MiB /'));
    expect(byteLines.length).toBeGreaterThanOrEqual(4);
    expect(byteLines.length).toBeLessThanOrEqual(6);
    expect(byteLines.at(-1)).toMatch(/\[00:20\] deploy 20 MiB \/ 20 MiB \(100%\) \d+ (MiB|KiB)\/s/);
  });

  it('plain: a total that grows with the count is not a finish on every event: at most one line every interval', () => {
    const c = clock();
    const { out, w } = collect();
    const bus = new EventBus([plainSink(w, 5000)], undefined, c.now);
    // 25 events a second for 8 s, each with done = total (a copy that learns its size on the way).
    for (let i = 1; i <= 200; i++) {
      c.advance(40);
      bus.bytes('deploy', i << 20, i << 20);
    }
    const byteLines = out.join('').trim().split('\n').filter((l) => l.includes('MiB /'));
    // The step's first line (also its first finish), then one every 5 s.
    expect(byteLines.length).toBeLessThanOrEqual(3);
    expect(byteLines.length).toBeGreaterThanOrEqual(2);
    // A new step gets its first and finishing lines again.
    bus.bytes('persistent', 5 << 20, 10 << 20);
    c.advance(40);
    bus.bytes('persistent', 10 << 20, 10 << 20);
    expect(out.join('').trim().split('\n').filter((l) => l.includes('persistent'))).toHaveLength(2);
  });

  it('tty: byte progress rewrites one line; finished steps scroll above it', () => {
    const c = clock();
    const { out, w } = collect();
    const bus = new EventBus([ttySink(w)], undefined, c.now);
    bus.emit({ type: 'step', phase: 'started', step: 'deploy', index: 6, total: 10 });
    c.advance(1000);
    bus.bytes('deploy', 1 << 20, 4 << 20);
    bus.emit({ type: 'step', phase: 'done', step: 'deploy', index: 6, total: 10 });
    bus.close();
    expect(out[0]!.startsWith('\r\x1b[K[00:00] [6/10] deploy started')).toBe(true);
    expect(out[1]!.startsWith('\r\x1b[K')).toBe(true);
    expect(out[2]).toMatch(/^\r\x1b\[K\[00:01\] \[6\/10\] deploy done\n$/);
    expect(out).toHaveLength(3);
  });

  it('describes every event kind', () => {
    const base = { ts: '', elapsedMs: 61_000 };
    expect(describeEvent({ ...base, type: 'install', phase: 'failed', device: '/dev/sda', message: 'x' })).toBe('[01:01] install failed on /dev/sda: x');
    expect(describeEvent({ ...base, type: 'message', level: 'warn', message: 'careful' })).toBe('[01:01] warn: careful');
  });
});

describe('--progress (progressModeOf)', () => {
  it('the mode given wins; without one, tty on a terminal and plain elsewhere (a log file, a pipe)', () => {
    expect(progressModeOf('json', true)).toBe('json');
    expect(progressModeOf('plain', true)).toBe('plain');
    expect(progressModeOf('tty', false)).toBe('tty');
    expect(progressModeOf(undefined, true)).toBe('tty');
    expect(progressModeOf(undefined, false)).toBe('plain');
  });
  it('any other word is a usage error naming it and the three modes', () => {
    for (const given of ['TTY', 'yaml', '']) {
      let err: unknown;
      try {
        progressModeOf(given, true);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(HvError);
      expect((err as HvError).message).toBe(`--progress ${given}: use tty, plain, json`);
      expect((err as HvError).exitCode).toBe(ExitCode.usage);
    }
  });
});
