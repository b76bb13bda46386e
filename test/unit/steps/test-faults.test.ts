import { afterEach, describe, expect, it, vi } from 'vitest';
import { killAtBytes } from '../../../installer/steps/test-faults.js';

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
