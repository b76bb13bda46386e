/**
 * The permanent MAC the install pins NIC names by (docs/render.md "NIC names pinned at install"),
 * read from a real kernel (root): in a network namespace of its own, a veth given an address
 * (addr_assign_type 3, "set") and its peer with a random one (1) have no permanent MAC, so no name
 * would be pinned by an address that is not the NIC's own. `ip netns exec` mounts that namespace's
 * sysfs, so `hvinstall preflight --json` sees only these NICs.
 */
import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../../lib/exec.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const ns = `hvnic-${randomBytes(3).toString('hex')}`;
const SET_MAC = '52:54:00:e2:e0:71';
const ip = (...args: string[]) => run('ip', args, { timeoutMs: 10_000 });

beforeAll(async () => {
  await ip('netns', 'add', ns);
  await ip('-n', ns, 'link', 'add', 'ens9', 'address', SET_MAC, 'type', 'veth', 'peer', 'name', 'ens10');
});

afterAll(async () => {
  await ip('netns', 'del', ns).catch(() => undefined);
});

interface Nic {
  name: string;
  mac?: string;
  permMac?: string;
}

describe('permanent MACs on a real kernel', () => {
  it('an assigned or a random address is not taken as the NIC\'s permanent one', async () => {
    const r = await run('ip', ['netns', 'exec', ns, process.execPath, path.join(REPO, 'dist/installer/cli.js'), 'preflight', '--json'], { allowFailure: true, timeoutMs: 120_000 });
    const nics = (JSON.parse(r.stdout) as { nics: Nic[] }).nics;
    expect(nics.map((n) => n.name).sort()).toEqual(['ens10', 'ens9', 'lo']);
    const by = Object.fromEntries(nics.map((n) => [n.name, n]));
    expect(by.ens9).toMatchObject({ mac: SET_MAC });
    expect(by.ens10!.mac).toMatch(/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
    expect(nics.map((n) => [n.name, n.permMac ?? null])).toEqual(expect.arrayContaining([['ens9', null], ['ens10', null], ['lo', null]]));
  });

  it('this machine\'s own NICs: the address where the kernel says it is permanent, none where it is random or set', async () => {
    const r = await run(process.execPath, [path.join(REPO, 'dist/installer/cli.js'), 'preflight', '--json'], { allowFailure: true, timeoutMs: 120_000 });
    const nics = (JSON.parse(r.stdout) as { nics: Nic[] }).nics;
    const attr = (n: string, a: string) => readFile(`/sys/class/net/${n}/${a}`, 'utf8').then((t) => t.trim(), () => undefined);
    for (const name of await readdir('/sys/class/net')) {
      const type = await attr(name, 'addr_assign_type');
      if (name === 'lo' || type === undefined || (await attr(name, 'bonding_slave/perm_hwaddr'))) continue;
      const got = nics.find((n) => n.name === name);
      if (type === '0') expect(got?.permMac, name).toBe(await attr(name, 'address'));
      // Random or set, and no permanent address from the driver (ip -j link's permaddr).
      else if (!JSON.parse((await run('ip', ['-j', 'link', 'show', 'dev', name])).stdout)[0].permaddr) expect(got?.permMac, name).toBeUndefined();
    }
  });
});
