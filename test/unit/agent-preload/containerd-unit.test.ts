import { describe, expect, it } from 'vitest';
import { describeUnit, parseUnitShow, unitWillServe } from '../../../agent/preload/containerd-unit.js';

describe("the image's containerd unit", () => {
  it('reads systemctl show: a unit waiting on its ordering has a start job queued and will serve', () => {
    const s = parseUnitShow('containerd.service', 'LoadState=loaded\nActiveState=inactive\nJob=142\n');
    expect(s).toEqual({ unit: 'containerd.service', load: 'loaded', active: 'inactive', jobQueued: true });
    expect(unitWillServe(s)).toBe(true);
    expect(describeUnit(s)).toBe('containerd.service is inactive (a job queued)');
  });
  it('activating or active will serve; without a job, inactive or failed will not', () => {
    const at = (active: string, job = '') => unitWillServe(parseUnitShow('containerd.service', `LoadState=loaded\nActiveState=${active}\nJob=${job}\n`));
    expect(at('activating')).toBe(true);
    expect(at('active')).toBe(true);
    expect(at('reloading')).toBe(true);
    expect(at('inactive')).toBe(false);
    expect(at('failed')).toBe(false);
    expect(at('deactivating')).toBe(false);
  });
  it('a unit the image does not have, or has masked, never serves, whatever else is printed', () => {
    expect(unitWillServe(parseUnitShow('containerd.service', 'LoadState=not-found\nActiveState=inactive\nJob=\n'))).toBe(false);
    expect(unitWillServe(parseUnitShow('containerd.service', 'LoadState=masked\nActiveState=inactive\nJob=7\n'))).toBe(false);
    expect(unitWillServe(parseUnitShow('containerd.service', ''))).toBe(false);
  });
});
