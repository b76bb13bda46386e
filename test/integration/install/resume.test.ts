/**
 * Crash safety: an install SIGKILLed at every step boundary and in the middle of the image copy,
 * then re-run with the same command, ends with a disk identical to an uninterrupted install
 * (see diskSnapshot for what "identical" compares). SIGKILL stops the process as a crash or power
 * cut would; the journal is fsynced at each boundary, so it is the state a power cut leaves too.
 *
 * To keep the runtime to a few minutes the boundaries are chained: run 1 is killed after guard,
 * run 2 resumes and is killed after clear, and so on; each run must resume exactly where the last
 * stopped (every step done before is skipped, nothing done is redone), and only then is the final
 * disk compared. The mid-copy kill is also tested on its own. The install carries a small image
 * bundle, and one run is killed in the middle of its copy (a file written to its temp name, not yet
 * renamed): the final disk holds the bundle and no temp file.
 */
import { describe, expect, it } from 'vitest';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Cleanup, buildSmallBundle, buildSmallOsTree, configYaml, diskSnapshot, events, hvinstall, installArgs, loopDisk, tempDir, testCleanup } from './helpers.js';

const STEPS = ['guard', 'clear', 'partition', 'format', 'verify', 'deploy', 'bootloader', 'oem', 'persistent', 'agent', 'chroot', 'finish'];
const MID_COPY = 'deploy-bytes:4194304';
/** After the bundle's image archive (the second file copied) is written, before its rename. */
const MID_BUNDLE = 'persistent-bytes:1000';
/** In step order: a kill after each step, one in the middle of the image copy, one in the bundle copy. */
const after = (s: string): string => `after:${s}`;
const CHAIN = [...STEPS.slice(0, 5).map(after), MID_COPY, ...STEPS.slice(5, 8).map(after), MID_BUNDLE, ...STEPS.slice(8).map(after)];

interface Journal {
  status: string;
  runs: number;
  steps: Array<{ name: string; status: string; attempts: number }>;
}

/** A disk with an uninterrupted install on it, and that disk's snapshot: what every interrupted install must end as. */
async function installedDisk(cleanup: Cleanup): Promise<{ dir: string; disk: string; args: string[]; readJournal: () => Promise<Journal>; baseline: Record<string, unknown> }> {
  const dir = await tempDir(cleanup);
  const disk = await loopDisk(cleanup, dir, 'target', 260);
  const source = await buildSmallOsTree(dir);
  const configFile = path.join(dir, 'config.yaml');
  await writeFile(configFile, configYaml({ device: disk, forceEfi: true }));
  const stateDir = path.join(dir, 'state');
  const args = installArgs(configFile, source, stateDir, ['--bundle', await buildSmallBundle(dir)]);
  const journalFile = path.join(stateDir, `${path.basename(disk)}.journal.json`);
  const r = await hvinstall(args);
  expect(r.code, r.stderr).toBe(0);
  return { dir, disk, args, readJournal: async () => JSON.parse(await readFile(journalFile, 'utf8')) as Journal, baseline: await diskSnapshot(disk, dir) };
}

