/**
 * The install under a failing disk and a changing source (docs/install.md, "Faults"): what every
 * case shares. Each case installs onto a loop device over the fault harness's FUSE file
 * (harness.ts), injects its fault, and checks the promise: the install fails loudly naming the
 * device or file and the offset or operation, exits 3, never reports success, invalidates what it
 * can and names what it cannot, ends within its grace after the verdict, and leaves no mount, loop
 * device or process; then the fault is removed and a re-run gives the disk a clean install gives,
 * compared by fingerprint (partition table and GUIDs, filesystem signatures, every file's digest,
 * the images' digests) with a clean install's, made once per file and shape (recoversToClean).
 * The cases are spread over five files so that the integration forks run them side by side (a case
 * is its faulted install through FUSE, then its re-run and, the first of its shape, the clean
 * install, both without FUSE).
 */
import { afterAll, beforeAll, expect } from 'vitest';
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Cleanup, buildSmallOsTree, configYaml, diskSnapshot, events, installArgs, partitionNode, sh, tempDir, TEST_SYSTEM_SIZE_MIB } from '../install/helpers.js';
import { faultDisk, hvinstallRun, leftovers, plannedPartitions, type FaultDisk, type FaultRule, type Verdict } from './harness.js';

export const cleanup = new Cleanup();

/** A case's timeout: up to three installs (the faulted one through FUSE), with the other integration forks alongside. */
export const FAULT_CASE_MS = 420_000;

/** A file of the test OS whose every 4 KiB carries this text: a flip rule corrupts only its data blocks. */
export const MARKER = 'HVFAULT-MARKER-0123456789abcdef';
export const MARKER_HEX = Buffer.from(MARKER).toString('hex');
export const MARKER_FILE = 'usr/share/hv-fault/marker.bin';
export const MiB = 1024 * 1024;

export interface Install {
  dir: string;
  disk: FaultDisk;
  configFile: string;
  stateDir: string;
  args: string[];
  journalFile: string;
  part: (label: string) => { number: number; startBytes: number; sizeBytes: number; dev: string; from: number; to: number };
  /** The planned partitions' filesystem labels (COS_GRUB only for EFI). */
  labels: string[];
}

/** The OS source every case installs from (built once per file by faultFileHooks). */
export let source: string;

/**
 * The name every case of this file gives its disk in config.yaml, as Harvester configs name disks:
 * a by-id link (made by hand: no udev here), pointed at the case's loop device before each of its
 * installs. The plan digests the config, so with one name for the disk every case of the file with
 * the same configuration plans the same GUIDs and UUIDs, and one clean install is the reference for
 * all of them (recoversToClean).
 */
const DISK_LINK = `/dev/disk/by-id/hv-fault-${process.pid}-${randomBytes(4).toString('hex')}`;

/** The file's disk link, atomically re-pointed at `dev` (the empty by-id directory is left: others may be adding theirs). */
async function pointDiskLink(dev: string): Promise<void> {
  await mkdir(path.dirname(DISK_LINK), { recursive: true });
  await rm(`${DISK_LINK}.new`, { force: true });
  await symlink(dev, `${DISK_LINK}.new`);
  await rename(`${DISK_LINK}.new`, DISK_LINK);
}

/** An EFI install unless `bios` (this machine boots without UEFI, so a plan without force_efi is for BIOS). */
export async function setup(extraInstall?: string, bios = false): Promise<Install> {
  const dir = await tempDir(cleanup, 'hv-faults-');
  const disk = await faultDisk(cleanup, dir);
  const configFile = path.join(dir, 'config.yaml');
  await writeFile(configFile, configYaml({ device: DISK_LINK, forceEfi: !bios, extraInstall }));
  await pointDiskLink(disk.dev);
  const stateDir = path.join(dir, 'state');
  const parts = await plannedPartitions(configFile, source, TEST_SYSTEM_SIZE_MIB);
  const part = (label: string) => {
    const p = parts.find((x) => (x.label ?? x.name) === label)!;
    return { ...p, dev: partitionNode(disk.dev, p.number), from: p.startBytes, to: p.startBytes + p.sizeBytes };
  };
  const labels = parts.flatMap((p) => (p.label ? [p.label] : []));
  return { dir, disk, configFile, stateDir, args: installArgs(configFile, source, stateDir, ['--bundle', 'none']), journalFile: path.join(stateDir, `${path.basename(disk.dev)}.journal.json`), part, labels };
}

