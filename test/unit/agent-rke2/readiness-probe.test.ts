/**
 * The wait for RKE2's readiness asks whether its service still runs at the first look, at most
 * every few seconds after and at the look that finds it ready, not at every look (under systemd each
 * ask is a `systemctl` run); a service found stopped ends the wait with why.
 */
import { describe, expect, it } from 'vitest';
import { readinessProbe } from '../../../agent/rke2/bringup.js';
import type { Probe } from '../../../lib/wait.js';

/** A health endpoint ready at look `readyAt` (1-based), a clock moved 1 s per look, and a counted state. */
function fakes(readyAt: number, state: (call: number) => { active: boolean; exited?: string } = () => ({ active: true }), stateSeenAt?: number) {
  let looks = 0;
  let clock = 0;
  const stateCalls: number[] = [];
  const probe = async (): Promise<Probe<string>> => {
    looks += 1;
    clock = (looks - 1) * 1000;
    return looks >= readyAt ? { done: true, value: 'rke2-server ready' } : { done: false, reason: '/readyz: 500' };
  };
  return {
    look: readinessProbe('server', probe, async () => { stateCalls.push(looks); return state(stateCalls.length); }, () => clock, 5000, stateSeenAt),
    stateCalls,
  };
}

describe('readinessProbe', () => {
  it('asks the service at the first look, every 5 s of not-ready looks, and at the ready one', async () => {
    const f = fakes(12);
    for (let i = 1; i < 12; i++) expect(await f.look()).toEqual({ done: false, reason: '/readyz: 500' });
    expect(await f.look()).toEqual({ done: true, value: 'rke2-server ready' });
    // looks 1..12 one second apart: asked at looks 1, 6, 11 and at 12, the ready one (not 12 times)
    expect(f.stateCalls).toEqual([1, 6, 11, 12]);
  });

  it('a ready endpoint whose service is not running is not ready: the wait ends naming the service', async () => {
    const f = fakes(1, () => ({ active: false, exited: 'unit failed' }));
    await expect(f.look()).rejects.toThrow('unit failed');
    const g = fakes(1, () => ({ active: false }));
    await expect(g.look()).rejects.toThrow('rke2-server is not running');
  });

  it('a service that stops while not ready is named at the next ask, within 5 s', async () => {
    const f = fakes(100, (call) => (call === 1 ? { active: true } : { active: false, exited: 'unit failed' }));
    for (let i = 1; i <= 5; i++) await f.look();
    await expect(f.look()).rejects.toThrow('unit failed');
    expect(f.stateCalls).toEqual([1, 6]);
  });

  it('a state the caller has just seen (the unit started or found running) is not asked again at the first look, only 5 s later', async () => {
    const f = fakes(12, undefined, 0);
    for (let i = 1; i < 12; i++) await f.look();
    expect(await f.look()).toEqual({ done: true, value: 'rke2-server ready' });
    // the clock is 0 at look 1, where bringUp saw the state: asked at looks 6 and 11 (5 s on) and at the ready one
    expect(f.stateCalls).toEqual([6, 11, 12]);
  });

  it('with the state just seen, a service that stops is still named within 5 s, and a ready first look still asks', async () => {
    const f = fakes(100, () => ({ active: false, exited: 'unit failed' }), 0);
    for (let i = 1; i <= 5; i++) expect((await f.look()).done).toBe(false);
    await expect(f.look()).rejects.toThrow('unit failed');
    expect(f.stateCalls).toEqual([6]);
    const g = fakes(1, () => ({ active: false }), 0);
    await expect(g.look()).rejects.toThrow('rke2-server is not running');
    expect(g.stateCalls).toEqual([1]);
  });
});
