/**
 * Mounts the install makes, all under one run directory so that a killed run's leftovers are
 * recognisable as ours and can be cleaned up by the next run before it checks the disk is free.
 */
import { mkdir, readFile, rmdir } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { unmountWhenFree } from '../../lib/unmount.js';

export async function mount(device: string, dir: string, opts: string[] = []): Promise<void> {
  await mkdir(dir, { recursive: true });
  await run('mount', [...(opts.length ? ['-o', opts.join(',')] : []), device, dir], { timeoutMs: 120_000 });
}

/** `busyWindowMs`: how long a busy mount is tried again (lib/unmount.ts); 0 after a failure, whose error must go out now. */
export async function unmount(dir: string, timeoutMs = 120_000, busyWindowMs?: number): Promise<void> {
  await unmountWhenFree(dir, { timeoutMs, busyWindowMs });
  await rmdir(dir).catch(() => undefined);
}

/** Mount points at or below a directory, deepest first (from /proc/self/mountinfo). */
export async function mountsUnder(dir: string): Promise<string[]> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  const points = info
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((m): m is string => !!m)
    .map((m) => m.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8))))
    .filter((m) => m === dir || m.startsWith(prefix));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

/**
 * Unmounts everything below the run directory and detaches loop devices whose backing files lived
 * there (image files being filled when a previous run died). Returns what it cleaned.
 */
export async function releaseStaleMounts(runDir: string): Promise<string[]> {
  const cleaned: string[] = [];
  // Loop devices backed by files on our mounts keep those mounts busy: detach them first.
  const loops = await run('losetup', ['--list', '--json', '--output', 'NAME,BACK-FILE'], { allowFailure: true });
  const ours = await mountsUnder(runDir);
  if (loops.exitCode === 0 && loops.stdout.trim()) {
    const list = (JSON.parse(loops.stdout) as { loopdevices?: Array<{ name: string; 'back-file'?: string | null }> }).loopdevices ?? [];
    for (const l of list) {
      const back = l['back-file']?.replace(/ \(deleted\)$/, '');
      if (back && (back.startsWith(`${runDir}/`) || ours.some((m) => back.startsWith(`${m}/`)))) {
        const held = await mountsOfDevice(l.name);
        for (const m of held) await run('umount', ['-l', m], { allowFailure: true });
        await run('losetup', ['--detach', l.name], { allowFailure: true });
        cleaned.push(`${l.name} (${back})`);
      }
    }
  }
  for (const m of await mountsUnder(runDir)) {
    // A loop device detached above lets go of its backing file only at its last close, so the
    // filesystem below stays busy a moment: wait that out (lib/unmount.ts). A lazy unmount of it
    // would leave its partition held, and the guard would refuse the disk this run is to resume.
    await unmountWhenFree(m).catch(() => run('umount', ['-l', m], { allowFailure: true }));
    cleaned.push(m);
  }
  return cleaned;
}

async function mountsOfDevice(device: string): Promise<string[]> {
  const mounts = await readFile('/proc/self/mounts', 'utf8');
  return mounts
    .split('\n')
    .map((l) => l.split(' '))
    .filter((f) => f[0] === device)
    .map((f) => f[1]!)
    .sort((a, b) => b.length - a.length);
}

export function mountDir(runDir: string, name: string): string {
  return path.join(runDir, 'mnt', name);
}
