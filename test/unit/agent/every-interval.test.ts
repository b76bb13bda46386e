import { describe, expect, it } from 'vitest';
import { everyInterval } from '../../../agent/guards/every-interval.js';

describe('everyInterval (the watch loop of node-identity, time-sync, network-online, longhorn-disk)', () => {
  it('ticks after each wait until the agent stops; a stop inside a tick is the last tick', async () => {
    const stop = new AbortController();
    const seen: number[] = [];
    await everyInterval(stop.signal, 1, async () => {
      seen.push(seen.length + 1);
      if (seen.length === 3) stop.abort();
    });
    expect(seen).toEqual([1, 2, 3]);
  });

  it('a stop during the wait ends the loop at once, with no tick after it', async () => {
    const stop = new AbortController();
    let ticks = 0;
    // An hour's interval: the loop can only end by the stop cutting the wait short.
    const done = everyInterval(stop.signal, 3_600_000, async () => {
      ticks++;
    });
    stop.abort();
    await done;
    expect(ticks).toBe(0);
  });

  it('does nothing when the agent is already stopping', async () => {
    const stop = new AbortController();
    stop.abort();
    let ticks = 0;
    await everyInterval(stop.signal, 1, async () => {
      ticks++;
    });
    expect(ticks).toBe(0);
  });

  it('a tick that throws ends the watch with that error, and there is no tick after it', async () => {
    const stop = new AbortController();
    let ticks = 0;
    await expect(
      everyInterval(stop.signal, 1, async () => {
        ticks++;
        if (ticks === 2) throw new Error('ip addr failed');
      }),
    ).rejects.toThrow('ip addr failed');
    expect(ticks).toBe(2);
  });

  it('an interval given as a function is asked before each wait (the certificates guard looks sooner while there are none)', async () => {
    const stop = new AbortController();
    const asked: number[] = [];
    let ticks = 0;
    const done = everyInterval(
      stop.signal,
      () => {
        asked.push(ticks);
        // Short until the second tick, then an hour: only the stop can end that wait.
        return ticks < 2 ? 1 : 3_600_000;
      },
      async () => {
        ticks++;
      },
    );
    while (asked.length < 3) await new Promise((r) => setTimeout(r, 1));
    stop.abort();
    await done;
    expect({ asked, ticks }).toEqual({ asked: [0, 1, 2], ticks: 2 });
  });
});
