/** Pieces every initramfs of the project is made of: kernel modules with their dependencies, and programs with their libraries. */
import { chmod, copyFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../lib/exec.js';

/**
 * Copies the named modules and their dependencies (`modprobe --show-depends` over modulesRoot,
 * the directory holding lib/modules/<version>) into destBase/lib/modules/<version>,
 * decompressed, then runs depmod there. Returns the names that are modules; the others are built
 * into the kernel.
 */
export async function copyKernelModules(destBase: string, modulesRoot: string, version: string, names: readonly string[]): Promise<string[]> {
  const loaded: string[] = [];
  for (const m of names) {
    const r = await run('modprobe', ['-d', modulesRoot, '-S', version, '--show-depends', m], { allowFailure: true });
    if (r.exitCode !== 0) continue;
    for (const line of r.stdout.split('\n')) {
      const ko = /^insmod (\S+)/.exec(line.trim())?.[1];
      if (!ko) continue;
      const rel = path.relative(modulesRoot, ko).replace(/^usr\//, '');
      const dest = path.join(destBase, rel.replace(/\.(xz|zst|gz)$/, ''));
      await mkdir(path.dirname(dest), { recursive: true });
      if (ko.endsWith('.xz')) await run('sh', ['-c', `xz -dc '${ko}' > '${dest}'`]);
      else if (ko.endsWith('.zst')) await run('zstd', ['-q', '-f', '-d', ko, '-o', dest]);
      else if (ko.endsWith('.gz')) await run('sh', ['-c', `gzip -dc '${ko}' > '${dest}'`]);
      else await copyFile(ko, dest);
    }
    loaded.push(m);
  }
  await run('depmod', ['-b', destBase, version]);
  return loaded;
}

/**
 * Copies a program from fromRoot ('/' for the host, or an OS tree, read through chroot) to the
 * same path under dest, with every library its loader resolves, each under the name the loader
 * asks for (symlinks followed).
 */
export async function copyProgramWithLibraries(fromRoot: string, program: string, dest: string): Promise<void> {
  const inRoot = (cmd: string, args: string[]) => (fromRoot === '/' ? run(cmd, args, { allowFailure: true }) : run('chroot', [fromRoot, cmd, ...args], { allowFailure: true }));
  const realOf = async (p: string) => (await inRoot('readlink', ['-f', p])).stdout.trim() || p;
  const copies: Array<[name: string, real: string]> = [[program, await realOf(program)]];
  const ldd = await inRoot('ldd', [copies[0]![1]]);
  for (const line of ldd.stdout.split('\n')) {
    const lib = /=>\s*(\/\S+)/.exec(line)?.[1] ?? /^\s*(\/\S+)\s+\(/.exec(line)?.[1];
    if (lib) copies.push([lib, await realOf(lib)]);
  }
  for (const [name, real] of copies) {
    const to = path.join(dest, name);
    await mkdir(path.dirname(to), { recursive: true });
    await copyFile(path.join(fromRoot, real), to);
    await chmod(to, 0o755);
  }
}
