/**
 * Integration helpers for the install engine: sparse disks on loop devices, a small OS tree, running
 * the real CLI (bin/hvinstall, built by `make build`), and inspecting a disk from the outside.
 * Everything created is registered for cleanup, which runs even when a test fails.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, open, readdir, readFile, readlink, rm, stat, symlink, writeFile, lstat } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { buildTestOsTree } from '../../../iso-build/index.js';
import { MEDIA_DIR } from '../../../installer/remote/automatic-media.js';
import { unmountWhenFree } from '../../../lib/unmount.js';

const execFileP = promisify(execFile);
export const REPO = path.resolve(import.meta.dirname, '../../..');
export const HVINSTALL = path.join(REPO, 'bin/hvinstall');

export async function sh(cmd: string, args: string[], opts: { allowFailure?: boolean; env?: NodeJS.ProcessEnv } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await execFileP(cmd, args, { maxBuffer: 64 * 1024 * 1024, env: opts.env ?? process.env });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    if (!opts.allowFailure) throw new Error(`${cmd} ${args.join(' ')} failed (${e.code}): ${e.stderr ?? ''}`);
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

export class Cleanup {
  private readonly tasks: Array<() => Promise<unknown>> = [];
  add(task: () => Promise<unknown>): void {
    this.tasks.push(task);
  }
  async run(): Promise<void> {
    while (this.tasks.length) await this.tasks.pop()!().catch(() => undefined);
  }
}

/**
 * A Cleanup for one test, run when that test ends, passed or failed: the files whose tests run side
 * by side (describe.concurrent) take one per test, since a file-wide afterEach would end the disks
 * of the tests still running. Pass the test context's onTestFinished (vitest tracks a concurrent
 * test only through its context).
 */
export function testCleanup(onTestFinished: (fn: () => Promise<void>) => void): Cleanup {
  const cleanup = new Cleanup();
  onTestFinished(() => cleanup.run());
  return cleanup;
}

export const isMounted = async (dir: string): Promise<boolean> => (await sh('mountpoint', ['-q', dir], { allowFailure: true })).code === 0;

/** A process holding a device open for `seconds`, as udev's blkid does for a moment; resolves once it holds it. */
export async function holdOpen(cleanup: Cleanup, device: string, seconds: number): Promise<ChildProcess> {
  const child = spawn('bash', ['-c', `exec 3<"$1"; echo held; sleep ${seconds}`, 'hold', device], { stdio: ['ignore', 'pipe', 'inherit'] });
  cleanup.add(async () => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`the holder of ${device} ended (${code}) before holding it`)));
  });
  return child;
}

