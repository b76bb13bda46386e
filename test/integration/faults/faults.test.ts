/**
 * The install under a failing disk and a changing source (docs/install.md, "Faults"). Each case
 * installs onto a loop device over the fault harness's FUSE file (harness.ts), injects its fault,
 * and checks the promise: the install fails loudly naming the device or file and the offset or
 * operation, exits 3, never reports success, invalidates what it can and names what it cannot,
 * ends within its grace after the verdict, and leaves no mount, loop device or process; then the
 * fault is removed and a re-run gives the disk a clean install gives, compared by fingerprint
 * (partition table and GUIDs, filesystem signatures, every file's digest, the images' digests).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, open, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { Cleanup, buildSmallOsTree, configYaml, diskSnapshot, events, installArgs, partitionNode, probe, sh, tempDir, TEST_SYSTEM_SIZE_MIB, withMount } from '../install/helpers.js';
import { faultDisk, hvinstallRun, leftovers, plannedPartitions, type FaultDisk, type FaultRule, type Verdict } from './harness.js';

const cleanup = new Cleanup();
afterAll(() => cleanup.run());

/** A file of the test OS whose every 4 KiB carries this text: a flip rule corrupts only its data blocks. */
const MARKER = 'HVFAULT-MARKER-0123456789abcdef';
const MARKER_HEX = Buffer.from(MARKER).toString('hex');
const MARKER_FILE = 'usr/share/hv-fault/marker.bin';
const MiB = 1024 * 1024;

interface Install {
  dir: string;
  disk: FaultDisk;
  configFile: string;
  stateDir: string;
  args: string[];
  journalFile: string;
  part: (label: string) => { number: number; startBytes: number; sizeBytes: number; dev: string; from: number; to: number };
}

let source: string;

async function setup(extraInstall?: string): Promise<Install> {
  const dir = await tempDir(cleanup, 'hv-faults-');
  const disk = await faultDisk(cleanup, dir);
  const configFile = path.join(dir, 'config.yaml');
  await writeFile(configFile, configYaml({ device: disk.dev, forceEfi: true, extraInstall }));
  const stateDir = path.join(dir, 'state');
  const parts = await plannedPartitions(configFile, source, TEST_SYSTEM_SIZE_MIB);
  const part = (label: string) => {
    const p = parts.find((x) => x.label === label)!;
    return { ...p, dev: partitionNode(disk.dev, p.number), from: p.startBytes, to: p.startBytes + p.sizeBytes };
  };
  return { dir, disk, configFile, stateDir, args: installArgs(configFile, source, stateDir, ['--bundle', 'none']), journalFile: path.join(stateDir, `${path.basename(disk.dev)}.journal.json`), part };
}

/** The disk as a clean install leaves it, with the loop device's name taken out. */
async function fingerprint(t: Install): Promise<string> {
  const verify = (await sh('sgdisk', ['--verify', t.disk.dev])).stdout;
  expect(verify).toContain('No problems found');
  const snap = await diskSnapshot(t.disk.dev, t.dir);
  return JSON.stringify(snap, null, 1).replaceAll(path.basename(t.disk.dev), 'DISK');
}

/** Runs the install and waits for the process (it must end within the grace after its verdict). */
async function install(t: Install, env: NodeJS.ProcessEnv = {}, during?: (stdout: () => string) => Promise<void>): Promise<Verdict> {
  const run = hvinstallRun(cleanup, t.args, env);
  let out = '';
  run.child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  await during?.(() => out);
  return run.done;
}

/** Resolves once the install's JSON events show `step` started. */
async function stepStarted(stdout: () => string, step: string): Promise<void> {
  const re = new RegExp(`"type":"step","phase":"started","step":"${step}"`);
  while (!re.test(stdout())) await new Promise((r) => setTimeout(r, 50));
}

async function journalOf(t: Install): Promise<{ status: string; invalidation?: string[]; notInvalidated?: string[]; steps: Array<{ name: string; status: string }> }> {
  return JSON.parse(await readFile(t.journalFile, 'utf8'));
}

/** The promise every failed case keeps. */
async function failedLoudly(t: Install, r: Verdict): Promise<void> {
  expect(r.hungAfterVerdict, `still running 30 s after its verdict:\n${r.stderr}`).toBe(false);
  expect(r.code, r.stderr).toBe(3);
  expect(events(r.stdout).some((e) => e.type === 'install' && e.phase === 'succeeded')).toBe(false);
  expect(await leftovers(t.disk.dev)).toEqual([]);
}