/** The disk as a clean install leaves it, with the loop device's name taken out. */
export async function fingerprint(t: Install): Promise<string> {
  const verify = await sh('sgdisk', ['--verify', t.disk.dev]);
  expect(verify.stdout).toContain('No problems found');
  expect(verify.stderr).not.toContain('ERROR');
  const snap = await diskSnapshot(t.disk.dev, t.dir);
  return JSON.stringify(snap, null, 1).replaceAll(path.basename(t.disk.dev), 'DISK');
}

/** Runs the install and waits for the process (it must end within the grace after its verdict). */
export async function install(t: Install, env: NodeJS.ProcessEnv = {}, during?: (stdout: () => string) => Promise<void>): Promise<Verdict> {
  await pointDiskLink(t.disk.dev);
  const run = hvinstallRun(cleanup, t.args, env);
  let out = '';
  run.child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  await during?.(() => out);
  return run.done;
}

/** Resolves once the install's JSON events show `step` started. */
export async function stepStarted(stdout: () => string, step: string): Promise<void> {
  const re = new RegExp(`"type":"step","phase":"started","step":"${step}"`);
  while (!re.test(stdout())) await new Promise((r) => setTimeout(r, 50));
}

export async function journalOf(t: Install): Promise<{ status: string; invalidation?: string[]; notInvalidated?: string[]; steps: Array<{ name: string; status: string }> }> {
  return JSON.parse(await readFile(t.journalFile, 'utf8'));
}

/** The promise every failed case keeps. */
export async function failedLoudly(t: Install, r: Verdict): Promise<void> {
  expect(r.hungAfterVerdict, `still running 30 s after its verdict:\n${r.stderr}`).toBe(false);
  expect(r.code, r.stderr).toBe(3);
  expect(events(r.stdout).some((e) => e.type === 'install' && e.phase === 'succeeded')).toBe(false);
  expect(await leftovers(t.disk.dev)).toEqual([]);
}

/**
 * The OS source as mke2fs copies it into the images: every entry's path, type, mode, owner, size and
 * times (a rewrite restored to the same bytes still moves the ctime, which the images carry).
 */
async function sourceState(root: string): Promise<string> {
  const out: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const name of (await readdir(dir)).sort()) {
      const full = path.join(dir, name);
      const s = await lstat(full, { bigint: true });
      out.push(`${path.relative(root, full)} ${s.mode} ${s.uid}:${s.gid} ${s.size} ${s.atimeNs} ${s.mtimeNs} ${s.ctimeNs}`);
      if (s.isDirectory()) await walk(full);
    }
  };
  await walk(root);
  return out.join('\n');
}

/**
 * The clean installs of this file, by what shapes them: the config's text (the disk named by the
 * file's link, so the same GUIDs and UUIDs), the disk's size and the source's state. A case whose
 * config, disk or source differs from every earlier one's installs its own.
 */
const cleanFingerprints = new Map<string, string>();

async function shapeOf(t: Install): Promise<string> {
  return JSON.stringify({ config: await readFile(t.configFile, 'utf8'), diskBytes: (await stat(t.disk.backing)).size, source: await sourceState(source) });
}

/**
 * The fault removed (the disk now without the FUSE file between it and its bytes), the same install
 * again ends with the disk a clean install gives: the fingerprint of a fresh install (new journal)
 * onto a blanked disk, by the same config from the same source. That clean install is made once per
 * file and shape (shapeOf), onto the disk of the first case that gets here (blanked after its own
 * recovered fingerprint), and is the reference for every later case of the same shape.
 */
export async function recoversToClean(t: Install): Promise<void> {
  await t.disk.bypass();
  const before = await shapeOf(t);
  const again = await install(t);
  expect(again.code, again.stderr).toBe(0);
  const recovered = await fingerprint(t);
  // A shape that moved while the install ran (the source read, say) is no one shape: not shared.
  const shape = await shapeOf(t);
  const known = shape === before ? cleanFingerprints.get(shape) : undefined;
  if (known !== undefined) {
    expect(recovered).toEqual(known);
    return;
  }
  for (const p of t.labels) await sh('wipefs', ['--all', '--force', t.part(p).dev]);
  // The table's signatures (protective MBR, both GPT headers) as wipefs finds them: sgdisk --zap-all would sync the whole machine and sleep a second.
  await sh('wipefs', ['--all', '--force', t.disk.dev]);
  await sh('partprobe', [t.disk.dev], { allowFailure: true });
  const cleanShape = await shapeOf(t);
  const clean = await install({ ...t, args: installArgs(t.configFile, source, `${t.stateDir}-clean`, ['--bundle', 'none']) });
  expect(clean.code, clean.stderr).toBe(0);
  const reference = await fingerprint(t);
  if (cleanShape === (await shapeOf(t))) cleanFingerprints.set(cleanShape, reference);
  expect(recovered).toEqual(reference);
}

