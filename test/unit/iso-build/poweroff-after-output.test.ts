import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { INITRD_INIT } from '../../../iso-build/boot-chain.js';
import { INITRAMFS_INIT } from '../../../iso-build/live/initramfs-init.js';
import { LIVE_INIT } from '../../../iso-build/live/init-script.js';
import { POWEROFF_AFTER_OUTPUT } from '../../../iso-build/poweroff-after-output.js';
import { INIT_SCRIPT } from '../../../iso-build/test-os-tree.js';

/**
 * Each script whose output is the serial console waits for the console to send its last lines
 * before `poweroff -f` (the e2e harness and the boot tests read those lines; an operator's BMC log
 * keeps them): without the wait the kernel's power-off message landed inside the last line.
 */
const SCRIPTS = { 'the test OS init': INIT_SCRIPT, "the test initramfs's init": INITRD_INIT, "the live root's init": LIVE_INIT, "the live initramfs's init": INITRAMFS_INIT };

describe('powering off from a console script', () => {
  for (const [name, script] of Object.entries(SCRIPTS)) {
    it(`${name} drains the console right before each poweroff -f`, () => {
      const lines = script.split('\n').filter((l) => /\bpoweroff -f\b/.test(l));
      expect(lines.length, 'a poweroff -f').toBeGreaterThan(0);
      for (const line of lines) expect(line).toMatch(/stty -tostop <&1 2>\/dev\/null; poweroff -f/);
    });
  }

  it('still powers off when the output is not a terminal (stty fails) and prints nothing of it', () => {
    const out = execFileSync('sh', ['-c', `poweroff() { echo "powered off $*"; }\n${POWEROFF_AFTER_OUTPUT}`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    expect(out).toBe('powered off -f\n');
  });
});