// The two tests interrupt installs on disks of their own (a baseline install each): they run side by side.
describe.concurrent('hvinstall install after SIGKILL', () => {
  it('killed at every step boundary and mid copy in turn, each re-run resumes where the last stopped; the final disk is identical', async ({ expect, onTestFinished }) => {
    const { dir, disk, args, readJournal, baseline } = await installedDisk(testCleanup(onTestFinished));
    let doneBefore: string[] = [];
    for (const [i, point] of CHAIN.entries()) {
      const killed = await hvinstall(args, { HVINSTALL_TEST_SIGKILL_AT: point });
      expect(killed.signal, `${point}: ${killed.stderr}`).toBe('SIGKILL');
      expect(killed.stderr).toContain(`HVINSTALL_TEST_SIGKILL_AT=${point}`);
      const ev = events(killed.stdout);
      // run 1 starts a fresh install (the baseline's journal is finished); every later run resumes
      expect(ev.find((e) => e.type === 'install')?.phase, point).toBe(i === 0 ? 'started' : 'resumed');
      const skipped = ev.filter((e) => e.type === 'step' && e.phase === 'skipped').map((e) => e.step);
      expect(skipped, `${point}: steps kept from earlier runs`).toEqual(doneBefore.filter((s) => s !== 'guard'));
      const journal = await readJournal();
      expect(journal.status).toBe('running');
      expect(journal.runs).toBe(i + 1);
      const done = journal.steps.filter((s) => s.status === 'done').map((s) => s.name);
      if (point === MID_COPY) {
        // The kill fires at the first count of 4 MiB or more (its stderr line, checked above, says
        // so); the bus may have held that count back (one bytes event per 200 ms), not the step's start.
        expect(ev.some((e) => e.type === 'bytes' && e.step === 'deploy')).toBe(true);
        expect(journal.steps.find((s) => s.name === 'deploy')!.status).toBe('running');
        expect(done).toEqual(STEPS.slice(0, 5));
      } else if (point === MID_BUNDLE) {
        // (a few KiB copy within the bus's 200 ms throttle: only its first byte event is out)
        expect(ev.some((e) => e.type === 'bytes' && e.step === 'persistent')).toBe(true);
        expect(journal.steps.find((s) => s.name === 'persistent')!.status).toBe('running');
        expect(done).toEqual(STEPS.slice(0, 8));
        // The killed run's mount is still there (the next run's guard releases it): the temp file is in it.
        const images = `/run/hvinstall/${path.basename(disk)}/mnt/cos_persistent/.state/var-lib-rancher.bind/hvagent/bundle/harvester/images`;
        expect((await readdir(images)).filter((n) => n.endsWith('.hvbundle-tmp'))).toHaveLength(1);
      } else {
        expect(done).toEqual(STEPS.slice(0, STEPS.indexOf(point.slice('after:'.length)) + 1));
      }
      // nothing already done was started again
      expect(journal.steps.filter((s) => !['guard', 'deploy', 'persistent'].includes(s.name)).every((s) => s.attempts <= 1)).toBe(true);
      doneBefore = done;
    }
    const last = await hvinstall(args);
    expect(last.code, last.stderr).toBe(0);
    const ev = events(last.stdout);
    expect(ev.filter((e) => e.type === 'step' && e.phase === 'skipped').map((e) => e.step)).toEqual(STEPS.slice(1));
    const journal = await readJournal();
    expect(journal.status).toBe('succeeded');
    expect(journal.steps.find((s) => s.name === 'deploy')!.attempts).toBe(2); // once killed mid copy, once completed
    expect(journal.steps.find((s) => s.name === 'persistent')!.attempts).toBe(2); // likewise, mid bundle copy
    expect(await diskSnapshot(disk, dir)).toEqual(baseline);
  }, 900_000);

  it('killed in the middle of the image copy, then re-run: the same disk', async ({ expect, onTestFinished }) => {
    const { dir, disk, args, readJournal, baseline } = await installedDisk(testCleanup(onTestFinished));
    const killed = await hvinstall(args, { HVINSTALL_TEST_SIGKILL_AT: MID_COPY });
    expect(killed.signal, killed.stderr).toBe('SIGKILL');
    const journal = await readJournal();
    expect(journal.steps.find((s) => s.name === 'deploy')!.status).toBe('running');
    const again = await hvinstall(args);
    expect(again.code, again.stderr).toBe(0);
    const ev = events(again.stdout);
    expect(ev.filter((e) => e.type === 'step' && e.phase === 'skipped').map((e) => e.step)).toEqual(['clear', 'partition', 'format', 'verify']);
    expect(ev.some((e) => e.type === 'step' && e.step === 'deploy' && e.phase === 'done')).toBe(true);
    expect((await readJournal()).status).toBe('succeeded');
    expect(await diskSnapshot(disk, dir)).toEqual(baseline);
  }, 600_000);
});
