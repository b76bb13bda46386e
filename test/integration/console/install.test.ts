/**
 * hvinstall console driving real installs (root): a loop device chosen on the disk page, the
 * confirmation as the consent, the install pipeline with its steps on screen, then the disk checked
 * from the outside. A dry run touches no disk; a failed install shows its error, the journal and how
 * to resume, and Retry resumes it from the journal. reboot and poweroff are stubs first on PATH,
 * and --no-reboot is given, so nothing here can restart this machine.
 *
 * This machine boots legacy BIOS, which Harvester (and so the console's hardware checks) refuses
 * outright. Each console runs in a mount namespace of its own in which /sys/firmware/efi exists, so
 * it sees the UEFI machine the install is laid out for (as the force_efi installs of
 * test/integration/install do); nothing outside that namespace changes.
 */
import { chmod, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { Cleanup, buildSmallOsTree, loopDisk, partitionNode, probe, sh, tempDir, withMount, TEST_SYSTEM_SIZE_MIB } from '../install/helpers.js';
import { CLI, KEYS, Session } from '../../unit/console/session.js';
import { fill, ntpResponder, TITLES } from '../../unit/console/walk.js';

const cleanup = new Cleanup();
afterAll(() => cleanup.run());

let dir: string;
let source: string;
let stubs: string;
let sessions: Session[] = [];
afterAll(() => sessions.forEach((x) => x.kill()));

beforeAll(async () => {
  dir = await tempDir(cleanup, 'hvconsole-it-');
  source = await buildSmallOsTree(dir);
  stubs = path.join(dir, 'stubs');
  await mkdir(stubs);
  for (const cmd of ['reboot', 'poweroff', 'halt']) {
    await writeFile(path.join(stubs, cmd), `#!/bin/sh\necho "$0 $*" >> '${dir}/power-actions'\nexit 0\n`);
    await chmod(path.join(stubs, cmd), 0o755);
  }
}, 300_000);

interface Run {
  s: Session;
  configFile: string;
  stateDir: string;
  log: string;
}

function startConsole(name: string, extra: string[] = [], env: Record<string, string> = {}): Run {
  const configFile = path.join(dir, `${name}.config.yaml`);
  const stateDir = path.join(dir, `${name}.state`);
  const uefi = "mount -t tmpfs -o mode=755 hv-test-uefi /sys/firmware && mkdir /sys/firmware/efi && exec \"$0\" \"$@\"";
  const s = new Session('unshare', ['--mount', '--propagation', 'slave', 'sh', '-c', uefi, process.execPath, CLI, 'console',
    '--write-config', configFile, '--log', path.join(dir, `${name}.log`), '--cmdline-file', '/dev/null', '--source', source, '--bundle', 'none', '--state-dir', stateDir,
      '--system-size', String(TEST_SYSTEM_SIZE_MIB), '--no-reboot', ...extra],
    { env: { PATH: `${env.PATH ?? ''}${env.PATH ? ':' : ''}${stubs}:${process.env.PATH}`, ...Object.fromEntries(Object.entries(env).filter(([k]) => k !== 'PATH')) } },
  );
  sessions.push(s);
  return { s, configFile, stateDir, log: path.join(dir, `${name}.log`) };
}

/** Puts the highlight of the focused disk list on exactly `disk` (other disks on this machine are never chosen). */
async function chooseDisk(s: Session, disk: string): Promise<void> {
  await s.keys('\x1b[H'); // Home: the first entry
  for (let i = 0; i < 64; i++) {
    if (s.highlighted().some((h) => h === disk)) return;
    await s.keys(KEYS.down);
  }
  throw new Error(`${disk} is not on the disk page:\n${s.screen()}`);
}

/** From the start to the confirmation: create mode, `disk`, a static address (no DHCP from this machine), a static VIP. */
async function walkTo({ s, log }: Run, disk: string, ntp: string): Promise<string> {
  try {
    return await walk(s, disk, ntp);
  } catch (err) {
    // What the console logged (its key handling, checks, errors the screen flashed and dropped).
    const tail = (await readFile(log, 'utf8').catch(() => '')).split('\n').slice(-25).join('\n');
    throw new Error(`${(err as Error).message}\nthe console's log, last lines:\n${tail}`);
  }
}

async function walk(s: Session, disk: string, ntp: string): Promise<string> {
  await s.page(TITLES.hardware); // this machine has 2 CPUs and no KVM
  await s.waitForText('Do you wish to proceed?');
  await s.keys(KEYS.enter);
  await s.page(TITLES.mode);
  await s.keys(KEYS.enter);
  await fill(s, 'Passw0rd!');
  await fill(s, 'Passw0rd!');
  await s.page(TITLES.disk);
  await chooseDisk(s, disk);
  await s.keys(KEYS.enter);
  // The focus moves to the data disk list where other disks could be one (drawn open, with its
  // marks), else to the persistent size (its note shows): waited for, as a loaded host may draw the
  // page after the key's settle, and a screen read once then decided wrongly (the size typed into the list).
  const persistentFocused = /^ Note: persistent partition/m;
  const after = await s.waitFor(new RegExp(`\\(\\*\\) Use the installation disk|${persistentFocused.source}`, 'm'));
  if (!persistentFocused.test(after)) {
    await s.keys('\x1b[H', KEYS.enter); // "Use the installation disk"
    await s.waitFor(persistentFocused);
  }
  await fill(s, '150Gi');
  // Where other disks on this machine carry an install (other files' loop devices), the wipe list
  // takes the focus (its note shows only then, and not when the list runs past the screen: then the
  // highlight on one of its boxes says it); a loaded host may draw it after the keys' settle.
  const next = await s.waitFor(new RegExp(`Space ticks a disk to wipe|^ > \\[[ x]\\] |^ ${TITLES.network}`, 'm'));
  if (!new RegExp(`^ ${TITLES.network}`, 'm').test(next)) await s.keys(KEYS.enter); // nothing ticked: other disks are left alone
  await s.page(TITLES.network);
  await s.keys(KEYS.enter, KEYS.enter, KEYS.enter, KEYS.down, KEYS.enter);
  await fill(s, '10.0.2.15/24');
  await s.keys(KEYS.enter); // the mask came from the /24
  await fill(s, '10.0.2.2');
  await fill(s, '');
  await s.page(TITLES.clusterNetwork);
  await s.keys(KEYS.enter, KEYS.enter, KEYS.enter);
  await fill(s, 'console-node');
  await fill(s, '10.0.2.3');
  await s.page(TITLES.vip);
  await s.keys(KEYS.down, KEYS.enter);
  await fill(s, '10.0.2.100');
  await fill(s, 'console-cluster-token');
  await fill(s, ntp);
  await fill(s, '');
  await fill(s, '');
  await fill(s, '');
  await s.page(TITLES.summary);
  await s.waitForText('Continue?');
  return s.scrolledText();
}

async function allocatedBlocks(file: string): Promise<number> {
  return (await stat(file)).blocks;
}

describe('hvinstall console installs (root, loop devices)', () => {
  it('--dry-run writes the config and touches no disk', async () => {
    const ntp = await ntpResponder();
    const disk = await loopDisk(cleanup, dir, 'dry', 260);
    const backing = path.join(dir, 'dry.raw');
    const r = startConsole('dry', ['--dry-run']);
    try {
      const summary = await walkTo(r, disk, ntp.address);
      expect(summary).toContain(`install disk: ${disk}`);
      await r.s.keys(KEYS.down, KEYS.up, KEYS.enter);
      await r.s.page('Dry run complete');
      await r.s.keys(KEYS.enter);
      expect(await r.s.exit()).toBe(0);
    } finally {
      ntp.close();
    }
    expect(parse(await readFile(r.configFile, 'utf8')).install.device).toBe(disk);
    expect(await allocatedBlocks(backing)).toBe(0);
    expect((await sh('blkid', ['-p', disk], { allowFailure: true })).stdout).toBe('');
  }, 180_000);

  it('installs onto the disk chosen on the disk page, with the config it confirmed, and does not reboot', async () => {
    const ntp = await ntpResponder();
    const disk = await loopDisk(cleanup, dir, 'target', 260);
    const r = startConsole('ok');
    try {
      const summary = await walkTo(r, disk, ntp.address);
      const destroyed = summary.slice(summary.indexOf('DESTROYED:'), summary.indexOf('note(s)') > 0 ? summary.indexOf('note(s)') : undefined);
      expect(destroyed).toContain(disk);
      expect(destroyed.match(/ - \//g)).toHaveLength(1); // one disk, ours
      await r.s.keys(KEYS.down, KEYS.up, KEYS.enter);
      await r.s.page('Installing Harvester');
      await r.s.waitForText('[done] guard', 60_000);
      const done = await r.s.waitForText(`Harvester was installed on ${disk}`, 600_000);
      expect(done).toContain('Not rebooting (--no-reboot).');
      await r.s.keys(KEYS.enter);
      expect(await r.s.exit()).toBe(0);
    } finally {
      ntp.close();
    }
    for (const [n, label] of [[2, 'COS_OEM'], [3, 'COS_RECOVERY'], [4, 'COS_STATE'], [5, 'COS_PERSISTENT'], [6, 'HARV_LH_DEFAULT']] as const) {
      expect((await probe(partitionNode(disk, n))).LABEL).toBe(label);
    }
    const written = parse(await readFile(r.configFile, 'utf8'));
    // What the node got is what the console wrote: the same password hash (random salt) on COS_OEM.
    const installed = await withMount(partitionNode(disk, 2), dir, (m) => readFile(path.join(m, 'harvester.config'), 'utf8'));
    expect(installed).toContain(written.os.password);
    expect(installed).toContain('console-node');
    expect(await readFile(path.join(dir, 'power-actions'), 'utf8').catch(() => '')).toBe('');
  }, 900_000);

  it('a failed install shows the error, the journal and how to resume; Retry resumes it from the journal', async () => {
    const ntp = await ntpResponder();
    const disk = await loopDisk(cleanup, dir, 'resume', 260);
    // A test double of mkfs.ext4, first on PATH: fails for COS_STATE while the flag file exists.
    const fakeBin = path.join(dir, 'fakebin');
    const flag = path.join(dir, 'fail-mkfs');
    await mkdir(fakeBin, { recursive: true });
    const realMkfs = (await sh('sh', ['-c', 'command -v mkfs.ext4'])).stdout.trim();
    await writeFile(path.join(fakeBin, 'mkfs.ext4'), `#!/bin/sh\nif [ -e '${flag}' ]; then case " $* " in *" COS_STATE "*) echo "injected mkfs failure for test" >&2; exit 1;; esac; fi\nexec ${realMkfs} "$@"\n`);
    await chmod(path.join(fakeBin, 'mkfs.ext4'), 0o755);
    await writeFile(flag, '');
    const r = startConsole('resume', [], { PATH: fakeBin });
    try {
      await walkTo(r, disk, ntp.address);
      await r.s.keys(KEYS.down, KEYS.up, KEYS.enter);
      await r.s.waitForText('** Installation Failed **', 600_000);
      expect(r.s.flat()).toContain('[ Retry ] [ Quit to a shell ]'); // the choices are in view with the error
      const failed = await r.s.scrolledText();
      expect(failed).toContain('The install failed in step format.');
      expect(failed).toContain('injected mkfs failure for test');
      expect(failed).toContain(`journal: ${path.join(r.stateDir, `${path.basename(disk)}.journal.json`)} (invalidated)`);
      expect(failed).toContain('steps: guard done, clear done, partition done, format FAILED');
      expect(failed).toContain('To resume: fix the cause, then choose Retry');
      expect(failed).toContain(`From a shell: hvinstall install --config ${r.configFile}`);
      await rm(flag);
      await r.s.keys(KEYS.enter); // Retry
      const done = await r.s.waitForText(`Harvester was installed on ${disk} (resumed from the journal)`, 600_000);
      expect(done).toContain('Not rebooting (--no-reboot).');
      await r.s.keys(KEYS.enter);
      expect(await r.s.exit()).toBe(0);
    } finally {
      ntp.close();
    }
    const journal = JSON.parse(await readFile(path.join(r.stateDir, `${path.basename(disk)}.journal.json`), 'utf8'));
    expect(journal.status).toBe('succeeded');
    expect(journal.runs).toBe(2);
    const attempts = Object.fromEntries(journal.steps.map((x: { name: string; attempts: number }) => [x.name, x.attempts]));
    expect(attempts).toMatchObject({ clear: 1, partition: 1, format: 2 });
    expect((await probe(partitionNode(disk, 4))).LABEL).toBe('COS_STATE');
  }, 900_000);
});
