/**
 * The fault harness: the install's target disk is a loop device over a FUSE file
 * (test/fixtures/fault-disk/faultdisk.py, Debian's python3-fusepy) whose reads and writes fail,
 * crawl, are corrupted or hang at the disk offsets a test chooses, or all fail from some moment (a
 * disk pulled out). This kernel has no device-mapper, nbd or scsi_debug; FUSE under a loop device
 * is the real part it offers, and the loop driver passes a failed FUSE write up as a block I/O
 * error the kernel logs, as a failing disk's would be.
 *
 * Everything is undone at cleanup even when a test fails: hung operations resumed, hvinstall runs
 * the test started stopped with their process group, mounts of the disk's partitions released,
 * the loop device detached, the FUSE file unmounted and its daemon ended.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, readlink, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { HVINSTALL, sh, type Cleanup, type CliResult } from '../install/helpers.js';

const FAULTDISK = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../fixtures/fault-disk/faultdisk.py');

export interface FaultRule {
  op?: 'read' | 'write' | 'any';
  /** Byte range of the disk the operation must overlap. */
  from?: number;
  to?: number;
  /** Hex bytes the written data must contain. */
  match?: string;
  action: 'eio' | 'flip' | 'delay' | 'suspend' | 'gone';
  ms?: number;
  skip?: number;
  count?: number;
}

export interface Hit {
  action: string;
  op: string;
  offset: number;
  size: number;
}

export interface FaultDisk {
  /** The loop device over the faulty file. */
  dev: string;
  /** The sparse file holding the disk's bytes (for corrupting it behind the disk's back). */
  backing: string;
  setRules(rules: FaultRule[]): Promise<void>;
  hits(): Promise<Hit[]>;
  /** Resolves at the first hit of this action (polling the hit log; the test's timeout bounds it). */
  waitForHit(action: FaultRule['action']): Promise<Hit>;
  /**
   * The fault removed for good: the same device re-attached straight to the backing file, without
   * the FUSE daemon (every operation through it costs a round trip to Python). Same name, same
   * bytes: the same disk for the install, which derives the disk's identity from its name.
   */
  bypass(): Promise<void>;
}

/**
 * The loop devices from this number up are the fault harness's: the other integration files take
 * the lowest free one (`losetup --find`), so once a fault disk is detached to be re-attached by
 * name (bypass), nobody takes its number in between.
 */
const FIRST_FAULT_LOOP = 200;

/**
 * The FUSE file on a loop device of the harness's range. Direct I/O: the loop driver passes each
 * request whole to the file instead of a page at a time, which through FUSE is 4x faster to read.
 */
async function attachHighLoop(file: string): Promise<string> {
  const start = FIRST_FAULT_LOOP + ((process.pid * 7) % 500);
  let last = '';
  for (let i = 0; i < 50; i++) {
    const dev = `/dev/loop${start + i}`;
    const r = await sh('losetup', ['--direct-io=on', dev, file], { allowFailure: true });
    if (r.code === 0) return dev;
    last = r.stderr;
  }
  throw new Error(`no free loop device from /dev/loop${start}: ${last}`);
}

function mounted(dir: string): boolean {
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n').some((l) => l.split(' ')[4] === dir);
}

