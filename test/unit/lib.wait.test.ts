import { describe, expect, it } from 'vitest';
import { waitUntil, retry, DeadlineError } from '../../lib/wait.js';

function fakeClock() {
  let t = 0;
  return { now: () => t, sleep: async (ms: number) => { t += ms; } };
}

describe('waitUntil', () => {
  it('returns the value once the probe is done', async () => {
    const c = fakeClock();
    let n = 0;
    const v = await waitUntil(() => (++n >= 3 ? { done: true, value: n } : { done: false, reason: `n=${n}` }), {
      what: 'counter', timeoutMs: 10_000, intervalMs: 100, ...c,
    });
    expect(v).toBe(3);
  });

  it('gives up at the deadline with the last reason as the diagnosis', async () => {
    const c = fakeClock();
    const err = await waitUntil(() => ({ done: false, reason: 'bond mgmt-bo: 0 of 2 slaves active' }), {
      what: 'network online', timeoutMs: 5_000, intervalMs: 1_000, ...c,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeadlineError);
    expect((err as Error).message).toBe('network online: gave up after 5 s: bond mgmt-bo: 0 of 2 slaves active');
  });
});

describe('retry', () => {
  it('stops at the attempt limit and rethrows the last error', async () => {
    const c = fakeClock();
    let calls = 0;
    await expect(retry(async () => { calls++; throw new Error(`fail ${calls}`); }, { what: 'x', attempts: 3, delayMs: 10, sleep: c.sleep }))
      .rejects.toThrow('fail 3');
    expect(calls).toBe(3);
  });

  it('does not retry errors marked not retryable', async () => {
    let calls = 0;
    await expect(retry(async () => { calls++; throw new Error('404'); }, { what: 'x', attempts: 5, delayMs: 1, retryable: () => false }))
      .rejects.toThrow('404');
    expect(calls).toBe(1);
  });
});
