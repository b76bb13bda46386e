/**
 * The agent step on real loop devices (root), with the payload `make build` wrote: the agent and its
 * enable link land on COS_PERSISTENT; the installed launcher runs in a chroot that holds nothing but
 * that COS_PERSISTENT at /usr/local (and /proc); systemd-analyze verifies both installed units
 * (hvagent.service and the status screen's hvagent-console.service, each linked and enabled); a kill
 * in the middle of the agent copy, resumed, gives the same files as an uninterrupted install; a full
 * COS_PERSISTENT, ENOSPC in the middle of the copy, an image carrying its own hvagent.service or
 * hvagent-console.service and an image without systemd are refused with nothing enabled.
 *
 * The source trees are the small busybox test OS plus this host's real systemd binary at
 * /usr/lib/systemd/systemd: the install only looks for it (and reads its ELF header), it never runs it.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { copyFile, lstat, mkdir, readFile, readlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { readPayloadManifest, releaseId, type PayloadManifest } from '../../../node/payload-layout.js';
import { deployAgent } from '../../../installer/steps/agent-deploy.js';
import { DEFAULT_PERSISTENT_STATE_PATHS } from '../../../installer/disk/plan.js';
import { Cleanup, REPO, buildSmallOsTree, configYaml, events, hvinstall, installArgs, loopDisk, partitionNode, probe, sh, tempDir, treeManifest, withMount } from './helpers.js';

const PAYLOAD = path.join(REPO, 'build/hvagent-payload');
const cleanup = new Cleanup();
afterEach(() => cleanup.run());
afterAll(() => cleanup.run());

let manifest: PayloadManifest;
beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error('integration tests need root');
  manifest = await readPayloadManifest(PAYLOAD);
});

/** The small test OS with a systemd binary where Elemental images have it. */
async function systemdShapedTree(dir: string): Promise<string> {
  const tree = await buildSmallOsTree(dir);
  await mkdir(path.join(tree, 'usr/lib/systemd/system'), { recursive: true });
  await copyFile('/usr/lib/systemd/systemd', path.join(tree, 'usr/lib/systemd/systemd'));
  return tree;
}

async function setup(opts: { tree?: (dir: string) => Promise<string> } = {}) {
  const dir = await tempDir(cleanup);
  const disk = await loopDisk(cleanup, dir, 'target', 260);
  const source = await (opts.tree ?? systemdShapedTree)(dir);
  const configFile = path.join(dir, 'config.yaml');
  await writeFile(configFile, configYaml({ device: disk, forceEfi: true }));
  return { dir, disk, source, configFile, stateDir: path.join(dir, 'state') };
}

/** COS_PERSISTENT is the sixth partition of an EFI layout (COS_GRUB, COS_OEM, COS_RECOVERY, COS_STATE, COS_PERSISTENT, …): found by label. */
async function persistentDev(disk: string): Promise<string> {
  for (let n = 1; n <= 8; n++) {
    const dev = partitionNode(disk, n);
    if ((await probe(dev)).LABEL === 'COS_PERSISTENT') return dev;
  }
  throw new Error(`no COS_PERSISTENT on ${disk}`);
}

/** No NODE_* or other variable of this machine reaches the chrooted agent. */
const CLEAN_ENV = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' };

/** A SIGKILLed install leaves its mounts (the next run releases them); the test looks at the disk itself. */
async function releaseKilledMounts(disk: string): Promise<void> {
  const run = `/run/hvinstall/${path.basename(disk)}`;
  const mounts = (await readFile('/proc/self/mounts', 'utf8')).split('\n').map((l) => l.split(' ')[1] ?? '').filter((m) => m.startsWith(`${run}/`));
  for (const m of mounts.sort().reverse()) await sh('umount', [m]);
}

const absent = async (p: string): Promise<boolean> => !(await lstat(p).catch(() => undefined));
const UNIT_LINK = '.state/etc-systemd.bind/system/hvagent.service';
const WANTS_LINK = '.state/etc-systemd.bind/system/multi-user.target.wants/hvagent.service';
const CONSOLE_LINK = '.state/etc-systemd.bind/system/hvagent-console.service';
const CONSOLE_WANTS_LINK = '.state/etc-systemd.bind/system/multi-user.target.wants/hvagent-console.service';