export async function tempDir(cleanup: Cleanup, prefix = 'hvinstall-it-'): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  cleanup.add(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A sparse raw disk of `sizeGiB` on a fresh loop device; detached (and unmounted) at cleanup. */
export async function loopDisk(cleanup: Cleanup, dir: string, name: string, sizeGiB: number, sectorSize = 512): Promise<string> {
  const file = path.join(dir, `${name}.raw`);
  await sh('truncate', ['-s', `${sizeGiB}G`, file]);
  const args = ['--find', '--show', ...(sectorSize !== 512 ? ['--sector-size', String(sectorSize)] : []), file];
  const dev = (await sh('losetup', args)).stdout.trim();
  cleanup.add(async () => {
    // This device and its partitions only: /dev/loop1 is also the start of /dev/loop10, another test's.
    const mounts = (await readFile('/proc/self/mounts', 'utf8')).split('\n').map((l) => l.split(' ')).filter((f) => f[0] === dev || f[0]?.startsWith(`${dev}p`));
    for (const m of mounts) await sh('umount', ['-l', m[1]!], { allowFailure: true });
    await sh('losetup', ['--detach', dev], { allowFailure: true });
  });
  return dev;
}

/** The deploy engineer's small test OS (busybox-static, os-release, init), plus a 0600 file whose mode must survive. */
export async function buildSmallOsTree(dir: string): Promise<string> {
  const tree = await buildTestOsTree(path.join(dir, 'os'));
  await writeFile(path.join(tree.dir, 'etc/secret-file'), 'mode 600\n', { mode: 0o600 });
  await chmod(path.join(tree.dir, 'etc/secret-file'), 0o600);
  return tree.dir;
}

/**
 * A small image bundle in the ISO's layout (a few KiB): metadata.yaml, an archive and its list, a
 * 0600 file, a read-only directory and a symlink, whose modes and target must survive the copy.
 */
export async function buildSmallBundle(dir: string): Promise<string> {
  const b = path.join(dir, 'bundle');
  await mkdir(path.join(b, 'harvester/images'), { recursive: true });
  await mkdir(path.join(b, 'harvester/images-lists'), { recursive: true });
  await mkdir(path.join(b, 'rancherd/images'), { recursive: true });
  await writeFile(path.join(b, 'metadata.yaml'), 'images:\n  common:\n    - list: harvester/images-lists/test-images.txt\n      archive: harvester/images/test-images.tar.zst\n');
  await writeFile(path.join(b, 'harvester/images/test-images.tar.zst'), randomBytes(6000));
  await writeFile(path.join(b, 'harvester/images-lists/test-images.txt'), 'docker.io/library/busybox:latest\n');
  await writeFile(path.join(b, 'rancherd/images/bootstrap.txt'), 'docker.io/rancher/system-agent-installer-rke2:v1.31.0-rke2r1\n');
  await chmod(path.join(b, 'rancherd/images/bootstrap.txt'), 0o600);
  await chmod(path.join(b, 'rancherd/images'), 0o555);
  await symlink('images/test-images.tar.zst', path.join(b, 'harvester/current.tar.zst'));
  return b;
}

export interface ConfigOptions {
  device: string;
  dataDisk?: string;
  forceEfi?: boolean;
  forceMbr?: boolean;
  role?: string;
  extraInstall?: string;
}

/** A create-mode config as a user writes it (YAML, snake_case). */
export function configYaml(o: ConfigOptions): string {
  return [
    'scheme_version: 1',
    'token: integration-secret-token',
    'os:',
    '  hostname: hv-it-node',
    '  password: rancher-password-secret',
    '  ntp_servers: [0.suse.pool.ntp.org]',
    '  dns_nameservers: [10.0.2.3]',
    'install:',
    '  mode: create',
    `  device: ${o.device}`,
    '  management_interface:',
    '    interfaces: [{name: eth0}]',
    '    method: dhcp',
    '  vip: 10.0.2.100',
    '  vip_mode: static',
    ...(o.dataDisk ? [`  data_disk: ${o.dataDisk}`] : []),
    ...(o.forceEfi ? ['  force_efi: true'] : []),
    ...(o.forceMbr ? ['  force_mbr: true'] : []),
    ...(o.role ? [`  role: ${o.role}`] : []),
    ...(o.extraInstall ? [o.extraInstall] : []),
    '',
  ].join('\n');
}

/** An HTTP server on 127.0.0.1 recording webhook requests (method, path, body). */
export async function webhookReceiver(cleanup: Cleanup): Promise<{ url: string; received: Array<{ method: string; path: string; body: string }> }> {
  const { createServer } = await import('node:http');
  const received: Array<{ method: string; path: string; body: string }> = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      received.push({ method: req.method ?? '', path: req.url ?? '', body });
      res.end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  cleanup.add(() => new Promise((r) => server.close(() => r(undefined))));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, received };
}

export function webhooksYaml(url: string): string {
  return ['  webhooks:', ...['STARTED', 'SUCCEEDED', 'FAILED'].flatMap((e) => [`    - event: ${e}`, '      method: POST', `      url: ${url}/${e.toLowerCase()}`, `      payload: '{"event": "${e}"}'`])].join('\n');
}

