/**
 * A slow boot medium: test/fixtures/slow-medium/slowfs.py (Debian's python3-fusepy) mounts a
 * directory through FUSE; its reads block while a control file exists, as a virtual medium over a
 * BMC that stopped answering does (the reading process cannot even be killed until the read
 * returns), and can be paced to a byte rate. Cleanup lets blocked reads finish before unmounting.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { run } from '../../../lib/exec.js';

const SLOWFS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../fixtures/slow-medium/slowfs.py');

export interface SlowMedium {
  mount: string;
  stall(): Promise<void>;
  resume(): Promise<void>;
  close(): Promise<void>;
}

async function isMounted(dir: string): Promise<boolean> {
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n').some((l) => l.split(' ')[4] === dir);
}

export async function mountSlowMedium(source: string, work: string, rateBytesPerSecond = 0): Promise<SlowMedium> {
  const mount = path.join(work, 'medium');
  const control = path.join(work, 'medium.stall');
  await mkdir(mount, { recursive: true });
  const child: ChildProcess = spawn('/usr/bin/python3', [SLOWFS, source, mount, control, String(rateBytesPerSecond)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  for (let i = 0; i < 200 && !(await isMounted(mount)); i++) {
    if (child.exitCode !== null) throw new Error(`slowfs exited ${child.exitCode}: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  if (!(await isMounted(mount))) throw new Error(`slowfs did not mount ${mount}: ${stderr}`);
  return {
    mount,
    stall: () => writeFile(control, ''),
    resume: () => rm(control, { force: true }),
    async close() {
      await rm(control, { force: true });
      // Reads the test abandoned finish now; the mount is busy until they have.
      for (let i = 0; i < 200 && (await isMounted(mount)); i++) {
        await run('fusermount', ['-u', mount], { allowFailure: true, timeoutMs: 10_000 });
        if (await isMounted(mount)) await new Promise((r) => setTimeout(r, 100));
      }
      if (await isMounted(mount)) await run('umount', ['-l', mount], { allowFailure: true });
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
    },
  };
}
