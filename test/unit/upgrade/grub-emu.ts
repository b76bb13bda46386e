/**
 * Runs grub configs in the real grub (grub-emu, Debian's `grub-emu` package) on small ext4 disk
 * images made with mke2fs -d: no root, no VM. `linux` and `initrd` are replaced by functions that
 * print the kernel arguments one per line and the booted image's marker, then halt, so a test
 * reads which image a boot would start, with which command line, and what grub saved on disk.
 */
import { execa } from 'execa';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export interface EmuDisk {
  label: string;
  /** Filesystem block size (default mke2fs's). */
  blockSize?: number;
  /** Files of the filesystem, by path; a Buffer or a string. */
  files: Record<string, string | Buffer>;
  /** Sizes to extend files to with a hole at the end (mke2fs -d keeps holes). */
  holes?: Record<string, number>;
  /** Images inside it: path -> the image's files (made with mke2fs -d as ext2). */
  images?: Record<string, { label: string; files: Record<string, string> }>;
}

export interface EmuBoot {
  /** The marker of the image whose initrd was loaded ('' if none). */
  booted: string;
  args: string[];
  defaultEntry: string;
  fallback: string;
  output: string;
  /** Each disk's files read back after the run. */
  readBack: (disk: number, file: string) => Promise<Buffer>;
  cleanup: () => Promise<void>;
}

async function makeTree(dir: string, files: Record<string, string | Buffer>): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const [p, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, p)), { recursive: true });
    await writeFile(path.join(dir, p), content);
  }
}

async function makeExt(file: string, type: 'ext2' | 'ext4', label: string, tree: string, sizeMiB: number, blockSize?: number): Promise<void> {
  await execa('truncate', ['-s', `${sizeMiB}M`, file]);
  await execa('mke2fs', ['-q', '-F', '-t', type, '-L', label, ...(blockSize ? ['-b', String(blockSize)] : []), '-d', tree, file]);
}

/** Runs `/grub2/grub.cfg` of disk 0 as grub would with $root on disk 0. */
export async function bootInEmu(disks: EmuDisk[]): Promise<EmuBoot> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-grub-emu-'));
  const devMap: string[] = [];
  for (const [i, d] of disks.entries()) {
    const tree = path.join(dir, `tree${i}`);
    await makeTree(tree, d.files);
    for (const [p, size] of Object.entries(d.holes ?? {})) await execa('truncate', ['-s', String(size), path.join(tree, p)]);
    for (const [p, img] of Object.entries(d.images ?? {})) {
      const itree = path.join(dir, `img${i}-${path.basename(p)}`);
      await makeTree(itree, img.files);
      await mkdir(path.dirname(path.join(tree, p)), { recursive: true });
      await makeExt(path.join(tree, p), 'ext2', img.label, itree, 2);
    }
    await makeExt(path.join(dir, `disk${i}.img`), 'ext4', d.label, tree, 16, d.blockSize);
    devMap.push(`(hd${i}) ${path.join(dir, `disk${i}.img`)}`);
  }
  await writeFile(path.join(dir, 'device.map'), devMap.join('\n') + '\n');
  await writeFile(
    path.join(dir, 'grub.cfg'),
    `insmod ext2
insmod loadenv
insmod test
set pager=0
function linux { for a in $*; do echo "HVT-ARG $a"; done; }
function initrd { echo "HVT-DEFAULT [$default] [$fallback]"; echo "HVT-BOOTED"; cat $1; echo; halt; }
set root=(hd0)
configfile /grub2/grub.cfg
echo "HVT-NO-BOOT [$default] [$fallback]"
halt
`,
  );
  const r = await execa('grub-emu', ['-d', dir, '-m', path.join(dir, 'device.map')], { input: '', timeout: 20_000, reject: false });
  // eslint-disable-next-line no-control-regex
  const output = `${r.stdout}${r.stderr}`.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '\n').replace(/\r/g, '').replace(/ +\[ [^\]]*\]/g, '\n');
  const lines = output.split('\n').map((l) => l.trim());
  const args = lines.filter((l) => l.startsWith('HVT-ARG ')).map((l) => l.slice('HVT-ARG '.length));
  const def = /HVT-(?:DEFAULT|NO-BOOT) \[([^\]]*)\] \[([^\]]*)\]/.exec(output);
  const bootedAt = lines.indexOf('HVT-BOOTED');
  return {
    booted: bootedAt >= 0 ? lines.slice(bootedAt + 1).find((l) => l !== '') ?? '' : '',
    args,
    defaultEntry: def?.[1] ?? '',
    fallback: def?.[2] ?? '',
    output,
    readBack: async (disk, file) => (await execa('debugfs', ['-R', `cat ${file}`, path.join(dir, `disk${disk}.img`)], { encoding: 'buffer', stderr: 'ignore' })).stdout as unknown as Buffer,
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}