export const TEST_SYSTEM_SIZE_MIB = 272;

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs bin/hvinstall with args; returns its exit code or the signal that killed it. */
export function hvinstall(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return run(HVINSTALL, args, env);
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/**
 * `install --config` onto the config's loop device, named again as --device: a disk built here for
 * another machine, so the build host's own hardware (legacy BIOS, two CPUs) is not what the
 * hardware gate judges (installer/preflight/judge.ts). The gate of an install of this machine is
 * tested with hvinstallOn.
 */
export function installArgs(configFile: string, source: string, stateDir: string, extra: string[] = []): string[] {
  const device = /^\s*device:\s*(\S+)\s*$/m.exec(readFileSync(configFile, 'utf8'))?.[1];
  return ['install', '--config', configFile, ...(device ? ['--device', device] : []), '--source', source, '--yes', '--progress', 'json', '--system-size', String(TEST_SYSTEM_SIZE_MIB), '--state-dir', stateDir, ...extra];
}

/**
 * The machine bin/hvinstall sees (hvinstallOn): its firmware (a tmpfs over /sys/firmware, with an
 * empty efi/ for UEFI: no efivars, so no boot entry is written; no DMI, so memory comes from
 * /proc/meminfo), and optionally /proc/cpuinfo and /proc/meminfo bind-mounted from files. The rest
 * (disks, NICs, /dev/kvm) is this machine's.
 */
export interface TestMachine {
  firmware: 'uefi' | 'bios';
  cpuinfo?: string;
  meminfo?: string;
}

/**
 * Drops this private mount namespace's copies of the mounts other integration files have made
 * (their disks' partitions under /tmp and /run/hvinstall, their FUSE media): held here for the
 * length of an install, a copy keeps that filesystem busy, and the other file's remount, exclusive
 * open or fsck of its own partition fails. The host's mounts are not touched.
 */
const DROP_FOREIGN_MOUNTS = `for m in $(awk '$5 ~ "^/(tmp|run/hvinstall)/" {print $5}' /proc/self/mountinfo | sort -r); do umount -l "$m" 2>/dev/null; done`;

/** Runs bin/hvinstall in a private mount namespace shaped as `machine`. */
export function hvinstallOn(machine: TestMachine, args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  // Automatic installs download into the live system's one media directory: each gets its own
  // tmpfs there, as each live system has, so two files' installs never read each other's ISO.
  const steps = ['mount -t tmpfs hvtest-firmware /sys/firmware', ...(machine.firmware === 'uefi' ? ['mkdir /sys/firmware/efi'] : []), `mkdir -p ${MEDIA_DIR} && mount -t tmpfs hvtest-media ${MEDIA_DIR}`];
  if (machine.cpuinfo) steps.push(`mount --bind ${machine.cpuinfo} /proc/cpuinfo`);
  if (machine.meminfo) steps.push(`mount --bind ${machine.meminfo} /proc/meminfo`);
  const script = `${DROP_FOREIGN_MOUNTS}; ${steps.join(' && ')} && exec "$0" "$@"`;
  return run('unshare', ['--mount', '--propagation', 'slave', 'sh', '-c', script, HVINSTALL, ...args], env);
}

export function hvinstallOnUefiMachine(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return hvinstallOn({ firmware: 'uefi' }, args, env);
}

/** /proc files of a lab VM below Harvester's minimums: 2 CPUs without vmx/svm, 2 GiB (16 GiB free, so an ISO still fits in RAM). */
export async function labMachineFiles(dir: string): Promise<{ cpuinfo: string; meminfo: string }> {
  const cpu = (n: number) => `processor\t: ${n}\nvendor_id\t: GenuineIntel\nmodel name\t: QEMU Virtual CPU\nphysical id\t: 0\ncore id\t: ${n}\ncpu cores\t: 2\nflags\t\t: fpu sse2 hypervisor\n\n`;
  const cpuinfo = path.join(dir, 'lab-cpuinfo');
  const meminfo = path.join(dir, 'lab-meminfo');
  await writeFile(cpuinfo, cpu(0) + cpu(1));
  await writeFile(meminfo, 'MemTotal:        2097152 kB\nMemFree:        16777216 kB\nMemAvailable:   16777216 kB\n');
  return { cpuinfo, meminfo };
}

/**
 * A disk that already holds something: a new GPT with one 64 MiB partition carrying an ext4 labelled
 * `label`. Written with sfdisk, which fsyncs the one device: sgdisk syncs every filesystem of the
 * machine and then sleeps a second after each table it writes.
 */
export async function diskWithFilesystem(disk: string, label: string): Promise<void> {
  await sh('sh', ['-c', `printf ',64M\\n' | sfdisk --quiet --no-tell-kernel --label gpt ${disk}`]);
  await sh('partprobe', [disk]);
  await sh('mkfs.ext4', ['-q', '-L', label, partitionNode(disk, 1)]);
}

export function partitionNode(disk: string, n: number): string {
  return /\d$/.test(disk) ? `${disk}p${n}` : `${disk}${n}`;
}

export function parseExport(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const l of text.split('\n')) {
    const i = l.indexOf('=');
    if (i > 0) out[l.slice(0, i)] = l.slice(i + 1);
  }
  return out;
}

export async function probe(dev: string): Promise<Record<string, string>> {
  return parseExport((await sh('blkid', ['-p', '-o', 'export', dev], { allowFailure: true })).stdout);
}

