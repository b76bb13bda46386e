/**
 * Shared by the integration tests that boot a QEMU guest (bonding, PXE): copying a host binary and
 * the shared libraries ldd names into an initramfs tree at the same paths.
 */
import { chmod, copyFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/exec.js';

export async function copyWithLibs(bin: string, root: string): Promise<void> {
  const dest = path.join(root, bin);
  await mkdir(path.dirname(dest), { recursive: true });
  await copyFile(bin, dest);
  await chmod(dest, 0o755);
  const ldd = await run('ldd', [bin], { allowFailure: true });
  for (const line of ldd.stdout.split('\n')) {
    const lib = /=>\s*(\/\S+)/.exec(line)?.[1] ?? /^\s*(\/\S+)\s+\(/.exec(line)?.[1];
    if (!lib) continue;
    const to = path.join(root, lib);
    await mkdir(path.dirname(to), { recursive: true });
    await copyFile(lib, to);
  }
}
