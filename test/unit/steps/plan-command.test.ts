/** `hvinstall plan` against captured machine facts: no root, no disks touched. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import plan from '../../../installer/commands/plan.js';
import { disk, machine } from '../disk/facts-fixture.js';
import { testTempDir } from '../temp-dir.js';

let dir: string;
let out: string;
let err: string;
beforeEach(() => {
  dir = testTempDir('hv-plan-cmd-');
  out = '';
  err = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((s) => ((out += String(s)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((s) => ((err += String(s)), true));
});
afterEach(() => vi.restoreAllMocks());

async function files(device: string, facts = machine([disk('vda', 300), disk('vdb', 300)])) {
  const config = path.join(dir, 'config.yaml');
  await writeFile(
    config,
    `scheme_version: 1\ntoken: plan-secret-token\nos:\n  hostname: n1\n  password: p4ssw0rd-secret\n  dns_nameservers: [1.1.1.1]\ninstall:\n  mode: create\n  device: ${device}\n  management_interface:\n    interfaces: [{name: eth0}]\n    method: dhcp\n  vip: 10.0.0.9\n  vip_mode: static\n`,
  );
  const factsFile = path.join(dir, 'facts.json');
  await writeFile(factsFile, JSON.stringify(facts));
  return { config, factsFile };
}

describe('hvinstall plan', () => {
  it('prints the partition table, images, files and steps', async () => {
    const f = await files('/dev/vda');
    expect(await plan(['--config', f.config, '--facts', f.factsFile])).toBe(0);
    expect(out).toMatch(/1\s+1 MiB\s+64 MiB\s+COS_GRUB\s+vfat\s+EF00/);
    expect(out).toContain('HARV_LH_DEFAULT');
    expect(out).toContain('cOS/passive.img');
    expect(out).toContain('10. agent');
    expect(out).toContain('11. chroot');
    expect(out).toContain('12. finish');
    expect(out + err).not.toContain('plan-secret-token');
  });

  it('says whose facts it planned and rendered with: the --facts file, or this machine and how to give another', async () => {
    const f = await files('/dev/vda');
    expect(await plan(['--config', f.config, '--facts', f.factsFile])).toBe(0);
    expect(out.split('\n')[0]).toBe(`Machine: the facts in ${f.factsFile} (16 CPUs, UEFI, NICs (none))`);
    out = '';
    expect(await plan(['--config', f.config, '--facts', f.factsFile, '--json'])).toBe(0);
    expect(JSON.parse(out).machine).toBe(`the facts in ${f.factsFile} (16 CPUs, UEFI, NICs (none))`);
  });

  it('--json gives the plan and the refusals; a mounted disk is a refusal (exit 1)', async () => {
    const busy = disk('vda', 300, { partitions: [{ path: '/dev/vda1', sizeBytes: 1 << 30, mountpoints: ['/data'] }] });
    const f = await files('/dev/vda', machine([busy]));
    expect(await plan(['--config', f.config, '--facts', f.factsFile, '--json'])).toBe(1);
    const j = JSON.parse(out);
    expect(j.plan.device).toBe('/dev/vda');
    expect(j.refusals).toEqual(['/dev/vda is mounted (/data): unmount it first']);
  });

  it('refuses a --device the config does not name, and a layout that does not fit', async () => {
    const f = await files('/dev/vda');
    await expect(plan(['--config', f.config, '--facts', f.factsFile, '--device', '/dev/vdb'])).rejects.toThrow(/not the disk named in the config/);
    const small = await files('/dev/vda', machine([disk('vda', 100)]));
    await expect(plan(['--config', small.config, '--facts', small.factsFile])).rejects.toMatchObject({ exitCode: 1, message: expect.stringContaining('Minimum 250Gi') });
  });

  it('usage errors exit 2', async () => {
    await expect(plan([])).rejects.toMatchObject({ exitCode: 2, message: '--config is required' });
    await expect(plan(['--bogus'])).rejects.toMatchObject({ exitCode: 2 });
    const f = await files('/dev/vda');
    await expect(plan(['--config', f.config, '--facts', f.factsFile, '--system-size', '12'])).rejects.toMatchObject({ exitCode: 2 });
  });
});
