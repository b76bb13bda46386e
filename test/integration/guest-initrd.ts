/**
 * Shared by the integration tests that boot a QEMU guest (bonding, PXE, the test OS initramfs):
 * copying a host binary and the shared libraries ldd names into an initramfs tree at the same
 * paths, and the kernel for a direct PVH boot.
 */
import { chmod, copyFile, mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
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

/**
 * The uncompressed ELF kernel inside a bzImage, for QEMU's PVH entry (`-kernel vmlinux`): the same
 * kernel code, without SeaBIOS's linuxboot and the xz decompressor, which take ~4 s of CPU per boot
 * under TCG. Only for guests whose check is not about how the kernel is loaded (the boot chains
 * under test — grub, iPXE — keep booting the bzImage). Kept in the OS temp dir, keyed by the
 * bzImage's name, size and time, outside the kernel cache the product's code reads.
 */
export async function pvhKernel(bzImage: string): Promise<string> {
  const st = await stat(bzImage);
  const dir = path.join(os.tmpdir(), 'hv-pvh-kernels');
  const out = path.join(dir, `${path.basename(bzImage)}-${st.size}-${Math.trunc(st.mtimeMs)}`);
  if (await isElf(out)) return out;
  await mkdir(dir, { recursive: true });
  const image = await readFile(bzImage);
  // The x86 boot protocol's setup header: setup_sects (0 means 4), payload_offset and payload_length.
  const setupSects = image.readUInt8(0x1f1) || 4;
  const start = (setupSects + 1) * 512 + image.readUInt32LE(0x248);
  const payload = image.subarray(start, start + image.readUInt32LE(0x24c));
  if (!payload.subarray(0, 6).equals(XZ_MAGIC)) throw new Error(`${bzImage}: its payload is not xz-compressed; pvhKernel knows only xz (Debian's kernels); boot this kernel as a bzImage instead`);
  const tmp = `${out}.${process.pid}.tmp`;
  await writeFile(`${tmp}.xz`, payload);
  try {
    // --single-stream: the build appends the uncompressed size after the xz stream.
    await run('sh', ['-c', `xz -dc --single-stream '${tmp}.xz' > '${tmp}'`]);
    if (!(await isElf(tmp))) throw new Error(`${bzImage}: its decompressed payload is not an ELF kernel; boot it as a bzImage instead`);
    await rename(tmp, out);
  } finally {
    await rm(`${tmp}.xz`, { force: true });
    await rm(tmp, { force: true });
  }
  return out;
}

async function isElf(file: string): Promise<boolean> {
  const fh = await open(file, 'r').catch(() => undefined);
  if (!fh) return false;
  const head = Buffer.alloc(4);
  await fh.read(head, 0, 4, 0).finally(() => fh.close());
  return head.equals(ELF_MAGIC);
}

const ELF_MAGIC = Buffer.from([0x7f, 0x45, 0x4c, 0x46]);
const XZ_MAGIC = Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]);
