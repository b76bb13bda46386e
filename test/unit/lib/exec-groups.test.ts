/** lib/exec.ts: a command's whole process group is stopped (deadline, the end of a run, a re-run). */
import { afterEach, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { recordChildrenIn, run, runningCommands, stopLiveChildren, stopRecordedGroups, waitForLiveChildren } from '../../../lib/exec.js';

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    const state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
    return state !== 'Z';
  } catch {
    return false;
  }
};

async function pidFile(dir: string): Promise<number> {
  for (;;) {
    const text = await import('node:fs/promises').then((fs) => fs.readFile(path.join(dir, 'pid'), 'utf8').catch(() => ''));
    if (text.trim()) return Number(text.trim());
    await new Promise((r) => setTimeout(r, 20));
  }
}

afterEach(() => recordChildrenIn(undefined));

describe('process groups', () => {
  it("a deadline stops the command's background children too", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-pg-'));
    try {
      const r = run('sh', ['-c', `sleep 60 & echo $! > ${dir}/pid; wait`], { timeoutMs: 300 }).catch((e: unknown) => e);
      const child = await pidFile(dir);
      expect(String(await r)).toContain('timed out');
      for (let i = 0; i < 50 && alive(child); i++) await new Promise((res) => setTimeout(res, 20));
      expect(alive(child)).toBe(false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('stopLiveChildren ends what is still running, with its group, and waits for it', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-pg-'));
    try {
      const r = run('sh', ['-c', `sleep 60 & echo $! > ${dir}/pid; wait`], { timeoutMs: 60_000, allowFailure: true });
      const child = await pidFile(dir);
      expect(runningCommands()).toContain(`sh -c 'sleep 60 & echo $! > ${dir}/pid; wait'`);
      expect(await stopLiveChildren(2_000)).toEqual([]);
      expect(alive(child)).toBe(false);
      expect((await r).exitCode).not.toBe(0);
      expect(runningCommands()).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('waitForLiveChildren waits for what still runs, up to its bound, and names what outlasted it', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-pg-'));
    try {
      // Still running: as a command stuck in the kernel is, once stopLiveChildren has given up on it.
      const r = run('sh', ['-c', `echo $$ > ${dir}/pid; sleep 1; echo done > ${dir}/ended`], { timeoutMs: 60_000 });
      const pid = await pidFile(dir);
      expect(await waitForLiveChildren(100)).toEqual([`process group ${pid} (sh -c 'echo $$ > ${dir}/pid; sleep 1; echo done > ${dir}/ended')`]);
      expect(await waitForLiveChildren(10_000)).toEqual([]);
      expect(readFileSync(path.join(dir, 'ended'), 'utf8')).toBe('done\n');
      await r;
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("records running commands, and a later process stops an earlier run's group it finds there", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-pg-'));
    const records = path.join(dir, 'children');
    try {
      recordChildrenIn(records);
      const done = run('sh', ['-c', 'exec sleep 60'], { timeoutMs: 60_000, allowFailure: true });
      for (let i = 0; i < 100 && (await readdir(records)).length === 0; i++) await new Promise((res) => setTimeout(res, 20));
      const [pid] = await readdir(records);
      expect(alive(Number(pid))).toBe(true);
      const r = await stopRecordedGroups(records, 2_000);
      expect(r.stopped).toEqual([`${pid} (sh -c 'exec sleep 60')`]);
      expect(r.stuck).toEqual([]);
      expect(alive(Number(pid))).toBe(false);
      await done;
      expect(await readdir(records)).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("a record whose pid now belongs to another process is not that process's death", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-pg-'));
    const other = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
    try {
      await writeFile(path.join(dir, String(other.pid)), JSON.stringify({ pid: other.pid, start: '1', command: 'an old one' }));
      const r = await stopRecordedGroups(dir, 500);
      expect(r.stopped).toEqual([]);
      expect(alive(other.pid!)).toBe(true);
    } finally {
      process.kill(-other.pid!, 'SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  });
});