/**
 * The fault removed, the same install again ends with the disk a clean install gives: compared with
 * a fresh install (new journal) onto the same disk blanked first (the disk's identity, and so its
 * GUIDs and UUIDs, comes from the plan, which names the disk).
 */
async function recoversToClean(t: Install): Promise<void> {
  await t.disk.setRules([]);
  const again = await install(t);
  expect(again.code, again.stderr).toBe(0);
  const recovered = await fingerprint(t);
  for (const p of ['COS_GRUB', 'COS_OEM', 'COS_RECOVERY', 'COS_STATE', 'COS_PERSISTENT', 'HARV_LH_DEFAULT']) await sh('wipefs', ['--all', '--force', t.part(p).dev]);
  await sh('sgdisk', ['--zap-all', t.disk.dev]);
  await sh('partprobe', [t.disk.dev], { allowFailure: true });
  const clean = await install({ ...t, args: installArgs(t.configFile, source, `${t.stateDir}-clean`, ['--bundle', 'none']) });
  expect(clean.code, clean.stderr).toBe(0);
  expect(recovered).toEqual(await fingerprint(t));
}

beforeAll(async () => {
  const dir = await tempDir(cleanup, 'hv-faults-src-');
  source = await buildSmallOsTree(dir);
  await mkdir(path.join(source, path.dirname(MARKER_FILE)), { recursive: true });
  await writeFile(path.join(source, MARKER_FILE), Buffer.from(MARKER.repeat(Math.ceil((4 * MiB) / MARKER.length)).slice(0, 4 * MiB)));
}, 600_000);

describe('the install on a failing disk', () => {
  it('1. bytes corrupted on their way to COS_STATE and COS_RECOVERY: fails naming the image, the first bad chunk and the device; a re-run installs cleanly', async () => {
    const t = await setup();
    await t.disk.setRules([{ op: 'write', match: MARKER_HEX, action: 'flip' }]);
    const r = await install(t);
    await failedLoudly(t, r);
    expect((await t.disk.hits()).length).toBeGreaterThan(0);
    const state = t.part('COS_STATE');
    const recovery = t.part('COS_RECOVERY');
    expect(r.stderr).toMatch(new RegExp(`cOS/(active|passive|recovery)\\.img (read back from|on) (${state.dev}|${recovery.dev}) (differs from what was written from byte \\d+ \\(4 MiB chunk \\d+\\), byte \\d+ of|does not hold the source's /${MARKER_FILE})`));
    expect((await journalOf(t)).status).toBe('invalidated');
    await recoversToClean(t);
  });

  it('1b. an image corrupted on the disk after a run was killed: the re-run reads it back, finds it and deploys again', async () => {
    const t = await setup();
    const killed = await install(t, { HVINSTALL_TEST_SIGKILL_AT: 'after:deploy' });
    expect(killed.signal, killed.stderr).toBe('SIGKILL');
    // One byte of passive.img's marker data, changed in the disk's backing file behind the kernel's back.
    const state = t.part('COS_STATE');
    const at = await withMount(state.dev, t.dir, async (m) => {
      const frag = (await sh('filefrag', ['-v', path.join(m, 'cOS/passive.img')])).stdout;
      const img = await open(path.join(m, 'cOS/passive.img'), 'r');
      try {
        const buf = Buffer.alloc(4 * MiB);
        for (let off = 0; ; off += buf.length) {
          const { bytesRead } = await img.read(buf, 0, buf.length, off);
          if (bytesRead === 0) throw new Error('no marker in passive.img');
          const i = buf.subarray(0, bytesRead).indexOf(MARKER);
          if (i >= 0) return physicalByte(frag, off + i);
        }
      } finally {
        await img.close();
      }
    }, 'ro,noload');
    const fh = await open(t.disk.backing, 'r+');
    await fh.write(Buffer.from('X'), 0, 1, state.startBytes + at);
    await fh.close();
    await sh('blockdev', ['--flushbufs', state.dev]);
    const again = await install(t);
    expect(again.code, again.stderr).toBe(0);
    const redo = events(again.stdout).find((e) => e.type === 'message' && e.step === 'deploy' && e.level === 'warn');
    expect(String(redo?.message)).toMatch(new RegExp(`cOS/passive\\.img read back from ${state.dev} is sha256-4m:\\w+, not the sha256-4m:\\w+ deployed: redoing from here`));
    await recoversToClean(t);
  });
});