const SPARSE_DIGEST = path.join(REPO, 'test/fixtures/sparse-digest/sparse_digest.py');
const SPARSE_FROM = 64 * 1024 * 1024;

/**
 * A sparse file's sha256 and its chunked digest (`sha256-4m:…`, as installer/deploy records an
 * image's), from the test's own oracle (test/fixtures/sparse-digest): it reads the data extents
 * only (SEEK_DATA) and hashes the holes as the zeros they read as, without the kernel's zero
 * filling of every hole page that a plain read of a 272 MiB image costs (3-4 s here).
 */
export async function sparseDigests(file: string): Promise<{ sha256: string; chunked: string }> {
  const [sha256, chunks] = (await sh('python3', [SPARSE_DIGEST, file])).stdout.split('\n');
  return { sha256: sha256!, chunked: `sha256-4m:${chunks}` };
}

async function sha256Of(file: string, size: number, normalise?: (rel: string, text: string) => string, rel = '', allocated = size): Promise<string> {
  if (normalise && size < 1024 * 1024) return createHash('sha256').update(normalise(rel, await readFile(file, 'utf8'))).digest('hex');
  if (size < 1024 * 1024) return createHash('sha256').update(await readFile(file)).digest('hex');
  if (size >= SPARSE_FROM && allocated < size / 2) return (await sparseDigests(file)).sha256; // the OS images: nearly all holes
  return (await sh('sha256sum', [file])).stdout.split(' ')[0]!; // streamed by a C tool
}

/** path → "mode size sha256" (or "link target", "dir mode") for every entry under root. */
export async function treeManifest(
  root: string,
  exclude: (rel: string) => boolean = () => false,
  normalise?: (rel: string, text: string) => string,
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  async function walk(dir: string): Promise<void> {
    for (const name of (await readdir(dir)).sort()) {
      const full = path.join(dir, name);
      const rel = path.relative(root, full);
      if (exclude(rel)) continue;
      const s = await lstat(full);
      const mode = (s.mode & 0o7777).toString(8);
      if (s.isSymbolicLink()) out[rel] = `link ${await readlink(full)}`;
      else if (s.isDirectory()) {
        out[rel] = `dir ${mode}`;
        await walk(full);
      } else out[rel] = `${mode} ${s.size} ${await sha256Of(full, s.size, normalise, rel, s.blocks * 512)}`;
    }
  }
  await walk(root);
  return out;
}

export async function withMount<T>(dev: string, dir: string, fn: (mnt: string) => Promise<T>, opts = 'ro'): Promise<T> {
  const mnt = await mkdtemp(path.join(dir, 'mnt-'));
  await sh('mount', ['-o', opts, dev, mnt]);
  let result: T;
  try {
    result = await fn(mnt);
  } catch (err) {
    // The check's own failure is the news; a mount its open files keep busy is left to the test's cleanup.
    await unmountWhenFree(mnt).then(() => rm(mnt, { recursive: true, force: true })).catch(() => undefined);
    throw err;
  }
  // A loop mount inside it (an image on COS_STATE) keeps it busy while a prober holds the loop device.
  await unmountWhenFree(mnt);
  await rm(mnt, { recursive: true, force: true });
  return result;
}

/**
 * What makes two installs "identical": the partition table (table id, partition GUIDs, names, types,
 * sectors), every filesystem's type/label/UUID, the boot code (MBR code area, bios_grub), the files
 * on every filesystem with mode, size and sha256 (images included), the ESP's files. Not compared:
 * timestamps — file times, the install record (/oem/install: log and journal carry times and run
 * counts) and the `date:` line of state.yaml (when the images were deployed).
 */
const withoutDeployDate = (rel: string, text: string): string => (path.basename(rel) === 'state.yaml' ? text.replace(/^date:.*$/m, 'date: <not compared>') : text);

/**
 * sha256 of a grub EFI binary with the mtime (and so the checksum) of the ustar headers of its
 * embedded memdisk zeroed: installer/bootloader tars the early config with the install time as its
 * mtime. Every other byte is compared.
 */
async function efiBinarySha256(file: string): Promise<string> {
  const buf = Buffer.from(await readFile(file));
  for (let i = buf.indexOf('ustar\0'); i >= 257; i = buf.indexOf('ustar\0', i + 1)) {
    const header = i - 257;
    buf.fill(0, header + 136, header + 156); // mtime[12] + chksum[8]
  }
  return createHash('sha256').update(buf).digest('hex');
}

