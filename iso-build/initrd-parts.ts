/** Programs with their libraries, for an initramfs (kernel modules: kernel-modules.ts). */
import { chmod, copyFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../lib/exec.js';

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
