/**
 * An exclusive BSD lock on the target disk (the convention udev and util-linux use for block
 * devices), waiting up to 10 s for a holder that is just exiting, held by a `flock` child for the life of the install. The child reads our stdin pipe: if
 * this process dies, even by SIGKILL, the pipe closes, the child exits and the lock is released, so
 * a re-run after a crash is never locked out.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { HvError, ExitCode } from '../../lib/errors.js';

export interface DeviceLock {
  device: string;
  release(): Promise<void>;
}

export async function lockDevice(device: string, timeoutMs = 30_000): Promise<DeviceLock> {
  const child: ChildProcess = spawn('flock', ['--exclusive', '--timeout', '10', '--conflict-exit-code', '75', device, 'sh', '-c', 'echo locked; exec cat >/dev/null'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new HvError(`timed out taking the lock on ${device}`, { where: 'flock', exitCode: ExitCode.installFailed }));
    }, timeoutMs);
    child.stdout!.once('data', () => {
      clearTimeout(timer);
      resolve();
    });
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new HvError(`cannot run flock to lock ${device}: ${err.message}`, { hint: 'install util-linux', exitCode: ExitCode.usage }));
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (code === 75) {
        reject(new HvError(`${device} is locked by another process (another hvinstall, or a partitioning tool)`, { where: device, hint: 'wait for it to finish, or find it with `lsof ' + device + '`', exitCode: ExitCode.checkFailed }));
      } else {
        reject(new HvError(`cannot lock ${device}: ${stderr.trim() || `flock exited with ${code}`}`, { where: device, exitCode: ExitCode.installFailed }));
      }
    });
  });
  // The holder must not keep the event loop (and the CLI) alive on its own.
  child.unref();
  (child.stdin as unknown as { unref?: () => void }).unref?.();
  (child.stdout as unknown as { unref?: () => void }).unref?.();
  (child.stderr as unknown as { unref?: () => void }).unref?.();
  return {
    device,
    release: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        // Keep the event loop alive until the holder has gone and the lock is really free.
        child.ref();
        child.once('exit', () => resolve());
        child.stdin!.end();
      }),
  };
}