export async function faultDisk(cleanup: Cleanup, dir: string, sizeGiB = 260): Promise<FaultDisk> {
  const backing = path.join(dir, 'disk-backing.raw');
  const mnt = path.join(dir, 'fault-fuse');
  const rules = path.join(dir, 'fault-rules.json');
  await mkdir(mnt, { recursive: true });
  await sh('truncate', ['-s', `${sizeGiB}G`, backing]);
  await writeFile(rules, '[]\n');
  const daemon: ChildProcess = spawn('/usr/bin/python3', [FAULTDISK, backing, mnt, rules], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  daemon.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const setRules = async (list: FaultRule[]): Promise<void> => {
    await writeFile(`${rules}.tmp`, JSON.stringify(list));
    await rename(`${rules}.tmp`, rules);
  };
  cleanup.add(async () => {
    if (daemon.exitCode === null) {
      daemon.kill('SIGTERM');
      await new Promise((r) => daemon.once('exit', r));
    }
  });
  for (let i = 0; i < 200 && !mounted(mnt); i++) {
    if (daemon.exitCode !== null) throw new Error(`faultdisk exited ${daemon.exitCode}: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  if (!mounted(mnt)) throw new Error(`faultdisk did not mount ${mnt}: ${stderr}`);
  cleanup.add(async () => {
    for (let i = 0; i < 100 && mounted(mnt); i++) {
      await sh('fusermount', ['-u', mnt], { allowFailure: true });
      if (mounted(mnt)) await new Promise((r) => setTimeout(r, 100));
    }
  });
  const dev = await attachHighLoop(path.join(mnt, 'disk.raw'));
  cleanup.add(async () => {
    await setRules([]); // hung operations return, so what waits on them can end
    await releaseDisk(dev);
  });
  const hits = async (): Promise<Hit[]> =>
    (await readFile(`${rules}.log`, 'utf8').catch(() => ''))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Hit);
  return {
    dev,
    backing,
    setRules,
    hits,
    async bypass() {
      await setRules([]);
      await releaseDisk(dev);
      // A detach waits for the device's last opener (a udev probe, say): retried until it is free.
      for (let i = 0; ; i++) {
        const r = await sh('losetup', ['--partscan', dev, backing], { allowFailure: true });
        if (r.code === 0) return;
        if (i === 100) throw new Error(`cannot re-attach ${dev} to ${backing}: ${r.stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    async waitForHit(action) {
      for (;;) {
        const h = (await hits()).find((x) => x.action === action);
        if (h) return h;
        await new Promise((r) => setTimeout(r, 100));
      }
    },
  };
}

/** Unmounts the disk's partitions wherever they are mounted, then detaches the loop device. */
async function releaseDisk(dev: string): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const mounts = (await readFile('/proc/self/mounts', 'utf8')).split('\n').map((l) => l.split(' ')).filter((f) => f[0] === dev || f[0]?.startsWith(`${dev}p`));
    if (mounts.length === 0) break;
    for (const m of mounts.reverse()) await sh('umount', [m[1]!], { allowFailure: true });
    await new Promise((r) => setTimeout(r, 100));
  }
  await sh('losetup', ['--detach', dev], { allowFailure: true });
}

export interface Verdict extends CliResult {
  /** The process was still running this long after its install event said failed or succeeded. */
  hungAfterVerdict: boolean;
  /** dmesg's clock (seconds since boot) when the run started, and when its output said a step failed: what the kernel said about the disk in between is what the error could quote. */
  kernelWindow: { from: number; to?: number };
}

/** Seconds since boot: dmesg's clock. */
function kernelClockNow(): number {
  return Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
}

/**
 * Runs bin/hvinstall in its own process group and waits for it. Once it has printed its verdict
 * (the `install` event failed or succeeded), it gets `graceMs` to exit; a process still there then
 * is killed with its group and reported as hung. Cleanup kills whatever a failed test left.
 */
export function hvinstallRun(cleanup: Cleanup, args: string[], env: NodeJS.ProcessEnv = {}, graceMs = 30_000): { child: ChildProcess; done: Promise<Verdict> } {
  const kernelWindow: Verdict['kernelWindow'] = { from: kernelClockNow() };
  const child = spawn(HVINSTALL, args, { env: { ...process.env, ...env, [FILE_MARK]: FILE_ID }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  cleanup.add(async () => {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
  });
  let stdout = '';
  let stderr = '';
  let hung = false;
  let timer: NodeJS.Timeout | undefined;
  child.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
    if (kernelWindow.to === undefined && /"type":"step","phase":"failed"/.test(stdout)) kernelWindow.to = kernelClockNow();
    if (!timer && /"type":"install","phase":"(failed|succeeded)"/.test(stdout)) {
      timer = setTimeout(() => {
        hung = true;
        process.kill(-child.pid!, 'SIGKILL');
      }, graceMs);
    }
  });
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<Verdict>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, hungAfterVerdict: hung, kernelWindow });
    });
  });
  return { child, done };
}

