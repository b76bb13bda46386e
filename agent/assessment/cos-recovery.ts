/**
 * COS_RECOVERY for hvagent's commits: its copy of state.yaml follows COS_STATE's
 * (node/state-yaml-copy.ts). The initramfs does not mount it on a normal boot, so it is mounted
 * read-write under /run/hvagent for the copy and unmounted after; a mount that exists (a recovery
 * boot) is remounted read-write and back. Under --root (tests) it is a plain directory.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { run } from '../../lib/exec.js';

export const COS_RECOVERY_MOUNT = '/run/hvagent/cos-recovery';
const LABEL = 'COS_RECOVERY';
/** Every mount command's deadline. */
const MOUNT_TIMEOUT_MS = 60_000;

export interface CosRecovery {
  /** Runs fn with COS_RECOVERY writable at a directory, then puts it back; undefined (fn not run) when no partition has the label. */
  writable<T>(fn: (dir: string) => Promise<T>): Promise<T | undefined>;
}

/** The copy as read back (the agent's page cache: hvagent has no direct-I/O reader). */
export async function readBackText(file: string, text: string): Promise<void> {
  const got = await readFile(file, 'utf8');
  if (got !== text) throw new Error(`${file} reads back ${got.length} bytes that differ from the ${text.length} written`);
}

async function mounted(device: string): Promise<{ dir: string; readOnly: boolean } | undefined> {
  const line = (await run('findmnt', ['-nro', 'TARGET,OPTIONS', '--source', device], { allowFailure: true, timeoutMs: MOUNT_TIMEOUT_MS })).stdout.split('\n')[0]?.trim();
  if (!line) return undefined;
  const [dir, options = ''] = line.split(' ');
  return { dir: dir!, readOnly: options.split(',').includes('ro') };
}

async function onDevice<T>(device: string, fn: (dir: string) => Promise<T>): Promise<T> {
  const existing = await mounted(device);
  const dir = existing?.dir ?? COS_RECOVERY_MOUNT;
  if (existing?.readOnly) await run('mount', ['-o', 'remount,rw', dir], { timeoutMs: MOUNT_TIMEOUT_MS });
  else if (!existing) {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await run('mount', ['-o', 'rw', device, dir], { timeoutMs: MOUNT_TIMEOUT_MS });
  }
  try {
    return await fn(dir);
  } finally {
    await run('sync', ['-f', dir], { allowFailure: true, timeoutMs: MOUNT_TIMEOUT_MS });
    if (existing?.readOnly) await run('mount', ['-o', 'remount,ro', dir], { allowFailure: true, timeoutMs: MOUNT_TIMEOUT_MS });
    else if (!existing) await run('umount', [dir], { allowFailure: true, timeoutMs: MOUNT_TIMEOUT_MS });
  }
}

/** COS_RECOVERY found by its label (`real`), or the directory `dir` as it is (tests). */
export function cosRecovery(dir: string, real: boolean): CosRecovery {
  return {
    async writable(fn) {
      if (!real) return fn(dir);
      const device = (await run('blkid', ['-L', LABEL], { allowFailure: true, timeoutMs: MOUNT_TIMEOUT_MS })).stdout.trim().split('\n')[0];
      if (!device) return undefined;
      return onDevice(device, fn);
    },
  };
}
