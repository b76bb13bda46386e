/** The shell command the console offers after a failed install: the same install, --agent included. */
import { describe, expect, it } from 'vitest';
import { resumeCommand } from '../../../installer/console/install-run.js';

describe('the console install\'s resume command', () => {
  it('repeats the source, bundle and agent the console was started with', () => {
    expect(resumeCommand({ configFile: '/run/c.yaml', source: '/run/rootfs.squashfs', bundle: 'none', agent: 'none', stateDir: '/var/lib/hvinstall' })).toBe(
      'hvinstall install --config /run/c.yaml --source /run/rootfs.squashfs --bundle none --agent none --state-dir /var/lib/hvinstall --yes',
    );
  });
  it('leaves --agent out when the console used the installer\'s own payload', () => {
    expect(resumeCommand({ configFile: '/run/c.yaml', stateDir: '/s' })).toBe('hvinstall install --config /run/c.yaml --state-dir /s --yes');
  });
});
