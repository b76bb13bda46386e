/** beforeStall: a stuck operation fails as a stall; one that keeps making progress does not. */
import { describe, expect, it, vi } from 'vitest';
import { beforeStall, settleWithin, StallError, StallWatchdog } from '../../../lib/stall-watchdog.js';

describe('beforeStall', () => {
  it('rejects an operation that never settles with the description of what stalled', async () => {
    const wd = new StallWatchdog(80);
    const err = await beforeStall(new Promise<never>(() => undefined), wd, (idle) => `no byte from the medium for ${idle >= 80 ? 'the whole' : 'part of the'} timeout`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StallError);
    expect((err as StallError).message).toBe('no byte from the medium for the whole timeout');
    expect((err as StallError).idleMs).toBeGreaterThanOrEqual(80);
  });

  it('lets a slow operation finish while progress is observed, and passes its result and errors through', async () => {
    const wd = new StallWatchdog(80);
    let bytes = 0;
    const feeder = setInterval(() => wd.observe(++bytes), 20);
    const slow = new Promise<string>((r) => setTimeout(() => r('done'), 300));
    try {
      await expect(beforeStall(slow, wd, () => 'stalled')).resolves.toBe('done');
    } finally {
      clearInterval(feeder);
    }
    await expect(beforeStall(Promise.reject(new Error('EIO')), new StallWatchdog(80), () => 'stalled')).rejects.toThrow('EIO');
  });
});

describe('settleWithin', () => {
  const never = new Promise<never>(() => undefined);

  it('is true when the operation settles in time, fulfilled or rejected, and false at the deadline', async () => {
    expect(await settleWithin(Promise.resolve(1), 1000)).toBe(true);
    expect(await settleWithin(Promise.reject(new Error('gone')), 1000)).toBe(true);
    expect(await settleWithin(never, 20)).toBe(false);
  });

  it('holds the process open with its deadline unless asked not to (unref)', async () => {
    const timers: NodeJS.Timeout[] = [];
    const real = globalThis.setTimeout;
    const spy = vi.spyOn(globalThis, 'setTimeout').mockImplementation(((fn: () => void, ms: number) => {
      const t = real(fn, ms);
      timers.push(t);
      return t;
    }) as typeof setTimeout);
    try {
      const held = settleWithin(never, 30);
      const unheld = settleWithin(never, 30, { unref: true });
      expect(timers.map((t) => t.hasRef())).toEqual([true, false]);
      expect(await Promise.all([held, unheld])).toEqual([false, false]);
    } finally {
      spy.mockRestore();
    }
  });
});
