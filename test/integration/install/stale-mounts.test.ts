/**
 * releaseStaleMounts (the guard's clean-up of what a killed run left mounted) against the race a
 * killed after-install chroot command leaves: active.img loop-mounted from COS_STATE, its loop
 * device still open a moment after it is detached (the orphan's exit, udev's blkid), so COS_STATE
 * is busy when the clean-up reaches it. Unmounted lazily, COS_STATE's partition stays held and the
 * guard refuses the disk the run is to resume. Real mounts and loop devices (root).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { constants } from 'node:fs';
import { mkdir, open } from 'node:fs/promises';
import path from 'node:path';
import { releaseStaleMounts } from '../../../installer/steps/mounts.js';
import { Cleanup, holdOpen, isMounted, sh, tempDir } from './helpers.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());


/** Whether the guard would call the device held: an exclusive open fails EBUSY (installer/steps/guard.ts). */
async function heldExclusively(device: string): Promise<boolean> {
  const fh = await open(device, constants.O_RDONLY | constants.O_EXCL).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'EBUSY') return 'busy' as const;
    throw err;
  });
  if (fh === 'busy') return true;
  await fh.close();
  return false;
}

/**
 * A run directory as a killed run leaves it: `state` (standing in for COS_STATE: a block device
 * whose image lives outside the run directory) mounted at <run>/mnt/cos_state, and active.img on it
 * loop-mounted at <run>/mnt/active.
 */
async function killedRunMounts(): Promise<{ runDir: string; state: string; stateDevice: string; activeLoop: string }> {
  const dir = await tempDir(cleanup, 'hv-stale-mounts-');
  const runDir = path.join(dir, 'run');
  const state = path.join(runDir, 'mnt/cos_state');
  const active = path.join(runDir, 'mnt/active');
  await mkdir(state, { recursive: true });
  await mkdir(active, { recursive: true });
  await sh('truncate', ['-s', '32M', path.join(dir, 'state.img')]);
  await sh('mkfs.ext4', ['-q', '-F', '-L', 'COS_STATE', path.join(dir, 'state.img')]);
  const stateDevice = (await sh('losetup', ['--find', '--show', path.join(dir, 'state.img')])).stdout.trim();
  cleanup.add(() => sh('losetup', ['--detach', stateDevice], { allowFailure: true }));
  await sh('mount', [stateDevice, state]);
  cleanup.add(() => sh('umount', ['-l', state], { allowFailure: true }));
  await sh('truncate', ['-s', '8M', path.join(state, 'active.img')]);
  await sh('mkfs.ext4', ['-q', '-F', path.join(state, 'active.img')]);
  await sh('mount', ['-o', 'loop', path.join(state, 'active.img'), active]);
  cleanup.add(() => sh('umount', ['-l', active], { allowFailure: true }));
  const activeLoop = (await sh('findmnt', ['-n', '-o', 'SOURCE', active])).stdout.trim();
  expect(activeLoop).toMatch(/^\/dev\/loop\d+$/);
  return { runDir, state, stateDevice, activeLoop };
}


describe('releaseStaleMounts', () => {
  it('leaves COS_STATE unmounted and its device free when the image loop on it lets go a moment late', async () => {
    const { runDir, state, stateDevice, activeLoop } = await killedRunMounts();
    const holder = await holdOpen(cleanup, activeLoop, 2);

    const cleaned = await releaseStaleMounts(runDir);

    expect(cleaned).toContain(state);
    expect(cleaned.some((c) => c.startsWith(`${activeLoop} (`) && c.endsWith('/active.img)'))).toBe(true);
    expect(holder.exitCode).toBe(0); // COS_STATE could only be unmounted for real once the holder let go
    expect(await isMounted(state)).toBe(false);
    expect(await heldExclusively(stateDevice)).toBe(false);
    const backing = (await sh('losetup', ['--list', '--noheadings', '--output', 'BACK-FILE'])).stdout;
    expect(backing).not.toContain('active.img');
  });

  it('with nothing holding on, releases both at once', async () => {
    const { runDir, state, stateDevice } = await killedRunMounts();
    const cleaned = await releaseStaleMounts(runDir);
    expect(cleaned).toContain(state);
    expect(await isMounted(state)).toBe(false);
    expect(await heldExclusively(stateDevice)).toBe(false);
  });
});