export async function diskSnapshot(disk: string, dir: string): Promise<Record<string, unknown>> {
  const table = (await sh('sfdisk', ['--dump', disk])).stdout.replace(/^device: .*$/m, '');
  const snap: Record<string, unknown> = { table };
  const mbr = await sh('sh', ['-c', `head -c 440 ${disk} | sha256sum`]);
  snap.mbrCode = mbr.stdout.split(' ')[0];
  const parts = (await readdir('/sys/class/block')).filter((n) => n.startsWith(`${path.basename(disk)}p`)).sort();
  for (const p of parts) {
    const dev = `/dev/${p}`;
    const sig = await probe(dev);
    const entry: Record<string, unknown> = { type: sig.TYPE, label: sig.LABEL, uuid: sig.UUID };
    if (sig.TYPE === 'ext4') {
      entry.files = await withMount(dev, dir, (m) => treeManifest(m, (rel) => rel === 'lost+found' || rel.startsWith('install'), withoutDeployDate));
    } else if (sig.TYPE === 'vfat') {
      const out = path.join(dir, `esp-${p}`);
      await mkdir(out, { recursive: true });
      await sh('mcopy', ['-s', '-n', '-i', dev, '::/*', out]);
      entry.files = await treeManifest(out);
      for (const rel of Object.keys(entry.files as Record<string, string>).filter((r) => /\.efi$/i.test(r))) {
        (entry.files as Record<string, string>)[rel] = `efi ${(await stat(path.join(out, rel))).size} ${await efiBinarySha256(path.join(out, rel))}`;
      }
      await rm(out, { recursive: true, force: true });
    } else if (!sig.TYPE) {
      entry.sha256 = (await sh('sh', ['-c', `sha256sum < ${dev}`])).stdout.split(' ')[0];
    }
    snap[p.replace(path.basename(disk), 'disk')] = entry;
  }
  return snap;
}

export async function fileMode(p: string): Promise<number> {
  return (await stat(p)).mode & 0o777;
}

export function events(stdout: string): Array<Record<string, unknown>> {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

const SEED_REGION = 1024 * 1024;

/**
 * Random bytes at the start, the middle and the end of a sparse disk file (where partition tables,
 * superblocks and the GPT backup live), and a fingerprint of the whole file: its allocated blocks
 * after a sync plus the sha256 of those regions. A write anywhere else allocates blocks (nothing in
 * the install path discards), a write inside a region changes its hash: equal fingerprints mean not
 * one byte of the disk changed.
 */
export async function seedDisk(file: string): Promise<() => Promise<string>> {
  const size = (await stat(file)).size;
  const offsets = [0, Math.floor(size / 2 / SEED_REGION) * SEED_REGION, size - SEED_REGION];
  const fh = await open(file, 'r+');
  try {
    for (const off of offsets) await fh.write(randomBytes(SEED_REGION), 0, SEED_REGION, off);
  } finally {
    await fh.close();
  }
  return async () => {
    // The loop devices' dirty pages reach the file, then the file's blocks are counted: fsync of
    // those two, not a global sync, which waits for every other file's disks too.
    const loops = (await sh('losetup', ['--noheadings', '--output', 'NAME', '--associated', file])).stdout.split('\n').filter(Boolean);
    await sh('sync', [...loops, file]);
    const h = createHash('sha256');
    const f = await open(file, 'r');
    try {
      for (const off of offsets) {
        const buf = Buffer.alloc(SEED_REGION);
        await f.read(buf, 0, SEED_REGION, off);
        h.update(buf);
      }
      return `${(await f.stat()).blocks} blocks, regions ${h.digest('hex')}`;
    } finally {
      await f.close();
    }
  };
}

/** A directory of stand-ins for reboot, poweroff and halt that record their call; put it first on PATH. */
export async function powerStubs(dir: string): Promise<{ bin: string; calls: () => Promise<string> }> {
  const bin = path.join(dir, 'power-stubs');
  const log = path.join(dir, 'power-calls.log');
  await mkdir(bin, { recursive: true });
  for (const cmd of ['reboot', 'poweroff', 'halt', 'shutdown']) {
    await writeFile(path.join(bin, cmd), `#!/bin/sh\necho "${cmd} $*" >> '${log}'\n`, { mode: 0o755 });
  }
  return { bin, calls: () => readFile(log, 'utf8').catch(() => '') };
}
