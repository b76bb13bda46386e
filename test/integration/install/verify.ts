/** Checks an installed disk from the outside against the plan that produced it. */
import { expect } from 'vitest';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { InstallPlan } from '../../../installer/disk/types.js';
import { fileMode, partitionNode, probe, sh, treeManifest, withMount } from './helpers.js';

/** Where the installer copies the image bundle on COS_PERSISTENT (node path /var/lib/rancher/hvagent/bundle). */
export const BUNDLE_ON_PERSISTENT = '.state/var-lib-rancher.bind/hvagent/bundle';

/** opts.bundle: the bundle directory the install was given, or 'none' when it must have copied none. */
export async function verifyInstalledDisk(plan: InstallPlan, source: string, dir: string, opts: { bundle?: string } = {}): Promise<void> {
  const disk = plan.device;
  // the partition table
  if (plan.table === 'gpt') {
    const v = await sh('sgdisk', ['--verify', disk]);
    expect(v.stdout).toContain('No problems found');
    // A damaged header is rebuilt from the other copy in memory and named only on stderr.
    expect(v.stderr).not.toContain('ERROR');
  }
  const dump = (await sh('sfdisk', ['--json', disk])).stdout;
  const table = JSON.parse(dump).partitiontable as { label: string; sectorsize?: number; partitions: Array<{ start: number; size: number; name?: string }> };
  expect(table.label).toBe(plan.table === 'gpt' ? 'gpt' : 'dos');
  expect(table.partitions.map((p) => [p.start, p.size])).toEqual(plan.partitions.map((p) => [p.startSector, p.endSector - p.startSector + 1]));

  // every filesystem: type, label, UUID as planned, and clean
  for (const p of plan.partitions) {
    const dev = partitionNode(disk, p.number);
    const sig = await probe(dev);
    if (p.fs === 'none') {
      expect(sig.TYPE).toBeUndefined();
      continue;
    }
    expect({ dev, type: sig.TYPE, label: sig.LABEL }).toEqual({ dev, type: p.fs, label: p.label });
    if (p.fs === 'ext4') {
      expect(sig.UUID).toBe(p.fsUuid);
      const fsck = await sh('e2fsck', ['-n', '-f', dev], { allowFailure: true });
      expect(fsck.code, `${dev}: ${fsck.stdout}${fsck.stderr}`).toBe(0);
    } else {
      const fsck = await sh('fsck.vfat', ['-n', dev], { allowFailure: true });
      expect(fsck.code, `${dev}: ${fsck.stdout}${fsck.stderr}`).toBe(0);
      const ls = await sh('mdir', ['-b', '-i', dev, '::/EFI/BOOT']);
      expect(ls.stdout).toMatch(/BOOTX64\.EFI/i);
    }
  }
  if (plan.dataDisk) {
    const sig = await probe(plan.dataDisk.path);
    expect({ type: sig.TYPE, label: sig.LABEL, uuid: sig.UUID }).toEqual({ type: 'ext4', label: 'HARV_LH_DEFAULT', uuid: plan.dataDisk.fsUuid });
    expect((await sh('e2fsck', ['-n', '-f', plan.dataDisk.path], { allowFailure: true })).code).toBe(0);
  }

  const dev = (label: string) => partitionNode(disk, plan.partitions.find((p) => p.label === label)!.number);
  const sourceManifest = await treeManifest(source);

  // images: mountable, labelled, holding the source's files
  for (const img of plan.images) {
    await withMount(dev(img.on), dir, async (m) => {
      const file = path.join(m, img.file);
      const sig = await probe(file);
      expect({ file: img.file, type: sig.TYPE, label: sig.LABEL }).toEqual({ file: img.file, type: 'ext2', label: img.label });
      expect((await sh('e2fsck', ['-n', '-f', file], { allowFailure: true })).code).toBe(0);
      await withMount(file, dir, async (im) => {
        const got = await treeManifest(im, (rel) => rel === 'lost+found');
        for (const [rel, want] of Object.entries(sourceManifest)) expect({ rel, got: got[rel] }).toEqual({ rel, got: want });
      }, 'ro,loop');
      if (img.on === 'COS_STATE' || img.on === 'COS_RECOVERY') {
        const state = parseYaml(await readFile(path.join(m, 'state.yaml'), 'utf8')) as unknown;
        expect(JSON.stringify(state)).toContain(img.label);
      }
    });
  }

  // grub on COS_STATE
  await withMount(dev('COS_STATE'), dir, async (m) => {
    const cfg = await readFile(path.join(m, 'grub2/grub.cfg'), 'utf8');
    expect(cfg).toContain('COS_STATE');
    expect(cfg).toContain('active.img');
  });

  // /oem: harvester.config in Harvester's lowercase form, 0600; grubenv; the redacted install record
  await withMount(dev('COS_OEM'), dir, async (m) => {
    const cfgFile = path.join(m, 'harvester.config');
    expect(await fileMode(cfgFile)).toBe(0o600);
    const cfg = parseYaml(await readFile(cfgFile, 'utf8')) as Record<string, any>;
    expect(cfg.schemeversion).toBe(1);
    expect(cfg.token).toBe('integration-secret-token');
    expect(cfg.install.device).toBe(disk);
    expect(cfg.os.hostname).toBe('hv-it-node');
    await readFile(path.join(m, 'grubenv'), 'utf8');
    const log = await readFile(path.join(m, 'install/install.log'), 'utf8');
    expect(await fileMode(path.join(m, 'install/install.log'))).toBe(0o600);
    expect(log).not.toContain('integration-secret-token');
    expect(log).not.toContain('rancher-password-secret');
    const journal = JSON.parse(await readFile(path.join(m, 'install/journal.json'), 'utf8'));
    expect(journal.status).toBe('succeeded');
    expect(journal.steps.every((s: { status: string }) => s.status === 'done')).toBe(true);
  });

  // the persistent layout
  await withMount(dev('COS_PERSISTENT'), dir, async (m) => {
    for (const p of plan.persistentStatePaths) {
      const bind = path.join(m, '.state', `${p.slice(1).replace(/\//g, '-')}.bind`);
      expect((await sh('test', ['-d', bind], { allowFailure: true })).code, bind).toBe(0);
    }
    // the image bundle, file for file (mode, size, sha256, symlink targets)
    const copied = path.join(m, BUNDLE_ON_PERSISTENT);
    if (opts.bundle === 'none') expect((await sh('test', ['-e', copied], { allowFailure: true })).code, copied).not.toBe(0);
    else if (opts.bundle) expect(await treeManifest(copied)).toEqual(await treeManifest(opts.bundle));
  });
}
