/**
 * hvinstall image on this machine (root, loop devices): a raw and a qcow2 image read back from the
 * outside (partition table, filesystem labels, size, sparseness), and the refusals and the failure
 * that must leave no loop device and no file at --out.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Cleanup, buildSmallOsTree, configYaml, hvinstall, parseExport, sh, tempDir, testCleanup, TEST_SYSTEM_SIZE_MIB } from '../install/helpers.js';
import { addImageChain } from '../bootloader/image-chain-tree.js';

beforeAll(() => {
  if (process.getuid?.() !== 0) throw new Error('integration tests need root');
});

const GiB = 1024 ** 3;

async function setup(cleanup: Cleanup, extraOs = '') {
  const dir = await tempDir(cleanup, 'hvinstall-image-');
  const source = await buildSmallOsTree(dir);
  const configFile = path.join(dir, 'config.yaml');
  // install.device names a disk this machine does not have: the image command uses its loop device.
  // No force_efi: an image is UEFI whatever firmware the building host has (this one boots BIOS).
  await writeFile(configFile, configYaml({ device: '/dev/hv-not-a-disk' }).replace('  hostname: hv-it-node\n', `  hostname: hv-it-node\n${extraOs}`));
  const outDir = path.join(dir, 'out');
  await sh('mkdir', ['-p', outDir]);
  return { dir, source, configFile, outDir, stateDir: path.join(dir, 'state') };
}

function imageArgs(t: { configFile: string; source: string; stateDir: string }, out: string, extra: string[] = []): string[] {
  return ['image', '--config', t.configFile, '--source', t.source, '--out', out, '--system-size', String(TEST_SYSTEM_SIZE_MIB), '--state-dir', t.stateDir, '--progress', 'plain', ...extra];
}

/** Reads a partition (1-based) of a raw image, mounted read-only at its offset. */
async function withPartition<T>(dir: string, raw: string, n: number, fn: (mnt: string) => Promise<T>): Promise<T> {
  const table = JSON.parse((await sh('sfdisk', ['--json', raw])).stdout) as { partitiontable: { partitions: Array<{ start: number; size: number }> } };
  const p = table.partitiontable.partitions[n - 1]!;
  const mnt = path.join(dir, `mnt-${n}`);
  await sh('mkdir', ['-p', mnt]);
  await sh('mount', ['-o', `ro,loop,offset=${p.start * 512},sizelimit=${p.size * 512}`, raw, mnt]);
  try {
    return await fn(mnt);
  } finally {
    await sh('umount', [mnt]);
  }
}

/** What the node reads: its NM keyfiles and reserved-resources drop-in (COS_PERSISTENT), its identity (COS_OEM). */
async function nodeFiles(dir: string, raw: string): Promise<{ keyfiles: string[]; keyfile: string; reserved: string; identity: Record<string, unknown> }> {
  const persistent = await withPartition(dir, raw, 5, async (mnt) => {
    const nm = path.join(mnt, '.state/etc-NetworkManager.bind/system-connections');
    const keyfiles = (await readdir(nm)).sort();
    const slave = keyfiles.find((k) => k.startsWith('bond-slave-'))!;
    return { keyfiles, keyfile: await readFile(path.join(nm, slave), 'utf8'), reserved: await readFile(path.join(mnt, '.state/etc-rancher.bind/rke2/config.yaml.d/99-z00-harvester-reserved-resources.yaml'), 'utf8') };
  });
  const identity = await withPartition(dir, raw, 2, async (mnt) => JSON.parse(await readFile(path.join(mnt, 'hvinstall/node-identity.json'), 'utf8')) as Record<string, unknown>);
  return { ...persistent, identity };
}

/** Loop devices whose backing file lies in dir (none must remain). */
async function loopsUnder(dir: string): Promise<string[]> {
  const r = await sh('losetup', ['--list', '--json', '--output', 'NAME,BACK-FILE']);
  const list = r.stdout.trim() ? ((JSON.parse(r.stdout) as { loopdevices: Array<{ name: string; 'back-file'?: string }> }).loopdevices ?? []) : [];
  return list.filter((l) => (l['back-file'] ?? '').startsWith(dir)).map((l) => l.name);
}

