/**
 * Crash safety: an install SIGKILLed at every step boundary and in the middle of the image copy,
 * then re-run with the same command, ends with a disk identical to an uninterrupted install
 * (see diskSnapshot for what "identical" compares). SIGKILL stops the process as a crash or power
 * cut would; the journal is fsynced at each boundary, so it is the state a power cut leaves too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Cleanup, buildSmallOsTree, configYaml, diskSnapshot, events, hvinstall, installArgs, loopDisk, tempDir } from './helpers.js';

const cleanup = new Cleanup();
afterAll(() => cleanup.run());

const KILL_POINTS = [
  'after:guard',
  'after:clear',
  'after:partition',
  'after:format',
  'after:verify',
  'deploy-bytes:4194304',
  'after:deploy',
  'after:bootloader',
  'after:oem',
  'after:persistent',
  'after:finish',
];

describe('hvinstall install after SIGKILL', () => {
  let dir: string;
  let disk: string;
  let args: string[];
  let journalFile: string;
  let baseline: Record<string, unknown>;

  beforeAll(async () => {
    dir = await tempDir(cleanup);
    disk = await loopDisk(cleanup, dir, 'target', 260);
    const source = await buildSmallOsTree(dir);
    const configFile = path.join(dir, 'config.yaml');
    await writeFile(configFile, configYaml({ device: disk, forceEfi: true }));
    const stateDir = path.join(dir, 'state');
    args = installArgs(configFile, source, stateDir);
    journalFile = path.join(stateDir, `${path.basename(disk)}.journal.json`);
    const r = await hvinstall(args);
    expect(r.code, r.stderr).toBe(0);
    baseline = await diskSnapshot(disk, dir);
  }, 300_000);

  for (const point of KILL_POINTS) {
    it(`killed at ${point}, then re-run: the same disk`, async () => {
      const killed = await hvinstall(args, { HVINSTALL_TEST_SIGKILL_AT: point });
      expect(killed.signal, killed.stderr).toBe('SIGKILL');
      expect(killed.stderr).toContain(`HVINSTALL_TEST_SIGKILL_AT=${point}`);
      const journal = JSON.parse(await readFile(journalFile, 'utf8'));
      expect(journal.status).toBe('running');
      if (point.startsWith('deploy-bytes:')) {
        // really mid copy: some bytes were reported, not all, and deploy is journaled as running
        const ev = events(killed.stdout);
        expect(ev.some((e) => e.type === 'bytes' && (e.done as number) >= 4194304)).toBe(true);
        expect(ev.some((e) => e.type === 'step' && e.step === 'deploy' && e.phase === 'done')).toBe(false);
        expect(journal.steps.find((s: { name: string }) => s.name === 'deploy').status).toBe('running');
      } else if (point.startsWith('after:')) {
        expect(journal.steps.find((s: { name: string }) => s.name === point.slice(6)).status).toBe('done');
      }

      const again = await hvinstall(args);
      expect(again.code, again.stderr).toBe(0);
      const ev = events(again.stdout);
      expect(ev.find((e) => e.type === 'install' && e.phase !== 'succeeded')?.phase).toBe('resumed');
      if (point.startsWith('after:') && point !== 'after:guard') {
        const done = point.slice(6);
        expect(ev.some((e) => e.type === 'step' && e.step === done && e.phase === 'skipped')).toBe(true);
      }
      const final = JSON.parse(await readFile(journalFile, 'utf8'));
      expect(final.status).toBe('succeeded');
      expect(final.runs).toBe(2);
      expect(await diskSnapshot(disk, dir)).toEqual(baseline);
    });
  }
});
