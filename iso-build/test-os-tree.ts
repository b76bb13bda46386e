import { createCipheriv, createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, open, readlink, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode } from '../lib/errors.js';
import { run } from '../lib/exec.js';
import { BUSYBOX } from './host-tools.js';
import { POWEROFF_AFTER_OUTPUT } from './poweroff-after-output.js';

export interface TestOsTreeOptions {
  /** os-release NAME / VERSION_ID; default "hvinstall test OS" / "0.1". */
  name?: string;
  version?: string;
  /**
   * Adds this many bytes of incompressible, reproducible payload under usr/share/hv-payload
   * (files of at most 64 MiB), to give benchmarks and copy tests a tree of a known size.
   */
  payloadBytes?: number;
  /** Adds boot/vmlinuz and boot/initrd (Debian's kernel and our cos-img initramfs) for boot tests. */
  kernel?: import('./boot-chain.js').BootChainOptions;
  /** Every mtime in the tree is set to this (seconds since the epoch), so the tree is reproducible. */
  epoch?: number;
}

export interface TestOsTree {
  dir: string;
  /** The files written, relative to dir, with their sha256 (symlinks and directories excluded). */
  files: Record<string, string>;
}

/**
 * A small OS tree for tests and the demo: Debian's static busybox with its applet links, an
 * os-release, the directories an installed system mounts over (proc, sys, dev, run, oem, usr/local),
 * an /sbin/init that reports which image it booted from, optionally a payload and a kernel.
 */
export async function buildTestOsTree(dir: string, opts: TestOsTreeOptions = {}): Promise<TestOsTree> {
  const bb = await stat(BUSYBOX).catch(() => undefined);
  if (!bb?.isFile()) {
    throw new HvError(`${BUSYBOX} is missing: the test OS tree is built from Debian's busybox-static`, {
      where: 'iso-build: buildTestOsTree',
      hint: 'apt-get install busybox-static (make deps installs it)',
      exitCode: ExitCode.usage,
    });
  }
  const epoch = opts.epoch ?? 1_700_000_000;
  const files: Record<string, string> = {};
  await mkdir(dir, { recursive: true });
  for (const d of ['bin', 'sbin', 'usr/bin', 'usr/sbin', 'usr/lib', 'usr/local', 'usr/share', 'etc', 'proc', 'sys', 'dev', 'run', 'tmp', 'var/log', 'oem', 'root', 'boot', 'mnt']) {
    await mkdir(path.join(dir, d), { recursive: true });
  }
  await chmod(path.join(dir, 'tmp'), 0o1777);
  await copyFile(BUSYBOX, path.join(dir, 'bin/busybox'));
  await chmod(path.join(dir, 'bin/busybox'), 0o755);
  files['bin/busybox'] = await sha256Of(path.join(dir, 'bin/busybox'));
  const applets = (await run(BUSYBOX, ['--list-full'])).stdout.split('\n').map((l) => l.trim()).filter(Boolean);
  for (const rel of applets) {
    if (rel === 'bin/busybox' || rel === 'sbin/init') continue;
    const link = path.join(dir, rel);
    await mkdir(path.dirname(link), { recursive: true });
    const existing = await readlink(link).catch(() => undefined);
    if (existing === '/bin/busybox') continue;
    await rm(link, { force: true });
    await symlink('/bin/busybox', link);
  }
  const name = opts.name ?? 'hvinstall test OS';
  const version = opts.version ?? '0.1';
  const text: Record<string, string> = {
    'etc/os-release': `NAME="${name}"\nID=hvtest\nVERSION_ID="${version}"\nPRETTY_NAME="${name} ${version}"\nGRUB_ENTRY_NAME="${name}"\n`,
    'etc/hostname': 'hvtest\n',
    'etc/passwd': 'root:x:0:0:root:/root:/bin/sh\n',
    'etc/group': 'root:x:0:\n',
    'sbin/init': INIT_SCRIPT,
  };
  for (const [rel, content] of Object.entries(text)) {
    await writeFile(path.join(dir, rel), content);
    files[rel] = createHash('sha256').update(content).digest('hex');
  }
  await chmod(path.join(dir, 'sbin/init'), 0o755);
  if (opts.payloadBytes && opts.payloadBytes > 0) Object.assign(files, await writePayload(dir, opts.payloadBytes));
  if (opts.kernel) {
    const { addBootChain } = await import('./boot-chain.js');
    Object.assign(files, await addBootChain(dir, { epoch, ...opts.kernel }));
  }
  await setTimes(dir, epoch);
  return { dir, files };
}

/** The installed test system's init: says which image it booted, then powers off (for e2e tests). */
export const INIT_SCRIPT = `#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t devtmpfs dev /dev
mount -t proc proc /proc
mount -t sysfs sys /sys
img=$(sed -n 's/.*cos-img\\/filename=\\([^ ]*\\).*/\\1/p' /proc/cmdline)
. /etc/os-release
echo "HVTEST-BOOTED image=$img os=$NAME"
echo "HVTEST-CMDLINE $(cat /proc/cmdline)"
sync
${POWEROFF_AFTER_OUTPUT}
`;

const PAYLOAD_FILE = 64 * 1024 * 1024;

/** Incompressible bytes from AES-CTR over zeros with a fixed key: reproducible and fast. */
async function writePayload(dir: string, bytes: number): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const pdir = path.join(dir, 'usr/share/hv-payload');
  await mkdir(pdir, { recursive: true });
  const zeros = Buffer.alloc(4 * 1024 * 1024);
  let left = bytes;
  for (let i = 0; left > 0; i++) {
    const size = Math.min(PAYLOAD_FILE, left);
    const rel = `usr/share/hv-payload/blob-${String(i).padStart(4, '0')}.bin`;
    const iv = Buffer.alloc(16);
    iv.writeUInt32BE(i, 12);
    const cipher = createCipheriv('aes-128-ctr', Buffer.alloc(16, 7), iv);
    const hash = createHash('sha256');
    const fh = await open(path.join(dir, rel), 'w');
    try {
      for (let done = 0; done < size; ) {
        const n = Math.min(zeros.length, size - done);
        const chunk = cipher.update(zeros.subarray(0, n));
        hash.update(chunk);
        await fh.write(chunk, 0, chunk.length);
        done += n;
      }
    } finally {
      await fh.close();
    }
    out[rel] = hash.digest('hex');
    left -= size;
  }
  return out;
}

async function sha256Of(file: string): Promise<string> {
  const { readFile } = await import('node:fs/promises');
  return createHash('sha256').update(await readFile(file)).digest('hex');
}

/** Same mtime everywhere (symlinks included, via touch -h), so two builds scan identically. */
async function setTimes(dir: string, epoch: number): Promise<void> {
  await run('find', [dir, '-exec', 'touch', '-h', '-d', `@${epoch}`, '{}', '+']);
  await utimes(dir, epoch, epoch);
}