describe('the ESP', () => {
  it("1c. bytes corrupted on their way to the ESP (grub's EFI binary): fails naming the file and the partition; a re-run installs cleanly", async () => {
    const t = await setup();
    const esp = t.part('COS_GRUB');
    // "PE\0\0": the PE header's signature, in the first cluster of every EFI binary.
    await t.disk.setRules([{ op: 'write', from: esp.from, to: esp.to, match: '50450000', action: 'flip' }]);
    const r = await install(t);
    await failedLoudly(t, r);
    expect((await t.disk.hits()).length).toBeGreaterThan(0);
    expect(r.stderr).toContain('install failed in step bootloader');
    expect(r.stderr).toMatch(new RegExp(`::/EFI/BOOT/BOOTX64\\.EFI read back from ${esp.dev} differs from what was written: sha256 [0-9a-f]{64}, expected [0-9a-f]{64}`));
    await recoversToClean(t);
  });
});

describe('the install from a source that changes', () => {
  it('2. a source file truncated between the plan and the deploy: fails naming the file; restored, a re-run installs cleanly', async () => {
    const t = await setup();
    const state = t.part('COS_STATE');
    // The first write to COS_STATE (its mkfs) hangs until the source has been changed.
    await t.disk.setRules([{ op: 'write', from: state.from, to: state.to, action: 'suspend', count: 1 }]);
    const file = path.join(source, MARKER_FILE);
    const original = await readFile(file);
    cleanup.add(() => writeFile(file, original));
    const r = await install(t, {}, async () => {
      await t.disk.waitForHit('suspend');
      await truncate(file, 2 * MiB);
      await t.disk.setRules([]);
    });
    await failedLoudly(t, r);
    expect(r.stderr).toContain(`the OS source ${source} changed since the install began`);
    expect(r.stderr).toContain(`/${MARKER_FILE} is ${2 * MiB} bytes, the source's was ${4 * MiB}`);
    await writeFile(file, original);
    await recoversToClean(t);
  });
});

/** The disk byte (from the partition's start) of a file's byte, from `filefrag -v`. */
function physicalByte(filefrag: string, offset: number): number {
  const unit = Number(/blocks? of (\d+) bytes/.exec(filefrag)![1]);
  for (const line of filefrag.split('\n')) {
    const m = /^\s*\d+:\s+(\d+)\.\.\s*(\d+):\s+(\d+)\.\./.exec(line);
    if (m && offset / unit >= Number(m[1]) && offset / unit <= Number(m[2]) + 1) return (Number(m[3]) + Math.floor(offset / unit) - Number(m[1])) * unit + (offset % unit);
  }
  throw new Error(`byte ${offset} is in no extent`);
}


/** Sets the rules once the install's step has started. */
function atStep(step: string, disk: FaultDisk, rules: FaultRule[]): (stdout: () => string) => Promise<void> {
  return async (stdout) => {
    await stepStarted(stdout, step);
    await disk.setRules(rules);
  };
}

/** The kernel's block-layer message about this disk, as the error must quote it. */
const kernelLine = (dev: string): RegExp => new RegExp(`(write error at byte \\d+ of ${dev} \\(kernel: I/O error, dev ${path.basename(dev)}, sector \\d+|(write|I/O) error on ${dev}(p\\d+)? \\(kernel: .*I/O error)`);

/**
 * The error quotes the kernel's line about this disk, or, when the kernel rate-limited its I/O
 * error lines (ten per five seconds across every device: the other integration fork's faults count
 * too), says so with the kernel's own "callbacks suppressed" notice, which dmesg must hold.
 */
async function expectKernelWord(stderr: string, dev: string): Promise<void> {
  if (kernelLine(dev).test(stderr)) return;
  const limited = /it rate-limited them \((.+?)\); dmesg/.exec(stderr);
  expect(limited, `neither the kernel's line about ${dev} nor its rate limit in:\n${stderr}`).not.toBeNull();
  const dmesg = (await sh('dmesg', [])).stdout;
  for (const notice of limited![1]!.split('; ')) {
    expect(notice).toMatch(/callbacks suppressed$/);
    expect(dmesg).toContain(notice);
  }
}

