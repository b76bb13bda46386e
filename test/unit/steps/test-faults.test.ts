import { afterEach, describe, expect, it, vi } from 'vitest';
import { killAtBytes } from '../../../installer/steps/test-faults.js';
import { copyProgress } from '../../../installer/steps/context.js';
import type { EventBus } from '../../../installer/steps/progress.js';

describe('killAtBytes: the mid-copy kill points of HVINSTALL_TEST_SIGKILL_AT', () => {
  afterEach(() => vi.restoreAllMocks());
  const spyKill = () => {
    vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    return vi.spyOn(process, 'kill').mockImplementation(() => true);
  };

  it('kills this process with SIGKILL at the first count of n bytes or more, not before', () => {
    const kill = spyKill();
    const check = killAtBytes('agent', 'agent-bytes:4096');
    check(0);
    check(4095);
    expect(kill).not.toHaveBeenCalled();
    check(8192);
    expect(kill).toHaveBeenCalledWith(process.pid, 'SIGKILL');
  });

  it('kills at exactly n bytes', () => {
    const kill = spyKill();
    killAtBytes('deploy', 'deploy-bytes:100')(100);
    expect(kill).toHaveBeenCalledTimes(1);
  });

  it('another copy\'s point, an after:/before: point, a malformed count or no point at all never kills', () => {
    const kill = spyKill();
    for (const configured of ['deploy-bytes:1', 'after:persistent', 'persistent-bytes:', 'persistent-bytes:1x', 'xpersistent-bytes:1', undefined, '']) {
      killAtBytes('persistent', configured)(1 << 30);
    }
    expect(kill).not.toHaveBeenCalled();
  });
});

describe('copyProgress: where a step\'s copied byte counts go', () => {
  afterEach(() => vi.restoreAllMocks());
  it('every count to the progress bus under the step\'s name; the kill at the step\'s own point only', () => {
    vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const kill = vi.spyOn(process, 'kill').mockImplementation(() => true);
    const seen: Array<[string, number, number]> = [];
    const bus = { bytes: (step: string, done: number, total: number) => void seen.push([step, done, total]) } as unknown as EventBus;
    const progress = copyProgress({ bus, killPoint: 'persistent-bytes:10' }, 'persistent');
    progress(5, 20);
    expect(kill).not.toHaveBeenCalled();
    progress(10, 20);
    expect(kill).toHaveBeenCalledWith(process.pid, 'SIGKILL');
    expect(seen).toEqual([['persistent', 5, 20], ['persistent', 10, 20]]);
    copyProgress({ bus, killPoint: 'persistent-bytes:10' }, 'deploy')(20, 20);
    expect(kill).toHaveBeenCalledTimes(1);
    expect(seen.at(-1)).toEqual(['deploy', 20, 20]);
  });
});
