/**
 * The loop of a guard's watch phase (after ok): wait `intervalMs`, then `tick`, until the agent
 * stops. A stop during the wait ends the loop at once, with no tick after it; a tick that throws
 * ends the watch with that error (the runner reports it). `intervalMs` may be a function, asked
 * before each wait (the certificates guard looks sooner while RKE2 has made none yet).
 */
import { sleep } from '../../lib/wait.js';

export async function everyInterval(signal: AbortSignal, intervalMs: number | (() => number), tick: () => Promise<void>): Promise<void> {
  while (!signal.aborted) {
    await sleep(typeof intervalMs === 'function' ? intervalMs() : intervalMs, signal).catch(() => undefined);
    if (signal.aborted) return;
    await tick();
  }
}