/** The file's hooks: the test OS source with its marker file first, everything undone last. */
export function faultFileHooks(): void {
  afterAll(() => cleanup.run());
  beforeAll(async () => {
    cleanup.add(() => Promise.all([rm(DISK_LINK, { force: true }), rm(`${DISK_LINK}.new`, { force: true })]));
    const dir = await tempDir(cleanup, 'hv-faults-src-');
    source = await buildSmallOsTree(dir);
    await mkdir(path.join(source, path.dirname(MARKER_FILE)), { recursive: true });
    await writeFile(path.join(source, MARKER_FILE), Buffer.from(MARKER.repeat(Math.ceil((4 * MiB) / MARKER.length)).slice(0, 4 * MiB)));
  }, 600_000);
}

/** The disk byte (from the partition's start) of a file's byte, from `filefrag -v`. */
export function physicalByte(filefrag: string, offset: number): number {
  const unit = Number(/blocks? of (\d+) bytes/.exec(filefrag)![1]);
  for (const line of filefrag.split('\n')) {
    const m = /^\s*\d+:\s+(\d+)\.\.\s*(\d+):\s+(\d+)\.\./.exec(line);
    if (m && offset / unit >= Number(m[1]) && offset / unit <= Number(m[2]) + 1) return (Number(m[3]) + Math.floor(offset / unit) - Number(m[1])) * unit + (offset % unit);
  }
  throw new Error(`byte ${offset} is in no extent`);
}


/** Sets the rules once the install's step has started. */
export function atStep(step: string, disk: FaultDisk, rules: FaultRule[]): (stdout: () => string) => Promise<void> {
  return async (stdout) => {
    await stepStarted(stdout, step);
    await disk.setRules(rules);
  };
}

/** The last `kernel log read for I/O errors` line of the install log the run's error names. */
async function kernelLogRead(stderr: string): Promise<{ readTo: number | null; readable: boolean } | undefined> {
  const file = /^\s*log: (\S+\.install\.log)$/m.exec(stderr)?.[1];
  if (!file) return undefined;
  const lines = (await readFile(file, 'utf8').catch(() => '')).split('\n').filter((l) => l.includes('"kernel log read for I/O errors"'));
  const last = lines.at(-1);
  return last ? (JSON.parse(last) as { readTo: number | null; readable: boolean }) : undefined;
}

/** The kernel's block-layer message about this disk, as the error must quote it. */
const kernelLine = (dev: string): RegExp => new RegExp(`(write error at byte \\d+ of ${dev} \\(kernel: I/O error, dev ${path.basename(dev)}, sector \\d+|(write|I/O) error on ${dev}(p\\d+)? \\(kernel: .*I/O error)`);

/**
 * The error quotes the kernel's line about this disk, or, when the kernel rate-limited its I/O
 * error lines (ten per five seconds across every device: the other integration fork's faults count
 * too), says so with the kernel's own "callbacks suppressed" notice, which dmesg must hold; or says
 * nothing of the kernel, which is right only when dmesg holds no I/O error line about this disk
 * from the run's start to the kernel log the run read for its error (dropped before the kernel
 * printed any notice). That read is the install log's `kernel log read for I/O errors` line: its
 * `readTo` is the newest line the run saw, so the lines of what the failed run did next (its
 * invalidation writes the same bytes again) do not count, however late this process saw the
 * failed step.
 */
export async function expectKernelWord(r: Verdict, dev: string): Promise<void> {
  const { stderr } = r;
  if (kernelLine(dev).test(stderr)) return;
  const limited = /it rate-limited them \((.+?)\); dmesg/.exec(stderr);
  const dmesg = (await sh('dmesg', [])).stdout;
  if (limited) {
    for (const notice of limited[1]!.split('; ')) {
      expect(notice).toMatch(/callbacks suppressed$/);
      expect(dmesg).toContain(notice);
    }
    return;
  }
  const { from } = r.kernelWindow;
  expect(r.kernelWindow.to, `the run's output never said a step failed:\n${stderr}`).toBeDefined();
  const read = await kernelLogRead(stderr);
  expect(read, `the install log has no line saying which kernel log the run read for its error:\n${stderr}`).toBeDefined();
  expect(read!.readable, `the run could not read the kernel log:\n${stderr}`).toBe(true);
  const to = Math.min(r.kernelWindow.to!, read!.readTo ?? Infinity);
  const name = path.basename(dev);
  const about = new RegExp(`(error, dev ${name}(p\\d+)?,? sector|I/O error on dev ${name}(p\\d+)?,|EXT4-fs \\(${name}p\\d+\\): I/O error|I/O error .* for ${name}p\\d+-)`);
  const seen = dmesg.split('\n').filter((l) => {
    const m = /^\[\s*(\d+\.\d+)\]\s+(.*)$/.exec(l.trim());
    return m !== null && Number(m[1]) >= from && Number(m[1]) <= to && about.test(m[2]!);
  });
  expect(seen, `the kernel logged these about ${dev} before the failure, and the error quotes none:\n${stderr}`).toEqual([]);
}

