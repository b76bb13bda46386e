/**
 * A slow disk, a full host state directory and a killed run
 * (the promise every case keeps, and the harness: cases.ts).
 */
import { describe, expect, it } from 'vitest';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { events, installArgs, probe, sh, withMount } from '../install/helpers.js';
import { atStep, cleanup, fill, FAULT_CASE_MS, faultFileHooks, install, setup, smallStateDir, source, stepStarted } from './cases.js';
import { hvinstallRun, leftovers } from './harness.js';

faultFileHooks();

describe('a disk that stalls', { timeout: FAULT_CASE_MS }, () => {
  it('10. a slow disk (100 ms a write) in the bootloader step: progress at least every 5 s', async () => {
    const t = await setup();
    const r = await install(t, {}, async (stdout) => {
      await atStep('bootloader', t.disk, [{ op: 'write', action: 'delay', ms: 100 }])(stdout);
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
  });
});

describe('the host state directory', { timeout: FAULT_CASE_MS }, () => {
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

describe('a killed run', { timeout: FAULT_CASE_MS }, () => {
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
