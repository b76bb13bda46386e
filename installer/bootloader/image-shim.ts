/**
 * Whether an OS image carries a signed shim, the first link of a boot chain that firmware with
 * Secure Boot enforced accepts. The file names are Elemental's (rancher/elemental-toolkit
 * pkg/utils/grub.go InstallEFI): shim.efi (SUSE, so Harvester's image: /usr/share/efi/x86_64),
 * shimx64.efi (Fedora: /boot/efi/EFI/<vendor>), shimx64.efi.signed (Debian and Ubuntu:
 * /usr/lib/shim), looked for in the directories those distributions use.
 */
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { EFI_BINARY_DIRS, EFI_BINARY_NAMES, findEfiBinary } from './image-chain.js';

/** The image path of its shim (the signed one where a tree has both builds), if any. Pure. */
export function findShim(imagePaths: Iterable<string>): string | undefined {
  return findEfiBinary(imagePaths, EFI_BINARY_NAMES.shim);
}

/** The shim among the paths under EFI_BINARY_DIRS of a directory tree, or of a squashfs (`unsquashfs -l`, nothing extracted). */
export async function imageShim(source: string): Promise<string | undefined> {
  const st = await stat(source);
  if (st.isDirectory()) {
    const paths: string[] = [];
    const walk = async (rel: string, depth: number): Promise<void> => {
      const entries = await readdir(path.join(source, rel), { withFileTypes: true }).catch(() => []);
      for (const e of entries) {
        const child = path.posix.join(rel, e.name);
        paths.push(child);
        if (e.isDirectory() && depth < 2) await walk(child, depth + 1);
      }
    };
    for (const d of EFI_BINARY_DIRS) await walk(d, 0);
    return findShim(paths);
  }
  const r = await run('unsquashfs', ['-l', '-no-progress', '-d', '', source], { timeoutMs: 5 * 60_000 });
  return findShim(r.stdout.split('\n').filter((l) => l.startsWith('/')));
}
