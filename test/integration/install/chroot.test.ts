/**
 * The after-install-chroot step on real loop devices (root): the commands run inside the installed
 * active.img with /oem and /usr/local bound, their output reaches the install log redacted, and a
 * failing command or a tree without /bin/sh fails the install by name with every mount undone.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { InstallPlan } from '../../../installer/disk/types.js';
import { Cleanup, buildSmallOsTree, configYaml, events, hvinstall, installArgs, loopDisk, partitionNode, tempDir, testCleanup, TEST_SYSTEM_SIZE_MIB, withMount } from './helpers.js';

beforeAll(() => {
  if (process.getuid?.() !== 0) throw new Error('integration tests need root');
});

async function setup(cleanup: Cleanup, commands: string[], opts: { noShell?: boolean } = {}) {
  const dir = await tempDir(cleanup);
  const disk = await loopDisk(cleanup, dir, 'target', 260);
  const source = await buildSmallOsTree(dir);
  if (opts.noShell) await rm(path.join(source, 'bin/sh'), { force: true });
  const configFile = path.join(dir, 'config.yaml');
  const list = commands.map((c) => `    - ${JSON.stringify(c)}`).join('\n');
  await writeFile(configFile, configYaml({ device: disk, forceEfi: true }).replace('  hostname: hv-it-node\n', `  hostname: hv-it-node\n  after_install_chroot_commands:\n${list}\n`));
  const plan = await hvinstall(['plan', '--config', configFile, '--json', '--system-size', String(TEST_SYSTEM_SIZE_MIB)]);
  expect(plan.code, plan.stderr).toBe(0);
  return { dir, disk, source, configFile, stateDir: path.join(dir, 'state'), plan: (JSON.parse(plan.stdout) as { plan: InstallPlan }).plan };
}

const partOf = (plan: InstallPlan, disk: string, label: string): string => partitionNode(disk, plan.partitions.find((p) => p.label === label)!.number);

async function mountsUnderRunDir(disk: string): Promise<string[]> {
  const runDir = `/run/hvinstall/${path.basename(disk)}`;
  return (await readFile('/proc/self/mounts', 'utf8')).split('\n').map((l) => l.split(' ')[1] ?? '').filter((m) => m === runDir || m.startsWith(`${runDir}/`)); // not /run/hvinstall/loop10 of another test
}

// Each test on disks, directories and a server of its own, most of its time waiting on tools and
// the disk: the tests run side by side (a Cleanup each, run when the test ends).
describe.concurrent('after-install-chroot', () => {
  it('runs the commands in the installed active.img, with /oem and /usr/local bound; output in the log, redacted', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, [
      'echo built-in-chroot > /etc/hv-chroot-marker',
      'ls /oem > /etc/hv-oem-list && touch /usr/local/from-chroot',
      'test -d /proc/self && test -e /dev/null && echo said integration-secret-token',
    ]);
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir, ['--bundle', 'none']));
    expect(r.code, r.stderr).toBe(0);
    expect(events(r.stdout)).toContainEqual(expect.objectContaining({ type: 'step', phase: 'done', step: 'chroot' }));
    await withMount(partOf(t.plan, t.disk, 'COS_STATE'), t.dir, async (state) => {
      await withMount(path.join(state, 'cOS/active.img'), t.dir, async (root) => {
        expect(await readFile(path.join(root, 'etc/hv-chroot-marker'), 'utf8')).toBe('built-in-chroot\n');
        expect((await readFile(path.join(root, 'etc/hv-oem-list'), 'utf8')).split('\n')).toContain('harvester.config');
      });
    });
    await withMount(partOf(t.plan, t.disk, 'COS_PERSISTENT'), t.dir, async (p) => {
      await expect(readFile(path.join(p, 'from-chroot'), 'utf8')).resolves.toBe('');
    });
    const log = await readFile(path.join(t.stateDir, `${path.basename(t.disk)}.install.log`), 'utf8');
    expect(log).toContain('said <redacted>');
    expect(log).not.toContain('integration-secret-token');
    expect(await mountsUnderRunDir(t.disk)).toEqual([]);
  });

  it('a failing command fails the install, named with its exit status; earlier output logged, no mount left', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, ['echo first-ran', 'echo about to fail >&2; exit 7', 'touch /etc/never']);
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir, ['--bundle', 'none']));
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('install failed in step chroot');
    expect(r.stderr).toContain('after-install-chroot command 2 of 3 (echo about to fail >&2; exit 7) failed with exit status 7');
    expect(r.stderr).toContain('about to fail');
    const journal = JSON.parse(await readFile(path.join(t.stateDir, `${path.basename(t.disk)}.journal.json`), 'utf8'));
    expect(journal.steps.find((s: { name: string }) => s.name === 'chroot').status).toBe('failed');
    expect(journal.status).toBe('invalidated');
    const log = await readFile(path.join(t.stateDir, `${path.basename(t.disk)}.install.log`), 'utf8');
    expect(log).toContain('first-ran');
    expect(await mountsUnderRunDir(t.disk)).toEqual([]);
  });

  it('a tree without /bin/sh: refused before any command runs, with what to do', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, ['touch /etc/never'], { noShell: true });
    // No agent: an image without a shell is refused by the agent step's image check before the disk, and this test is about the chroot step.
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir, ['--bundle', 'none', '--agent', 'none', '--preserve-on-error']));
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('the installed system has no working /bin/sh');
    expect(r.stderr).toContain('install from an image with a shell at /bin/sh');
    await withMount(partOf(t.plan, t.disk, 'COS_STATE'), t.dir, async (state) => {
      await withMount(path.join(state, 'cOS/active.img'), t.dir, async (root) => {
        await expect(readFile(path.join(root, 'etc/never'))).rejects.toThrow(/ENOENT/);
      });
    });
    expect(await mountsUnderRunDir(t.disk)).toEqual([]);
  });
});
