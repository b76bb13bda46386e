import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gptVerifyProblem } from '../../../installer/disk/gpt-verify.js';
import { gptCommand } from '../../../installer/disk/commands.js';
import { planInstall } from '../../../installer/disk/plan.js';
import { disk, machine, GiB } from './facts-fixture.js';

const execFileAsync = promisify(execFile);

/** The planned GPT on a sparse file with one byte inverted at `flipAt` (none when undefined), as sgdisk --verify judges it. */
async function verifyWithFlip(flipAt: (sizeBytes: number) => number | undefined): Promise<string | undefined> {
  const dir = mkdtempSync(path.join(tmpdir(), 'hv-gptverify-'));
  try {
    const sizeBytes = 300 * GiB;
    const file = path.join(dir, 'disk.raw');
    await execFileAsync('truncate', ['-s', String(sizeBytes), file]);
    const cmd = gptCommand(planInstall({ install: { device: '/dev/vda' } }, machine([disk('vda', 300, { sizeBytes })])));
    const write = execFileAsync(cmd.file, [...cmd.args.slice(0, -1), file]);
    write.child.stdin!.end(cmd.input);
    await write;
    const at = flipAt(sizeBytes);
    if (at !== undefined) {
      const fd = openSync(file, 'r+');
      const b = Buffer.alloc(1);
      readSync(fd, b, 0, 1, at);
      writeSync(fd, Buffer.from([b[0]! ^ 0xff]), 0, 1, at);
      closeSync(fd);
    }
    const v = await execFileAsync('sgdisk', ['--verify', file], { encoding: 'utf8' }).then(
      (r) => ({ code: 0, ...r }),
      (e: { code: number; stdout: string; stderr: string }) => e,
    );
    return gptVerifyProblem(v.code, v.stdout, v.stderr);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// Real sgdisk on sparse files: its verdicts are what the partition step's read-back reads.
describe('the GPT read back (sgdisk --verify)', () => {
  it.concurrent('a whole table: no problem', async ({ expect }) => {
    expect(await verifyWithFlip(() => undefined)).toBeUndefined();
  });

  it.concurrent('a backup header stored with its signature damaged: a problem, though sgdisk prints "No problems found"', async ({ expect }) => {
    expect(await verifyWithFlip((size) => size - 512)).toMatch(/^sgdisk --verify: Backup header: ERROR .*No problems found\. /);
  });

  it.concurrent('the primary header damaged: a problem naming it', async ({ expect }) => {
    expect(await verifyWithFlip(() => 512 + 16)).toMatch(/^sgdisk --verify: Main header: ERROR /);
  });

  it.concurrent('a byte of the primary entry array damaged: the table and sgdisk\'s own problem line', async ({ expect }) => {
    const said = await verifyWithFlip(() => 1024 + 200);
    expect(said).toMatch(/^sgdisk --verify: Main partition table: ERROR .*Problem: The CRC for the main partition table is invalid/);
  });
});

describe('gptVerifyProblem on what sgdisk printed', () => {
  it('a failed sgdisk without output: its status', () => {
    expect(gptVerifyProblem(2, '', '')).toBe('sgdisk --verify: status 2');
  });
});