describe('the agent step', () => {
  it('puts a self-contained, enabled hvagent on COS_PERSISTENT: it runs in a chroot of COS_PERSISTENT alone, and both its units (the agent, the status screen) verify', async () => {
    const t = await setup();
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir, ['--bundle', 'none']));
    expect(r.code, r.stderr).toBe(0);
    const ev = events(r.stdout);
    expect(ev.filter((e) => e.type === 'step' && e.phase === 'done').map((e) => e.step)).toContain('agent');
    expect(ev.find((e) => e.type === 'message' && e.step === 'agent')?.message).toMatch(new RegExp(`hvagent 0\\.1\\.0 \\(${releaseId(manifest)}, node v20\\.[0-9.]+, x86_64\\) from the installer .*: 12 files, \\d+ MiB: at COS_PERSISTENT/lib/hvagent/releases/${releaseId(manifest)} \\(\\d+ MiB written\\), enabled as hvagent.service and hvagent-console.service`));

    const dev = await persistentDev(t.disk);
    const root = path.join(t.dir, 'chroot');
    await mkdir(path.join(root, 'usr/local'), { recursive: true });
    await sh('mount', ['-o', 'ro', dev, path.join(root, 'usr/local')]);
    cleanup.add(() => sh('umount', ['-l', path.join(root, 'usr/local')], { allowFailure: true }));
    const local = path.join(root, 'usr/local');
    expect(await readlink(path.join(local, 'lib/hvagent/current'))).toBe(`releases/${releaseId(manifest)}`);
    expect(await readlink(path.join(local, 'bin/hvagent'))).toBe('../lib/hvagent/current/bin/hvagent');
    expect(await readlink(path.join(local, UNIT_LINK))).toBe('/usr/local/lib/hvagent/current/hvagent.service');
    expect(await readlink(path.join(local, WANTS_LINK))).toBe('/etc/systemd/system/hvagent.service');
    expect(await readlink(path.join(local, CONSOLE_LINK))).toBe('/usr/local/lib/hvagent/current/hvagent-console.service');
    expect(await readlink(path.join(local, CONSOLE_WANTS_LINK))).toBe('/etc/systemd/system/hvagent-console.service');
    // hvagent(1), which both units name as Documentation=, and the bash completion, where man and bash-completion look.
    expect(await readlink(path.join(local, 'share/man/man1/hvagent.1'))).toBe('../../../lib/hvagent/current/share/man/man1/hvagent.1');
    expect(await readFile(path.join(local, 'share/man/man1/hvagent.1'), 'utf8')).toMatch(/^\.TH HVAGENT 1 /m);
    expect(await readFile(path.join(local, 'share/bash-completion/completions/hvagent'), 'utf8')).toContain('hvagent');
    // The installed files are the payload's, byte for byte.
    const installed = await treeManifest(path.join(local, `lib/hvagent/releases/${releaseId(manifest)}`));
    expect(installed).toEqual(await treeManifest(PAYLOAD));

    // Nothing but COS_PERSISTENT at /usr/local, /proc, and the status document the agent would read.
    await mkdir(path.join(root, 'proc'));
    await sh('mount', ['-t', 'proc', 'proc', path.join(root, 'proc')]);
    cleanup.add(() => sh('umount', ['-l', path.join(root, 'proc')], { allowFailure: true }));
    const help = await sh('chroot', [root, '/usr/local/bin/hvagent', 'run', '--help'], { env: CLEAN_ENV });
    expect(help.stdout).toContain('usage: hvagent run [--guard NAME]...');
    // The payload is built from this tree: every guard, the clock and identity ones included.
    expect(help.stdout).toContain('guards: network-online, node-identity, time-sync, certificates, registries, image-preload, rke2, vip, longhorn-disk, promotion');
    const none = await sh('chroot', [root, '/usr/local/bin/hvagent', 'status'], { env: CLEAN_ENV, allowFailure: true });
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('hvagent: error: no status document at /run/hvagent/status.json');
    await mkdir(path.join(root, 'run/hvagent'), { recursive: true });
    const doc = { version: 1, pid: 999999, startedAt: '2024-01-01T00:00:00.000Z', updatedAt: '2024-01-01T00:00:01.000Z', mode: 'run', state: 'running', bootstrap: { by: 'rancherd', why: 'the image carries rancherd' }, guards: [{ name: 'registries', phase: 'watching', attempts: 1, detail: 'no mirrors', updatedAt: '2024-01-01T00:00:01.000Z' }] };
    await writeFile(path.join(root, 'run/hvagent/status.json'), JSON.stringify(doc));
    const st = await sh('chroot', [root, '/usr/local/bin/hvagent', 'status'], { env: CLEAN_ENV });
    expect(st.stdout).toContain('hvagent run: not running (pid 999999 is gone)');
    expect(st.stdout).toContain('bootstrap: rancherd (hvagent prepares the node, then watches rke2, vip and promotion): the image carries rancherd');
    expect(st.stdout).toMatch(/registries\s+watching\s+1/);

    // systemd-analyze verify of the units as the node sees them: the /etc links into /usr/local, with
    // COS_PERSISTENT at /usr/local in a mount namespace of its own (the host's /usr/local untouched).
    for (const link of [UNIT_LINK, CONSOLE_LINK]) {
      const verify = await sh('unshare', ['--mount', '--propagation', 'slave', 'sh', '-c', `mount --bind '${local}' /usr/local && systemd-analyze verify '${path.join(local, link)}'`], { allowFailure: true });
      expect({ link, code: verify.code, out: verify.stdout + verify.stderr }).toEqual({ link, code: 0, out: '' });
    }
  });

  it('a kill in the middle of the agent copy leaves nothing enabled; the resumed install has the same files as an uninterrupted one', async () => {
    const a = await setup();
    const killed = await hvinstall(installArgs(a.configFile, a.source, a.stateDir, ['--bundle', 'none']), { HVINSTALL_TEST_SIGKILL_AT: 'agent-bytes:41943040' });
    expect(killed.signal).toBe('SIGKILL');
    await releaseKilledMounts(a.disk);
    const devA = await persistentDev(a.disk);
    await withMount(devA, a.dir, async (m) => {
      for (const link of [WANTS_LINK, UNIT_LINK, CONSOLE_WANTS_LINK, CONSOLE_LINK]) expect(await absent(path.join(m, link)), link).toBe(true);
      expect(await absent(path.join(m, 'lib/hvagent/current'))).toBe(true);
      expect(await absent(path.join(m, `lib/hvagent/.staging/${releaseId(manifest)}`))).toBe(false);
    });
    const resumed = await hvinstall(installArgs(a.configFile, a.source, a.stateDir, ['--bundle', 'none']));
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toContain('"phase":"resumed"');

    const b = await setup();
    const straight = await hvinstall(installArgs(b.configFile, b.source, b.stateDir, ['--bundle', 'none']));
    expect(straight.code, straight.stderr).toBe(0);
    // File by file (mode, size, sha256, link targets) everywhere on COS_PERSISTENT.
    const files = async (dev: string, dir: string) => withMount(dev, dir, (m) => treeManifest(m, (rel) => rel === 'lost+found'));
    const fa = await files(devA, a.dir);
    expect(Object.keys(fa)).toEqual(expect.arrayContaining([`lib/hvagent/releases/${releaseId(manifest)}/bin/hvagent`, CONSOLE_WANTS_LINK]));
    expect(Object.keys(fa).some((k) => k.includes('.staging') || k.endsWith('tmp'))).toBe(false);
    expect(fa).toEqual(await files(await persistentDev(b.disk), b.dir));
  });

  it('a full COS_PERSISTENT: refused before writing, with a clear message, nothing enabled', async () => {
    const t = await setup();
    const first = await hvinstall(installArgs(t.configFile, t.source, t.stateDir, ['--bundle', 'none']), { HVINSTALL_TEST_SIGKILL_AT: 'before:agent' });
    expect(first.signal).toBe('SIGKILL');
    await releaseKilledMounts(t.disk);
    const dev = await persistentDev(t.disk);
    await withMount(
      dev,
      t.dir,
      async (m) => {
        const free = Number((await sh('df', ['--output=avail', '-B1', m])).stdout.split('\n')[1]);
        await sh('fallocate', ['-l', String(free - 80 * 1024 * 1024), path.join(m, 'filler')]);
      },
      'rw',
    );
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir, ['--bundle', 'none', '--preserve-on-error']));
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('install failed in step agent');
    expect(r.stderr).toMatch(/hvagent does not fit on COS_PERSISTENT: \d+ MiB to write \(12 files\) plus 64 MiB headroom, \d+ MiB free; nothing was enabled/);
    expect(r.stderr).toContain('install.persistent_partition_size');
    await withMount(dev, t.dir, async (m) => {
      expect(await absent(path.join(m, WANTS_LINK))).toBe(true);
      expect(await absent(path.join(m, CONSOLE_WANTS_LINK))).toBe(true);
      expect(await absent(path.join(m, 'lib/hvagent'))).toBe(true);
    });
  });

  it('ENOSPC in the middle of the copy: the partial copy is removed and nothing is enabled', async () => {
    const dir = await tempDir(cleanup);
    const small = path.join(dir, 'persistent');
    await mkdir(small);
    await sh('mount', ['-t', 'tmpfs', '-o', 'size=40m', 'tmpfs', small]);
    cleanup.add(() => sh('umount', ['-l', small], { allowFailure: true }));
    // The free-space check is told there is room, as if another writer filled the disk after it.
    const lying = async () => ({ bsize: 4096, bavail: 1 << 30 });
    await expect(deployAgent(small, PAYLOAD, manifest, DEFAULT_PERSISTENT_STATE_PATHS, { statfs: lying })).rejects.toMatchObject({
      message: expect.stringMatching(/^COS_PERSISTENT filled up while hvagent [0-9a-f]{16} was being copied \(\d+ MiB\); the partial copy was removed and nothing was enabled$/),
      exitCode: 3,
    });
    expect(await absent(path.join(small, WANTS_LINK))).toBe(true);
    expect(await absent(path.join(small, CONSOLE_WANTS_LINK))).toBe(true);
    expect(await absent(path.join(small, `lib/hvagent/.staging/${releaseId(manifest)}`))).toBe(true);
    expect(Number((await sh('df', ['--output=used', '-B1', small])).stdout.split('\n')[1])).toBeLessThan(1024 * 1024);
  });

  it('an image that carries its own hvagent.service or hvagent-console.service, or one without systemd given --agent, is refused before any disk is touched', async () => {
    const t = await setup({
      tree: async (dir) => {
        const tree = await systemdShapedTree(dir);
        await mkdir(path.join(tree, 'etc/systemd/system'), { recursive: true });
        await writeFile(path.join(tree, 'etc/systemd/system/hvagent.service'), '[Service]\nExecStart=/usr/bin/hvagent\n');
        return tree;
      },
    });
    const r = await hvinstall(installArgs(t.configFile, t.source, t.stateDir, ['--bundle', 'none']));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`the image ${t.source} already carries /etc/systemd/system/hvagent.service: Elemental copies it over the persistent /etc/systemd at every boot, replacing the installer's`);
    expect(r.stderr).toContain('--agent none');

    // The status screen's unit under the same name in the image's own units: shadowed, refused.
    await mkdir(path.join(t.source, 'usr/lib/systemd/system'), { recursive: true });
    await writeFile(path.join(t.source, 'usr/lib/systemd/system/hvagent-console.service'), '[Service]\nExecStart=/usr/bin/agetty tty1\n');
    const rc = await hvinstall(installArgs(t.configFile, t.source, t.stateDir, ['--bundle', 'none']));
    expect(rc.code).toBe(1);
    expect(rc.stderr).toContain(`the image ${t.source} already carries /usr/lib/systemd/system/hvagent-console.service: a unit of the same name that the installer's would shadow`);

    const plain = await buildSmallOsTree(path.join(t.dir, 'plain'));
    const r2 = await hvinstall(installArgs(t.configFile, plain, t.stateDir, ['--bundle', 'none', '--agent', PAYLOAD]));
    expect(r2.code).toBe(1);
    expect(r2.stderr).toContain("has no systemd (/usr/lib/systemd/systemd, /lib/systemd/systemd): nothing would start hvagent's unit");
    // A fresh sparse disk: still no partition table, not a byte written in its first MiB.
    expect((await probe(t.disk)).PTTYPE).toBeUndefined();
    expect((await sh('sh', ['-c', `head -c 1048576 ${t.disk} | tr -d '\\0' | wc -c`])).stdout.trim()).toBe('0');
    expect(await readFile(path.join(t.source, 'etc/systemd/system/hvagent.service'), 'utf8')).toContain('/usr/bin/hvagent');
  });
});
