// The committed fixture trees are exactly the generator's output (nobody edited a tree by hand).
import { execFileSync } from 'node:child_process';
import { lstat, mkdtemp, readFile, readdir, readlink, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FIXTURES } from './helpers.js';

const NAMES = ['prod-nvme', 'lab-vm', 'legacy-bios', 'usb-boot', '4kn', 'old-install', 'raid-rack'];

async function snapshot(dir: string, rel = ''): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of (await readdir(path.join(dir, rel))).sort()) {
    const r = path.join(rel, e);
    const st = await lstat(path.join(dir, r));
    if (st.isSymbolicLink()) out[r] = `-> ${await readlink(path.join(dir, r))}`;
    else if (st.isDirectory()) Object.assign(out, await snapshot(dir, r));
    else out[r] = (await readFile(path.join(dir, r))).toString('base64');
  }
  return out;
}

let tmp = '';
afterAll(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe('fixture sysroots', () => {
  it('match a fresh run of generate.mjs', async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'hv-sysroot-gen-'));
    execFileSync(process.execPath, [path.join(FIXTURES, 'generate.mjs'), '--out', tmp], { stdio: 'pipe' });
    expect((await readdir(tmp)).sort()).toEqual([...NAMES].sort());
    for (const name of NAMES) {
      // Empty directories are not kept by git; compare files and links only.
      expect(await snapshot(path.join(FIXTURES, name)), name).toEqual(await snapshot(path.join(tmp, name)));
    }
  });
});
