/** busyHolders against a fixture sysroot: which LVM/MD/dm holders refuse an install. */
import { describe, expect, it } from 'vitest';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Host } from '../../../lib/host.js';
import { busyHolders } from '../../../installer/steps/holders.js';
import { targetInUseProblems } from '../../../installer/disk/plan.js';
import { disk } from '../disk/facts-fixture.js';
import { testTempDir } from '../temp-dir.js';

async function sysroot(): Promise<string> {
  const root = testTempDir('hv-holders-');
  const dm = async (name: string, devno: string, lvName: string, above: string[] = []) => {
    const base = path.join(root, 'sys/class/block', name);
    await mkdir(path.join(base, 'dm'), { recursive: true });
    await mkdir(path.join(base, 'holders'), { recursive: true });
    await writeFile(path.join(base, 'dev'), `${devno}\n`);
    await writeFile(path.join(base, 'dm/name'), `${lvName}\n`);
    for (const a of above) await writeFile(path.join(base, 'holders', a), '');
  };
  await dm('dm-0', '254:0', 'vg-idle');
  await dm('dm-1', '254:1', 'vg-root');
  await dm('dm-2', '254:2', 'vg-swap');
  await dm('dm-3', '254:3', 'vg-crypt', ['dm-4']);
  await mkdir(path.join(root, 'proc/self'), { recursive: true });
  await writeFile(path.join(root, 'proc/self/mountinfo'), '22 1 254:1 / /srv rw,relatime shared:1 - ext4 /dev/mapper/vg-root rw\n');
  await writeFile(path.join(root, 'proc/swaps'), 'Filename\tType\tSize\tUsed\tPriority\n/dev/dm-2 partition 1024 0 -2\n');
  return root;
}

describe('busyHolders', () => {
  it('mounted, swap and stacked holders are busy; an idle one is not', async () => {
    const host = new Host(await sysroot());
    expect(await busyHolders(['dm-0', 'dm-1', 'dm-2', 'dm-3'], host)).toEqual([
      { holder: 'dm-1', why: 'mounted at /srv' },
      { holder: 'dm-2', why: 'active swap' },
      { holder: 'dm-3', why: 'held by dm-4' },
    ]);
    expect(await busyHolders([], host)).toEqual([]);
  });

  it('only busy holders refuse the install; the message says why and what to do', async () => {
    const host = new Host(await sysroot());
    const d = disk('sda', 300, { inUse: { mountpoints: [], swap: false, holders: ['dm-0', 'dm-1'], bootMedium: false } });
    expect(targetInUseProblems(d, { busyHolders: await busyHolders(['dm-0'], host) })).toEqual([]);
    const problems = targetInUseProblems(d, { busyHolders: await busyHolders(d.inUse.holders, host) });
    expect(problems).toEqual(['/dev/sda is held by dm-1 (mounted at /srv) (LVM, MD or device-mapper in use): unmount and deactivate them (e.g. vgchange -an, mdadm --stop) first']);
  });
});
