/**
 * A QEMU guest for the bond cases: this machine's kernel has no bonding driver, Debian's kernel has
 * it as a module. The guest's initramfs holds busybox, node, iproute2's `ip`, the built agent (dist/
 * and the production node_modules), and bonding/veth/bridge with their dependencies. Its init
 * builds mgmt-bo (two veth slaves whose peers the script raises and drops) under a real mgmt-br, and
 * runs `hvagent once --guard network-online` for each scenario, printing the exit code and the
 * status document on the serial console between markers.
 */
import { chmod, copyFile, cp, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../../../lib/exec.js';
import { copyWithLibs, pvhKernel } from '../../guest-initrd.js';
import { fetchDebianKernel } from '../../../../iso-build/boot-chain.js';

export const KERNEL_CACHE = process.env.HV_KERNEL_CACHE ?? '/var/cache/hvinstall/debian-kernel';
const MODULES = ['bonding', 'veth', 'bridge'];
const BUSYBOX = '/bin/busybox';

export interface GuestImage {
  vmlinuz: string;
  initrd: string;
}

export async function buildBondGuest(work: string, repo: string, script: string): Promise<GuestImage> {
  const kernel = await fetchDebianKernel(KERNEL_CACHE);
  const root = path.join(work, 'initramfs');
  for (const d of ['bin', 'proc', 'sys', 'dev', 'run', 'tmp', 'etc', 'node']) await mkdir(path.join(root, d), { recursive: true });
  await copyFile(BUSYBOX, path.join(root, 'bin/busybox'));
  await chmod(path.join(root, 'bin/busybox'), 0o755);
  await copyWithLibs('/usr/bin/node', root);
  await copyWithLibs('/usr/sbin/ip', root);
  for (const m of MODULES) {
    const r = await run('modprobe', ['-d', kernel.modulesRoot, '-S', kernel.version, '--show-depends', m]);
    for (const line of r.stdout.split('\n')) {
      const ko = /^insmod (\S+)/.exec(line.trim())?.[1];
      if (!ko) continue;
      const dest = path.join(root, path.relative(kernel.modulesRoot, ko).replace(/\.(xz|zst)$/, ''));
      await mkdir(path.dirname(dest), { recursive: true });
      if (ko.endsWith('.xz')) await run('sh', ['-c', `xz -dc '${ko}' > '${dest}'`]);
      else if (ko.endsWith('.zst')) await run('zstd', ['-q', '-f', '-d', ko, '-o', dest]);
      else await copyFile(ko, dest);
    }
  }
  await run('depmod', ['-b', root, kernel.version]);
  // The built agent and its production dependencies only.
  await cp(path.join(repo, 'dist'), path.join(root, 'hv/dist'), { recursive: true });
  await writeFile(path.join(root, 'hv/package.json'), '{"type":"module"}\n');
  const deps = (await run('npm', ['ls', '--omit=dev', '--parseable', '--all'], { cwd: repo, allowFailure: true })).stdout.split('\n').slice(1).filter(Boolean);
  for (const d of deps) await cp(d, path.join(root, 'hv', path.relative(repo, d)), { recursive: true });
  await writeFile(path.join(root, 'init'), `#!/bin/busybox sh\n/bin/busybox --install -s /bin\nexport PATH=/usr/sbin:/usr/bin:/bin\n${script}\n`, { mode: 0o755 });
  const initrd = path.join(work, 'initrd.zst');
  await run('sh', ['-c', `cd '${root}' && find . | LC_ALL=C sort | cpio -o -H newc --quiet | zstd -q -3 -T0 > '${initrd}'`], { timeoutMs: 10 * 60_000 });
  return { vmlinuz: await pvhKernel(kernel.vmlinuz), initrd };
}

/** Boots the guest with no disk and no network device; returns the serial console output. */
export async function bootGuest(img: GuestImage, timeoutMs: number): Promise<string> {
  const r = await run('qemu-system-x86_64', [
    '-machine', 'q35', '-accel', 'tcg', '-cpu', 'qemu64', '-m', '1536', '-smp', '1', '-nographic', '-no-reboot',
    '-nic', 'none', '-kernel', img.vmlinuz, '-initrd', img.initrd, '-append', 'console=ttyS0 panic=-1 quiet loglevel=3',
  ], { timeoutMs, allowFailure: true });
  return r.stdout + r.stderr;
}
