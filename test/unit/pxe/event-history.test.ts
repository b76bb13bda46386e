import { describe, expect, it } from 'vitest';
import { trimEvents } from '../../../pxe/event-history.js';

const ev = (event: string, n: number) => ({ event, n });

describe('trimEvents', () => {
  it("keeps an install's STARTED and its outcome through a long install's progress, dropping the oldest progress", () => {
    const history = [ev('STARTED', 0), ...Array.from({ length: 57 }, (_, i) => ev(i % 3 === 0 ? 'step' : i % 3 === 1 ? 'message' : 'bytes', i + 1)), ev('install', 58), ev('SUCCEEDED', 59)];
    const kept = trimEvents(history, 50);
    expect(kept).toHaveLength(50);
    expect(kept[0]).toEqual(ev('STARTED', 0));
    expect(kept.slice(-2)).toEqual([ev('install', 58), ev('SUCCEEDED', 59)]);
    // The ten oldest progress events went (1..10); the order of the rest is kept.
    expect(kept.slice(1, 48).map((e) => e.n)).toEqual(Array.from({ length: 47 }, (_, i) => i + 11));
  });

  it('returns the history as it is when within the bound', () => {
    const history = [ev('STARTED', 0), ev('step', 1)];
    expect(trimEvents(history, 2)).toEqual(history);
    expect(trimEvents([], 5)).toEqual([]);
  });

  it('drops the oldest lifecycle events only when they alone exceed the bound', () => {
    const history = [ev('FAILED', 0), ev('step', 1), ev('STARTED', 2), ev('FAILED', 3), ev('STARTED', 4), ev('SUCCEEDED', 5)];
    expect(trimEvents(history, 3).map((e) => e.n)).toEqual([3, 4, 5]);
    expect(trimEvents(history, 5).map((e) => e.n)).toEqual([0, 2, 3, 4, 5]);
  });
});
