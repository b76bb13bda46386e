/** beforeStall: a stuck operation fails as a stall; one that keeps making progress does not. */
import { describe, expect, it } from 'vitest';
import { beforeStall, StallError, StallWatchdog } from '../../../lib/stall-watchdog.js';

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