/**
 * Every process of this file's installs carries this in its environment (the installer's tools
 * inherit it): a process that holds this file's disk but carries another file's mark is that file's
 * install probing every disk (its blkid), not a leftover of ours.
 */
const FILE_MARK = 'HV_FAULT_FILE';
const FILE_ID = String(process.pid);

/** The fault-file mark in a process's environment, '' when it has none. */
async function fileMarkOf(pid: string): Promise<string> {
  const env = await readFile(`/proc/${pid}/environ`, 'utf8').catch(() => '');
  return env.split('\0').find((e) => e.startsWith(`${FILE_MARK}=`))?.slice(FILE_MARK.length + 1) ?? '';
}

/** Processes holding the disk or its partitions, by pid, with what they hold; other fault files' installs left out. */
async function holders(dev: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const pid of (await readdir('/proc')).filter((p) => /^\d+$/.test(p) && Number(p) !== process.pid)) {
    for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [] as string[])) {
      const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      if (target !== dev && !target.startsWith(`${dev}p`)) continue;
      const mark = await fileMarkOf(pid);
      if (mark !== '' && mark !== FILE_ID) continue;
      out.set(`${pid} ${target}`, `process ${pid} (${(await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).replace(/\0/g, ' ').trim()}) holds ${target}`);
    }
  }
  return out;
}

/**
 * What a run left behind on the disk: mounts of its partitions (also ones unmounted lazily but still
 * alive, which an exclusive open finds), loop devices over files on it or under the run directory,
 * and processes holding it open: ours at once; one without a fault file's mark (another test's
 * tool probing every disk) only when it still holds it a second later.
 */
export async function leftovers(dev: string): Promise<string[]> {
  const out: string[] = [];
  const runDir = `/run/hvinstall/${path.basename(dev)}`;
  for (const l of (await readFile('/proc/self/mounts', 'utf8')).split('\n')) {
    const [src, target] = l.split(' ');
    if (src?.startsWith(`${dev}p`) || target?.startsWith(`${runDir}/`)) out.push(`mount ${src} on ${target}`);
  }
  const loops = JSON.parse((await sh('losetup', ['--list', '--json', '--output', 'NAME,BACK-FILE'])).stdout || '{"loopdevices":[]}') as { loopdevices?: Array<{ name: string; 'back-file'?: string | null }> };
  for (const l of loops.loopdevices ?? []) if (l['back-file']?.startsWith(`${runDir}/`)) out.push(`loop device ${l.name} over ${l['back-file']}`);
  const first = await holders(dev);
  if (first.size) {
    const unmarked = new Set<string>();
    for (const key of first.keys()) if ((await fileMarkOf(key.split(' ')[0]!)) === '') unmarked.add(key);
    if (unmarked.size) {
      await new Promise((r) => setTimeout(r, 1000));
      const second = await holders(dev);
      for (const key of unmarked) if (!second.has(key)) first.delete(key);
    }
    out.push(...first.values());
  }
  const parts = (await readdir('/sys/class/block')).filter((n) => n.startsWith(`${path.basename(dev)}p`));
  for (const p of parts) {
    const r = await sh('python3', ['-c', `import os,sys\ntry:\n os.close(os.open('/dev/${p}', os.O_RDONLY|os.O_EXCL))\nexcept OSError as e:\n sys.exit(1 if e.errno == 16 else 0)`], { allowFailure: true });
    if (r.code === 1) out.push(`/dev/${p} is held (EBUSY on an exclusive open)`);
  }
  return out;
}

/** The planned layout, from `hvinstall plan --json` for the same config and source. */
export async function plannedPartitions(configFile: string, source: string, systemSizeMiB: number): Promise<Array<{ number: number; label?: string; name: string; startBytes: number; sizeBytes: number }>> {
  const r = await sh(HVINSTALL, ['plan', '--config', configFile, '--source', source, '--system-size', String(systemSizeMiB), '--json'], { allowFailure: true });
  const plan = (JSON.parse(r.stdout) as { plan: { partitions: Array<{ number: number; label?: string; name: string; startBytes: number; sizeBytes: number }> } }).plan;
  return plan.partitions;
}
