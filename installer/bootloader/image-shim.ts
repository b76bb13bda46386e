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

export const SHIM_FILE_NAMES = ['shim.efi', 'shimx64.efi', 'shimx64.efi.signed'] as const;
export const SHIM_DIRS = ['/usr/share/efi/x86_64', '/usr/lib/shim', '/boot/efi/EFI'] as const;

/** The first image path that is a shim in one of SHIM_DIRS (at most two levels below it). Pure. */
export function findShim(imagePaths: Iterable<string>): string | undefined {
  const found: string[] = [];
  for (const p of imagePaths) {
    const abs = path.posix.join('/', p);
    if (!(SHIM_FILE_NAMES as readonly string[]).includes(path.posix.basename(abs))) continue;
    const dir = SHIM_DIRS.find((d) => abs.startsWith(d + '/'));
    if (dir && path.posix.relative(dir, abs).split('/').length <= 3) found.push(abs);
  }
  return found.sort()[0];
}

/** Paths under SHIM_DIRS of a directory tree, or of a squashfs (`unsquashfs -l`, nothing extracted). */
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
    for (const d of SHIM_DIRS) await walk(d, 0);
    return findShim(paths);
  }
  const r = await run('unsquashfs', ['-l', '-no-progress', '-d', '', source], { timeoutMs: 5 * 60_000 });
  return findShim(r.stdout.split('\n').filter((l) => l.startsWith('/')));
}