// Each test on disks, directories and a server of its own, most of its time waiting on tools and
// the disk: the tests run side by side (a Cleanup each, run when the test ends).
describe.concurrent('hvinstall image', () => {
  it('raw: a UEFI layout (COS_GRUB first) on any build host; the partition table and labels read back, the virtual size is --size, almost nothing is allocated', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup);
    const out = path.join(t.outDir, 'node.raw');
    const r = await hvinstall(imageArgs(t, out, ['--size', '260G']));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`image written: ${out} (raw`);
    const s = await stat(out);
    expect(s.size).toBe(260 * GiB);
    // The installed content is a few hundred MiB: far below the size when the file is sparse.
    expect(s.blocks * 512).toBeLessThan(2 * GiB);
    const table = JSON.parse((await sh('sfdisk', ['--json', out])).stdout) as { partitiontable: { label: string; partitions: Array<{ node: string; start: number }> } };
    expect(table.partitiontable.label).toBe('gpt');
    expect(table.partitiontable.partitions).toHaveLength(6);
    // Each filesystem probed in the file at its partition's offset (no loop device involved).
    const labels: string[] = [];
    for (const p of table.partitiontable.partitions) labels.push(parseExport((await sh('blkid', ['-p', '-o', 'export', '-O', String(p.start * 512), out], { allowFailure: true })).stdout).LABEL ?? '?');
    expect(labels).toEqual(['COS_GRUB', 'COS_OEM', 'COS_RECOVERY', 'COS_STATE', 'COS_PERSISTENT', 'HARV_LH_DEFAULT']);
    expect(await loopsUnder(t.outDir)).toEqual([]);
    expect((await readdir(t.outDir)).sort()).toEqual(['node.raw']);
  });

  it("an image for another machine: nothing of this build host is checked or leaks into it; --facts judges and renders for that machine", async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup);
    // ens3: a NIC the build host does not have (it has eth0).
    await writeFile(t.configFile, (await readFile(t.configFile, 'utf8')).replace('interfaces: [{name: eth0}]', 'interfaces: [{name: ens3}]'));
    const out = path.join(t.outDir, 'node.raw');
    const r = await hvinstall(imageArgs(t, out, ['--size', '260G']));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toContain('no machine was checked: hvinstall image builds a disk image');
    const unchecked = await nodeFiles(t.dir, out);
    expect(unchecked.keyfiles).toContain('bond-slave-ens3.nmconnection');
    expect(unchecked.reserved).toContain('system-reserved=cpu=392m'); // Harvester's formula for 8 CPUs, not this host's
    expect(unchecked.identity).not.toHaveProperty('address');

    // The facts of the machine it is for: 16 CPUs, UEFI, its ens3 up.
    const facts = path.join(t.dir, 'node-facts.json');
    await writeFile(facts, JSON.stringify({ sysroot: '/', cpu: { cores: 8, threads: 16, vmx: true, svm: false, devKvm: true }, memoryBytes: 64 * GiB, firmware: { uefi: true }, virtualization: { isVm: false }, disks: [], nics: [{ name: 'ens3', mac: '52:54:00:12:34:99', virtual: false, loopback: false, operState: 'up', carrier: true, speedMbps: 10000 }] }));
    const judged = await hvinstall(imageArgs(t, out, ['--size', '260G', '--force', '--facts', facts]));
    expect(judged.code, judged.stderr).toBe(0);
    expect(judged.stdout + judged.stderr).toMatch(new RegExp(`hardware gate \\(the facts in ${facts.replace(/[/.]/g, '\\$&')}\\): passed`));
    const forIt = await nodeFiles(t.dir, out);
    expect(forIt.reserved).toContain('system-reserved=cpu=408m'); // 16 CPUs: R = 60 + 10 + 10 + 2.5·12 + 400 = 510, 0.8·R
    expect(forIt.keyfile).toContain('interface-name=ens3');

    // A legacy-BIOS machine's facts: refused before any file or loop device is made.
    await writeFile(facts, JSON.stringify({ ...JSON.parse(await readFile(facts, 'utf8')), firmware: { uefi: false } }));
    const bios = await hvinstall(imageArgs(t, path.join(t.outDir, 'bios.raw'), ['--facts', facts]));
    expect(bios.code).toBe(1);
    expect(bios.stderr).toContain(`install refused by Harvester's hardware gate (the facts in ${facts})`);
    expect(bios.stderr).toContain('--legacy-bios installs anyway');
    expect((await readdir(t.outDir)).sort()).toEqual(['node.raw']);
    expect(await loopsUnder(t.outDir)).toEqual([]);
  }, 600_000);

  it('a source with an Elemental boot chain: the image carries that chain on its ESP and writes no NVRAM entry', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup);
    const chain = await addImageChain(t.source);
    const out = path.join(t.outDir, 'node.raw');
    const r = await hvinstall(imageArgs(t, out));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("boot chain: the image's own: shim /usr/lib/shim/shimx64.efi.signed");
    expect(r.stdout).toMatch(/no UEFI boot entry: \/dev\/loop\d+ is a loop device/);
    const esp = (JSON.parse((await sh('sfdisk', ['--json', out])).stdout) as { partitiontable: { partitions: Array<{ start: number }> } }).partitiontable.partitions[0]!;
    // mtools reads the ESP in the file at its offset (no loop device involved).
    const read = async (file: string): Promise<Buffer> => {
      const to = path.join(t.dir, 'esp-file');
      await sh('mcopy', ['-n', '-i', `${out}@@${esp.start * 512}`, file, to], { env: { ...process.env, MTOOLS_SKIP_CHECK: '1' } });
      return readFile(to);
    };
    expect((await read('::/EFI/BOOT/BOOTX64.EFI')).equals(await readFile(chain.shim))).toBe(true);
    expect((await read('::/EFI/elemental/grubx64.efi')).equals(await readFile(chain.grub))).toBe(true);
    expect((await read('::/EFI/BOOT/grub.cfg')).toString()).toContain('configfile ($root)/grub2/grub.cfg');
    expect(await loopsUnder(t.outDir)).toEqual([]);
  });

  it('qcow2: qemu-img reads back a qcow2 of the default size (the install disk minimum), sparse', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup);
    const out = path.join(t.outDir, 'node.qcow2');
    const r = await hvinstall(imageArgs(t, out));
    expect(r.code, r.stderr).toBe(0);
    const info = JSON.parse((await sh('qemu-img', ['info', '--output', 'json', out])).stdout) as { format: string; 'virtual-size': number; 'actual-size': number };
    expect(info.format).toBe('qcow2');
    expect(info['virtual-size']).toBe(250 * GiB);
    expect(info['actual-size']).toBeLessThan(2 * GiB);
    expect(await loopsUnder(t.outDir)).toEqual([]);
    expect(await readdir(t.outDir)).toEqual(['node.qcow2']);

    // Run again onto the same --out: refused without --force, the image untouched.
    const before = await readFile(out);
    const again = await hvinstall(imageArgs(t, out));
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(`--out ${out} exists; refusing to replace it`);
    expect(again.stderr).toContain('add --force');
    expect((await readFile(out)).equals(before)).toBe(true);
  });

  it('a failing install step: exit 3 naming the step, no loop device, nothing at --out or beside it', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, '  after_install_chroot_commands:\n    - "exit 9"\n');
    const out = path.join(t.outDir, 'node.qcow2');
    const r = await hvinstall(imageArgs(t, out));
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('install failed in step chroot; no image written');
    expect(r.stderr).toContain('after-install-chroot command 1 of 1 (exit 9) failed with exit status 9');
    expect(await loopsUnder(t.outDir)).toEqual([]);
    expect(await readdir(t.outDir)).toEqual([]);
  });

  it('bad arguments are refused before any file or loop device is made', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup);
    const small = await hvinstall(imageArgs(t, path.join(t.outDir, 'n.qcow2'), ['--size', '100G']));
    expect(small.code).toBe(2);
    expect(small.stderr).toContain("--size 100G is below Harvester's minimum install disk of 250 GiB");
    const missing = await hvinstall(imageArgs(t, path.join(t.dir, 'no-such-dir', 'n.qcow2')));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`the directory ${path.join(t.dir, 'no-such-dir')} does not exist`);
    const ext = await hvinstall(imageArgs(t, path.join(t.outDir, 'n.vmdk')));
    expect(ext.code).toBe(2);
    expect(ext.stderr).toContain('name the image NAME.qcow2 or NAME.raw');
    expect(await readdir(t.outDir)).toEqual([]);
    expect(await loopsUnder(t.dir)).toEqual([]);
  });
});
