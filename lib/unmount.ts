/**
 * umount that waits out a filesystem being busy for a moment. A loop device set up by
 * `mount -o loop` detaches itself (autoclear) only at its last close, so a prober that opens it
 * (udev's blkid, a disk listing) while it is unmounted keeps its backing file open, and so the
 * filesystem holding that file busy, a little longer: umount of that filesystem then fails
 * "target is busy". Such a hold ends within milliseconds; one that outlasts the window is a real
 * holder and the error says where to look.
 */
import { CommandError, run } from './exec.js';
import { sleep } from './wait.js';

/** How long a "target is busy" is retried before it is an error. */
const BUSY_WINDOW_MS = 15_000;
const BUSY_RETRY_MS = 100;

export interface UnmountOptions {
  /** Deadline of each umount call. */
  timeoutMs?: number;
  busyWindowMs?: number;
}

export async function unmountWhenFree(dir: string, opts: UnmountOptions = {}): Promise<void> {
  const windowMs = opts.busyWindowMs ?? BUSY_WINDOW_MS;
  const deadline = Date.now() + windowMs;
  for (;;) {
    const r = await run('umount', [dir], { allowFailure: true, timeoutMs: opts.timeoutMs ?? 120_000 });
    if (r.exitCode === 0) return;
    const busy = /target is busy/i.test(r.stderr);
    if (!busy || Date.now() >= deadline) {
      const reason = busy
        ? `still busy after ${(windowMs / 1000).toFixed(1)} s: a process or a loop device holds a file under ${dir} (see fuser -vm ${dir} and losetup --list)`
        : `exited with status ${r.exitCode}`;
      throw new CommandError(r.command, r.exitCode, r.stderr, r.stdout, reason);
    }
    await sleep(BUSY_RETRY_MS);
  }
}
