// packSquashfs under a build started with SOURCE_DATE_EPOCH set (the reproducible-builds convention
// buildEpoch honours): mksquashfs refuses that variable next to its own time options, so a build
// that passed it on failed; the image must carry the given time and root owners either way.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../../lib/exec.js';
import { packSquashfs } from '../../../iso-build/reproducible.js';

let dir: string;
const saved = process.env.SOURCE_DATE_EPOCH;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'hv-pack-squashfs-'));
  await mkdir(path.join(dir, 'tree/etc'), { recursive: true });
  await writeFile(path.join(dir, 'tree/etc/hostname'), 'hvtest\n');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(() => {
  if (saved === undefined) delete process.env.SOURCE_DATE_EPOCH;
  else process.env.SOURCE_DATE_EPOCH = saved;
});

describe('packSquashfs', () => {
  it('packs with SOURCE_DATE_EPOCH in the environment, stamping the epoch it is given', async () => {
    process.env.SOURCE_DATE_EPOCH = '1800000000';
    const out = path.join(dir, 'a.squashfs');
    await packSquashfs(path.join(dir, 'tree'), out, 1_700_000_000, { timeoutMs: 60_000 });
    const listing = (await run('unsquashfs', ['-lln', '-UTC', '-d', '', out])).stdout;
    // 1_700_000_000 is 2023-11-14 22:13 UTC; the environment's 1_800_000_000 (2027) must not be used.
    expect(listing).toMatch(/^-rw-r--r-- 0\/0\s+7 2023-11-14 22:13 \/etc\/hostname$/m);
    expect(listing).not.toContain('2027-');
  });

  it('mksquashfs itself refuses the variable next to -all-time: the reason packSquashfs drops it', async () => {
    const r = await run('mksquashfs', [path.join(dir, 'tree'), path.join(dir, 'b.squashfs'), '-noappend', '-all-time', '1700000000'], {
      env: { SOURCE_DATE_EPOCH: '1800000000' },
      allowFailure: true,
      timeoutMs: 60_000,
    });
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr + r.stdout).toContain("SOURCE_DATE_EPOCH and command line options can't be used at the same time");
  });
});