describe('write errors', () => {
  it('3. writes to COS_STATE failing from the deploy on: what cannot be invalidated is named, the rest is invalidated and reads back blank', async () => {
    const t = await setup();
    const state = t.part('COS_STATE');
    const r = await install(t, {}, atStep('deploy', t.disk, [{ op: 'write', from: state.from, to: state.to, action: 'eio' }]));
    await failedLoudly(t, r);
    expect(r.stderr).toContain('install failed in step deploy');
    expect(r.stderr).toMatch(new RegExp(`NOT INVALIDATED: could not invalidate ${state.dev} \\(COS_STATE\\): .+; do not boot this disk`));
    const journal = await journalOf(t);
    expect(journal.status).toBe('failed');
    expect(journal.notInvalidated).toEqual([expect.stringMatching(new RegExp(`^could not invalidate ${state.dev} \\(COS_STATE\\)`))]);
    expect(events(r.stdout).some((e) => e.type === 'message' && e.level === 'error' && String(e.message).startsWith(`could not invalidate ${state.dev}`))).toBe(true);
    for (const label of ['COS_GRUB', 'COS_RECOVERY', 'COS_PERSISTENT']) {
      const p = t.part(label);
      expect(journal.invalidation).toContain(`${p.dev} (${label})`);
      expect((await probe(p.dev)).TYPE, label).toBeUndefined();
      const head = (await sh('sh', ['-c', `dd if=${p.dev} bs=1M count=1 iflag=direct status=none | tr -d '\\0' | wc -c`])).stdout.trim();
      expect(head, `${label}'s first MiB`).toBe('0');
    }
    // The failed install's record on COS_OEM names it too.
    await withMount(t.part('COS_OEM').dev, t.dir, async (m) => {
      expect(JSON.parse(await readFile(path.join(m, 'install/journal.json'), 'utf8')).notInvalidated).toEqual(journal.notInvalidated);
    });
    await recoversToClean(t);
  });

  it('4. a partition table whose writes fail (backup GPT, then primary): fails in the partition step naming the device and the kernel error, without waiting on the kernel', async () => {
    const t = await setup();
    const size = 260 * 1024 * MiB;
    await t.disk.setRules([{ op: 'write', from: size - MiB, to: size, action: 'eio' }]);
    const backup = await install(t);
    await failedLoudly(t, backup);
    expect(backup.stderr).toContain('install failed in step partition');
    expect(backup.stderr).toContain(`the partition table written to ${t.disk.dev} does not read back: sgdisk --verify:`);
    await expectKernelWord(backup.stderr, t.disk.dev);
    await t.disk.setRules([{ op: 'write', from: 0, to: MiB, action: 'eio' }]);
    const primary = await install(t);
    await failedLoudly(t, primary);
    expect(primary.stderr).toMatch(/install failed in step (clear|partition)/);
    expect(primary.stderr).not.toContain('waiting for the kernel to show the new partitions');
    await expectKernelWord(primary.stderr, t.disk.dev);
    await recoversToClean(t);
  });

  it('5. the disk stops answering, then fails when it answers again; and a disk pulled out: the process ends after its verdict, the first I/O error named, no EROFS alone', async () => {
    const t = await setup();
    const state = t.part('COS_STATE');
    const resumedToFail = await install(t, {}, async (stdout) => {
      await atStep('deploy', t.disk, [{ op: 'write', from: state.from, to: state.to, action: 'suspend', count: 1 }])(stdout);
      await t.disk.waitForHit('suspend');
      await t.disk.setRules([{ op: 'write', from: state.from, to: state.to, action: 'eio' }]);
    });
    await failedLoudly(t, resumedToFail);
    await expectKernelWord(resumedToFail.stderr, t.disk.dev);
    await recoversToClean(t);

    const gone = await setup();
    const pulled = await install(gone, {}, atStep('deploy', gone.disk, [{ action: 'gone' }]));
    await failedLoudly(gone, pulled);
    expect(pulled.stderr).toContain('install failed in step deploy');
    expect(pulled.stderr).toMatch(new RegExp(`(read|write) error at byte \\d+ of ${gone.disk.dev}`));
    expect(pulled.stderr).toContain('do not boot this disk');
  }, 420_000);

  it('6. a write error in the persistent step and on the ESP: each error names the partition, the byte and the kernel message', async () => {
    const t = await setup();
    const persistent = t.part('COS_PERSISTENT');
    const r = await install(t, {}, atStep('persistent', t.disk, [{ op: 'write', from: persistent.from, to: persistent.to, action: 'eio' }]));
    await failedLoudly(t, r);
    // The persistent step's few writes may reach the disk before the rule does; then the agent
    // step's writes to the same partition are the first to fail.
    expect(r.stderr).toMatch(/install failed in step (persistent|agent)/);
    expect(r.stderr).toContain(persistent.dev);
    await expectKernelWord(r.stderr, t.disk.dev);
    const esp = t.part('COS_GRUB');
    await t.disk.setRules([]);
    const e = await install(t, {}, atStep('bootloader', t.disk, [{ op: 'write', from: esp.from, to: esp.to, action: 'eio' }]));
    await failedLoudly(t, e);
    expect(e.stderr).toContain('install failed in step bootloader');
    await expectKernelWord(e.stderr, t.disk.dev);
    await recoversToClean(t);
  }, 420_000);
});

