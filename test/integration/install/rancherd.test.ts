/**
 * hvinstall install from a source that carries rancherd (root, loop devices): the node gets
 * rancherd's config and bootstrap resources through 90_custom.yaml, versions from the source's
 * harvester-release.yaml, and none of the stand-ins hvagent would need; a source with rancherd
 * but no versions is refused before any disk is touched.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parse } from 'yaml';
import { Cleanup, buildSmallOsTree, configYaml, diskSnapshot, diskWithFilesystem, hvinstall, installArgs, loopDisk, partitionNode, probe, tempDir, withMount } from './helpers.js';
import { RELEASE_TEXT, TEMPLATES } from '../../unit/render/cases.js';
import { goEmbedElf } from '../../unit/render/go-embed-elf.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

beforeAll(() => {
  if (process.getuid?.() !== 0) throw new Error('integration tests need root');
});

async function rancherdSource(dir: string, release: boolean): Promise<string> {
  const tree = await buildSmallOsTree(dir);
  await mkdir(path.join(tree, 'usr/bin'), { recursive: true });
  await mkdir(path.join(tree, 'usr/lib/systemd/system'), { recursive: true });
  await writeFile(path.join(tree, 'usr/bin/rancherd'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
  await writeFile(path.join(tree, 'usr/lib/systemd/system/rancherd.service'), '[Service]\nExecStart=/usr/bin/rancherd bootstrap\n');
  if (release) await writeFile(path.join(tree, 'etc/harvester-release.yaml'), RELEASE_TEXT);
  // Harvester's installer binary with the release's addon and dashboard templates (a stand-in in Go's embed layout).
  await writeFile(path.join(tree, 'usr/bin/harvester-installer'), goEmbedElf({ 'templates/rancherd-22-addons.yaml': TEMPLATES.addons, 'templates/rancherd-12-monitoring-dashboard.yaml': TEMPLATES.dashboards }), { mode: 0o755 });
  return tree;
}

async function partitionByLabel(disk: string, label: string): Promise<string> {
  for (let n = 1; n <= 8; n++) if ((await probe(partitionNode(disk, n))).LABEL === label) return partitionNode(disk, n);
  throw new Error(`no ${label} on ${disk}`);
}

describe('hvinstall install with rancherd in the source', () => {
  it('writes rancherd config and resources into 90_custom.yaml with the release versions, and no static kube-vip or token drop-in', async () => {
    const dir = await tempDir(cleanup);
    const disk = await loopDisk(cleanup, dir, 'target', 260);
    const source = await rancherdSource(dir, true);
    const config = path.join(dir, 'config.yaml');
    await writeFile(config, configYaml({ device: disk, forceEfi: true }));
    // The plan says who bootstraps and what the render leaves out, before anything is touched.
    const plan = await hvinstall(['plan', '--config', config, '--source', source, '--json']);
    expect(plan.code, plan.stderr).toBe(0);
    const notes = (JSON.parse(plan.stdout) as { plan: { notes: string[]; image: { bootstrapper: string } } }).plan;
    expect(notes.image.bootstrapper).toBe('rancherd');
    expect(notes.notes).toContain('bootstrap: the image carries rancherd (/usr/bin/rancherd, /usr/lib/systemd/system/rancherd.service): rancherd bootstraps RKE2, Rancher and Harvester');
    expect(notes.notes.filter((n) => /leaves out|not rendered/.test(n))).toEqual([]);
    const r = await hvinstall(installArgs(config, source, path.join(dir, 'state'), ['--bundle', 'none']));
    expect(r.code, r.stderr).toBe(0);

    const custom = await withMount(await partitionByLabel(disk, 'COS_OEM'), dir, (m) => readFile(path.join(m, '90_custom.yaml'), 'utf8'));
    const files = (parse(custom) as { stages: { initramfs: Array<{ files: Array<{ path: string; permissions: number; content: string }> }> } }).stages.initramfs[0]!.files;
    const rancherd = files.filter((f) => f.path.startsWith('/etc/rancher/rancherd/'));
    expect(rancherd.map((f) => f.path)).toEqual([
      '/etc/rancher/rancherd/config.yaml',
      '/etc/rancher/rancherd/config.yaml.d/10-harvester.yaml',
      '/etc/rancher/rancherd/config.yaml.d/11-monitoring-crd.yaml',
      '/etc/rancher/rancherd/config.yaml.d/12-monitoring-dashboard.yaml',
      '/etc/rancher/rancherd/config.yaml.d/14-logging-crd.yaml',
      '/etc/rancher/rancherd/config.yaml.d/15-kubeovn-operator-crd.yaml',
      '/etc/rancher/rancherd/config.yaml.d/20-harvester-settings.yaml',
      '/etc/rancher/rancherd/config.yaml.d/22-addons.yaml',
    ]);
    const addons = parse(rancherd.find((f) => f.path.endsWith('22-addons.yaml'))!.content) as { resources: Array<{ metadata: { name: string } }> };
    expect(addons.resources.map((a) => a.metadata.name)).toEqual(['vm-import-controller', 'pcidevices-controller', 'rancher-logging', 'rancher-monitoring', 'harvester-seeder', 'nvidia-driver-toolkit', 'kubeovn-operator', 'descheduler']);
    expect(rancherd.every((f) => f.permissions === 0o600)).toBe(true);
    expect(parse(rancherd[0]!.content)).toMatchObject({ role: 'cluster-init', nodeName: 'hv-it-node', token: 'integration-secret-token', kubernetesVersion: 'v1.35.6+rke2r1', rancherVersion: 'v2.14.2' });

    const persistent = await withMount(await partitionByLabel(disk, 'COS_PERSISTENT'), dir, async (m) => ({
      dropIns: (await readdir(path.join(m, '.state/etc-rancher.bind/rke2/config.yaml.d'))).sort(),
      podManifests: await readdir(path.join(m, '.state/var-lib-rancher.bind/rke2/agent/pod-manifests')).catch(() => [] as string[]),
      server: await readFile(path.join(m, '.state/etc-rancher.bind/rke2/config.yaml.d/90-harvester-server.yaml'), 'utf8'),
      rancherdOnDisk: await readdir(path.join(m, '.state/etc-rancher.bind/rancherd')).catch(() => [] as string[]),
    }));
    expect(persistent.dropIns).not.toContain('10-hvinstall-token.yaml');
    expect(persistent.podManifests).not.toContain('kube-vip.yaml');
    expect(parse(persistent.server)).not.toHaveProperty('cluster-init');
    // yip writes rancherd's files at boot; the install leaves none of them on COS_PERSISTENT to go stale.
    expect(persistent.rancherdOnDisk).toEqual([]);
  });

  it('refuses a source with rancherd but no release metadata and no versions in the config, and touches no disk', async () => {
    const dir = await tempDir(cleanup);
    const disk = await loopDisk(cleanup, dir, 'target', 260);
    const source = await rancherdSource(dir, false);
    const config = path.join(dir, 'config.yaml');
    await writeFile(config, configYaml({ device: disk }));
    // Something on the disk to lose: an ext4 filesystem with data.
    await diskWithFilesystem(disk, 'KEEPME');
    const before = await diskSnapshot(disk, dir);
    const r = await hvinstall(installArgs(config, source, path.join(dir, 'state')));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('the OS image carries rancherd, but no version is known for kubernetes (config: runtime_version)');
    expect(r.stderr).toContain('/etc/harvester-release.yaml');
    expect(await diskSnapshot(disk, dir)).toEqual(before);
  });
});
