/** Copying kernel modules with their dependencies out of an unpacked Debian kernel into an initramfs or live root. */
import { copyFile, mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../lib/exec.js';

/**
 * Copies each module and what `modprobe --show-depends` says it needs (decompressed: busybox
 * modprobe reads plain .ko; a module's signature is appended before compression, so it survives),
 * plus modules.builtin* and modules.order so modprobe knows what is built in, then runs depmod.
 * `base` is where lib/modules goes in the target (root, or root/usr on a merged-/usr layout).
 * Returns the modules that are loadable (built-in ones are left out).
 */
export async function copyKernelModules(base: string, modulesRoot: string, version: string, modules: readonly string[]): Promise<string[]> {
  const loadable: string[] = [];
  for (const m of modules) {
    const r = await run('modprobe', ['-d', modulesRoot, '-S', version, '--show-depends', m], { allowFailure: true });
    if (r.exitCode !== 0 || !/^insmod /m.test(r.stdout)) continue; // built into the kernel
    for (const line of r.stdout.split('\n')) {
      const ko = /^insmod (\S+)/.exec(line.trim())?.[1];
      if (!ko) continue;
      const dest = path.join(base, path.relative(modulesRoot, ko).replace(/\.(xz|zst|gz)$/, ''));
      if (await stat(dest).catch(() => undefined)) continue;
      await mkdir(path.dirname(dest), { recursive: true });
      if (ko.endsWith('.xz')) await run('sh', ['-c', 'xz -dc "$1" > "$2"', 'xz', ko, dest]);
      else if (ko.endsWith('.zst')) await run('zstd', ['-q', '-f', '-d', ko, '-o', dest]);
      else await copyFile(ko, dest);
    }
    loadable.push(m);
  }
  const modDir = path.join('lib/modules', version);
  await mkdir(path.join(base, modDir), { recursive: true });
  for (const f of ['modules.builtin', 'modules.builtin.modinfo', 'modules.order']) {
    await copyFile(path.join(modulesRoot, modDir, f), path.join(base, modDir, f)).catch(() => undefined);
  }
  await run('depmod', ['-b', base, version]);
  return loadable;
}