/** A small tmpfs of our own as the state dir (unmounted at cleanup). */
async function smallStateDir(t: Install, size: string): Promise<string> {
  const dir = path.join(t.dir, 'small-state');
  await mkdir(dir, { recursive: true });
  await sh('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'hv-fault-state', dir]);
  cleanup.add(() => sh('umount', ['-l', dir], { allowFailure: true }));
  return dir;
}

/** Fills a filesystem to the last byte. */
async function fill(dir: string): Promise<void> {
  await sh('sh', ['-c', `dd if=/dev/zero of=${dir}/filler bs=64k status=none; true`]);
}

describe('the host state directory', () => {
  it('8a. full before the install: refused before any disk is touched, naming the directory, pointing at no journal that does not exist', async () => {
    const t = await setup();
    const dir = await smallStateDir(t, '4m');
    await fill(dir);
    const blocks = async () => (await sh('stat', ['-c', '%b', t.disk.backing])).stdout.trim();
    const before = await blocks();
    const r = await install({ ...t, args: installArgs(t.configFile, source, dir, ['--bundle', 'none']) });
    expect(r.hungAfterVerdict).toBe(false);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`cannot write the install's journal and log in ${dir}`);
    expect(r.stderr).toMatch(/journal: \S+ \(not written: /);
    await sh('sync', []);
    expect(await blocks()).toBe(before);
    expect((await sh('blkid', ['-p', t.disk.dev], { allowFailure: true })).code).toBe(2);
  });

  it('8b. full once the deploy starts: the install goes on and succeeds, says the host record is behind, and keeps its record on the disk', async () => {
    const t = await setup();
    const dir = await smallStateDir(t, '20m');
    const r = await install({ ...t, args: installArgs(t.configFile, source, dir, ['--bundle', 'none']) }, {}, async (stdout) => {
      await stepStarted(stdout, 'deploy');
      await fill(dir);
    });
    expect(r.code, r.stderr).toBe(0);
    expect(events(r.stdout).some((e) => e.type === 'message' && e.level === 'warn' && /cannot write the (journal|install log)/.test(String(e.message)) && /keeps its record on the disk/.test(String(e.message)))).toBe(true);
    expect((await probe(t.part('COS_STATE').dev)).TYPE).toBe('ext4');
    await withMount(t.part('COS_OEM').dev, t.dir, async (m) => {
      expect(JSON.parse(await readFile(path.join(m, 'install/journal.json'), 'utf8')).status).toBe('succeeded');
    });
  });
});

describe('a killed run', () => {
  it('9. killed during an after-install chroot command: the re-run stops the orphaned command and its mounts, keeps the deployed disk and finishes', async () => {
    const hold = `/run/hv-fault-hold-${process.pid}-${Date.now()}`;
    await writeFile(hold, '');
    cleanup.add(() => rm(hold, { force: true }));
    const t = await setup();
    const config = (await readFile(t.configFile, 'utf8')).replace(/^os:\n/m, `os:\n  after_install_chroot_commands:\n    - "if [ -e ${hold} ]; then exec sleep 600; fi"\n`);
    await writeFile(t.configFile, config);
    const run = hvinstallRun(cleanup, t.args);
    let out = '';
    run.child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    while (!/running after-install-chroot command 1 of 1/.test(out)) await new Promise((r) => setTimeout(r, 50));
    const sleeper = async (): Promise<string[]> => {
      const pids: string[] = [];
      for (const pid of (await readdir('/proc')).filter((p) => /^\d+$/.test(p))) {
        if ((await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')) === 'sleep\x00600\x00') pids.push(pid);
      }
      return pids;
    };
    while ((await sleeper()).length === 0) await new Promise((r) => setTimeout(r, 50));
    const orphans = await sleeper();
    process.kill(run.child.pid!, 'SIGKILL'); // the installer only, as a crash: its command runs on
    expect((await run.done).signal).toBe('SIGKILL');
    expect(await sleeper()).toEqual(orphans);
    await rm(hold);
    const again = await install(t);
    expect(again.code, again.stderr).toBe(0);
    // active.img was changed by the killed command, and is deployed again; nothing is wiped.
    expect(again.stdout).not.toContain('invalidated');
    expect((await sleeper()).filter((p) => orphans.includes(p))).toEqual([]);
    expect(await leftovers(t.disk.dev)).toEqual([]);
    const state = t.part('COS_STATE');
    await withMount(state.dev, t.dir, async (m) => {
      const recorded = parseYaml(await readFile(path.join(m, 'state.yaml'), 'utf8')) as { state: { passive: { digest: string } } };
      const onDisk = (await sh('sh', ['-c', `split -b 4194304 --filter='sha256sum | cut -c1-64' ${m}/cOS/passive.img | sha256sum`])).stdout.split(' ')[0];
      expect(recorded.state.passive.digest).toBe(`sha256-4m:${onDisk}`);
    });
  });
});

describe('a disk that stalls', () => {
  it('7. the target stops answering while active.img is built: the error blames the target disk, not the OS source', async () => {
    const t = await setup();
    const state = t.part('COS_STATE');
    const r = await install(t, { HVINSTALL_TEST_STALL_TIMEOUT_MS: '4000' }, async (stdout) => {
      await atStep('deploy', t.disk, [{ op: 'write', from: state.from, to: state.to, action: 'suspend' }])(stdout);
      // The disk answers again once the install has given its verdict on the step.
      while (!/"type":"step","phase":"failed","step":"deploy"/.test(stdout())) await new Promise((res) => setTimeout(res, 50));
      await t.disk.setRules([]);
    });
    await failedLoudly(t, r);
    expect(r.stderr).toMatch(new RegExp(`(writing cOS/active\\.img|writing the OS images|reading the OS images back|the deploy step) stalled: the target disk stopped answering \\((${state.dev}|${t.disk.dev}) has had \\d+ request\\(s\\) in flight and completed none for \\d+ s\\); the OS source is not at fault`));
    expect(r.stderr).not.toContain('reading the OS source stalled');
    await recoversToClean(t);
  }, 420_000);

  it('10. a slow disk (200 ms a write) in the bootloader step: progress at least every 5 s', async () => {
    const t = await setup();
    const r = await install(t, {}, async (stdout) => {
      await atStep('bootloader', t.disk, [{ op: 'write', action: 'delay', ms: 200 }])(stdout);
      while (!/"type":"step","phase":"(done|failed)","step":"bootloader"/.test(stdout())) await new Promise((res) => setTimeout(res, 50));
      await t.disk.setRules([]);
    });
    expect(r.code, r.stderr).toBe(0);
    const ev = events(r.stdout);
    const from = ev.findIndex((e) => e.type === 'step' && e.step === 'bootloader' && e.phase === 'started');
    const to = ev.findIndex((e) => e.type === 'step' && e.step === 'bootloader' && e.phase === 'done');
    const times = ev.slice(from, to + 1).map((e) => e.elapsedMs as number);
    const gaps = times.slice(1).map((x, i) => x - times[i]!);
    // The step is slow enough that silence would show; each silence is filled by a heartbeat.
    expect(times[times.length - 1]! - times[0]!).toBeGreaterThan(10_000);
    expect(ev.slice(from, to).some((e) => e.type === 'message' && /^bootloader: still working after \d+ s/.test(String(e.message)))).toBe(true);
    expect(Math.max(...gaps)).toBeLessThan(7_000);
  }, 420_000);
});