/** Seconds since boot (dmesg's clock), taken before an install to read only its kernel lines. */
export async function kernelNow(): Promise<number> {
  return Number((await readFile('/proc/uptime', 'utf8')).split(' ')[0]);
}

/**
 * The error names the byte of the first I/O error on this disk; or names the partition with the
 * kernel's line and says why there is no byte: the kernel rate-limited the lines that carry it
 * (quoting notices dmesg must hold), or, before the kernel printed any notice, it logged no line
 * with the sector about this disk since `since`, which dmesg must bear out. When the first failure
 * is a tool's (mount reading the superblock of a disk that is gone) and the kernel dropped every
 * I/O error line of the run, the error says that instead, quoting the notices dmesg must hold.
 */
export async function expectKernelByte(stderr: string, dev: string, since: number): Promise<void> {
  if (new RegExp(`(read|write) error at byte \\d+ of ${dev}`).test(stderr)) return;
  const quoted = `(read|write|I/O) error on ${dev}(p\\d+)? \\(kernel: (.+)\\)`;
  const limited = new RegExp(`${quoted} \\(no byte: the kernel rate-limited its lines with the sector: (.+?)\\)(\n|$)`).exec(stderr);
  const unlogged = new RegExp(`${quoted} \\(no byte: the kernel logged no line with the sector about [^()]*${dev}\\b[^()]* in this run; it rate-limits those lines across all disks\\)(\n|$)`).exec(stderr);
  const allDropped = new RegExp(`\nthe kernel logged no I/O error line about [^\n]*${dev}\\b[^\n]* in this run: it rate-limited them \\((.+?)\\); dmesg`).exec(stderr);
  expect(limited ?? unlogged ?? allDropped, `neither the byte of the first I/O error on ${dev} nor why there is none in:\n${stderr}`).not.toBeNull();
  const dmesg = (await sh('dmesg', [])).stdout;
  if (allDropped) {
    for (const notice of allDropped[1]!.split('; ')) {
      expect(notice).toMatch(/callbacks suppressed$/);
      expect(dmesg).toContain(notice);
    }
    return;
  }
  if (limited) {
    for (const notice of limited[4]!.split('; ')) {
      expect(notice).toMatch(/callbacks suppressed$/);
      expect(dmesg).toContain(notice);
    }
    return;
  }
  // The run's kernel lines up to the one quoted: none of the block layer's about this disk.
  const lines = dmesg.split('\n').flatMap((l) => {
    const m = /^\[\s*(\d+\.\d+)\]\s+(.*)$/.exec(l.trim());
    return m && Number(m[1]) >= since ? [m[2]!.trim()] : [];
  });
  const at = lines.indexOf(unlogged![3]!);
  expect(at, `the quoted kernel line is not in dmesg since ${since}: ${unlogged![3]}`).toBeGreaterThanOrEqual(0);
  const name = path.basename(dev);
  const withSector = new RegExp(`error, dev ${name}(p\\d+)?,? sector \\d+`);
  // "operation not supported error, dev …" is a DISCARD or WRITE_ZEROES the device does not do
  // (mkfs and ext4 ask for them and fall back): no read or write failed there.
  const notSupported = /^operation not supported error,/;
  expect(lines.slice(0, at).filter((l) => withSector.test(l) && !notSupported.test(l))).toEqual([]);
}

/** A small tmpfs of our own as the state dir (unmounted at cleanup). */
export async function smallStateDir(t: Install, size: string): Promise<string> {
  const dir = path.join(t.dir, 'small-state');
  await mkdir(dir, { recursive: true });
  await sh('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'hv-fault-state', dir]);
  cleanup.add(() => sh('umount', ['-l', dir], { allowFailure: true }));
  return dir;
}

/** Fills a filesystem to the last byte. */
export async function fill(dir: string): Promise<void> {
  await sh('sh', ['-c', `dd if=/dev/zero of=${dir}/filler bs=64k status=none; true`]);
}
