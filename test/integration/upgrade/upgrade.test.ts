/**
 * `hvinstall upgrade --device` on a loop-attached node disk (the install's deploy and boot
 * assessment on real ext4 partitions), run as the built CLI: the A/B switch, labels, state.yaml
 * digests (checked with the coreutils one-liner, not our code), the armed assessment, refusals
 * that change nothing, and a kill in the middle of the switch followed by a re-run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { deployImages } from '../../../installer/deploy/index.js';
import { renderDebugGrubcustom, writeBootAssessment, writeGrubenv } from '../../../installer/bootloader/index.js';
import { harvesterParts, makeLoopDisk, type LoopDisk } from '../deploy/loop-disk.js';

const CLI = path.resolve(__dirname, '../../../dist/installer/cli.js');
const GRUB_CFG = path.resolve(__dirname, '../../../iso-build/systemd-os/files/grub.cfg');
let scratch: string;
const disks: LoopDisk[] = [];

async function tree(version: string): Promise<string> {
  const dir = path.join(scratch, `tree-${version}`);
  await mkdir(path.join(dir, 'etc'), { recursive: true });
  await writeFile(path.join(dir, 'etc/os-release'), `NAME="upgrade test"\nPRETTY_NAME="upgrade test ${version}"\nIMAGE_VERSION=${version}\n`);
  await writeFile(path.join(dir, 'marker'), `image ${version}\n`);
  return dir;
}

/** A node disk as the install leaves it: v1 deployed, Elemental's grub.cfg, boot assessment armed-ready. */
async function installedNode(): Promise<LoopDisk> {
  const d = await makeLoopDisk(harvesterParts({ stateMiB: 400, recoveryMiB: 128 }));
  disks.push(d);
  const stateDir = d.byLabel('COS_STATE').mountpoint!;
  await deployImages({ stateDir, recoveryDir: d.byLabel('COS_RECOVERY').mountpoint!, source: { kind: 'dir', path: await tree('v1') }, systemSizeMiB: 64, workDir: path.join(d.dir, 'work') });
  await mkdir(path.join(stateDir, 'grub2'), { recursive: true });
  await writeFile(path.join(stateDir, 'grub2/grub.cfg'), await readFile(GRUB_CFG));
  await writeBootAssessment(stateDir, writeGrubenv, renderDebugGrubcustom());
  return d;
}

const upgrade = (d: LoopDisk, version: string, extra: string[] = [], env: Record<string, string> = {}) =>
  execa('node', [CLI, 'upgrade', '--device', d.device, '--source', path.join(scratch, `tree-${version}`), '--system-size', '64', '--run-dir', path.join(d.dir, 'run'), ...extra], { reject: false, env });

const imageFile = (d: LoopDisk, f: string): string => path.join(d.byLabel('COS_STATE').mountpoint!, 'cOS', f);
const marker = async (file: string): Promise<string> => (await execa('debugfs', ['-R', 'cat /marker', file], { stderr: 'ignore' })).stdout.trim();
const label = async (file: string): Promise<string> => (await execa('blkid', ['-p', '-o', 'value', '-s', 'LABEL', file])).stdout.trim();
/** The digest state.yaml promises, computed as docs/deploy.md tells operators to. */
const onelinerDigest = async (file: string): Promise<string> =>
  `sha256-4m:${(await execa('sh', ['-c', `split -b 4194304 --filter='sha256sum | cut -c1-64' "$1" | sha256sum | cut -c1-64`, 'sh', file])).stdout.trim()}`;
const assessmentEnv = async (d: LoopDisk): Promise<string> => (await execa('grub-editenv', [path.join(d.byLabel('COS_STATE').mountpoint!, 'hv_assessment'), 'list'])).stdout;
const stateText = (d: LoopDisk, label: 'COS_STATE' | 'COS_RECOVERY'): Promise<string> => readFile(path.join(d.byLabel(label).mountpoint!, 'state.yaml'), 'utf8');
const stateYaml = async (d: LoopDisk) => parse(await readFile(path.join(d.byLabel('COS_STATE').mountpoint!, 'state.yaml'), 'utf8')) as { state: Record<string, { digest: string; label: string; file: string }> };

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'hv-upgrade-'));
  for (const v of ['v1', 'v2', 'v3']) await tree(v);
});
afterAll(async () => {
  for (const d of disks) await d.cleanup();
  await rm(scratch, { recursive: true, force: true });
});

describe('hvinstall upgrade on a node disk', () => {
  let d: LoopDisk;
  it('moves the running image to passive.img and the new one to active.img, labels, digests and state.yaml right, armed', async () => {
    d = await installedNode();
    const installedState = await stateText(d, 'COS_STATE');
    const dry = await upgrade(d, 'v2', ['--dry-run']);
    expect(dry.exitCode, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/1\. build: .*2\. switch: .*3\. arm: arm boot assessment/s);
    expect(await marker(imageFile(d, 'active.img'))).toBe('image v1');
    const r = await upgrade(d, 'v2', ['--yes']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain('upgrade test v2');
    expect(await marker(imageFile(d, 'active.img'))).toBe('image v2');
    expect(await label(imageFile(d, 'active.img'))).toBe('COS_ACTIVE');
    expect(await marker(imageFile(d, 'passive.img'))).toBe('image v1');
    expect(await label(imageFile(d, 'passive.img'))).toBe('COS_PASSIVE');
    const st = await stateYaml(d);
    expect(st.state.active!.digest).toBe(await onelinerDigest(imageFile(d, 'active.img')));
    expect(st.state.passive!.digest).toBe(await onelinerDigest(imageFile(d, 'passive.img')));
    // Elemental writes the same state.yaml on COS_RECOVERY: the copy follows, byte for byte.
    expect(await stateText(d, 'COS_STATE')).not.toBe(installedState);
    expect(await stateText(d, 'COS_RECOVERY')).toBe(await stateText(d, 'COS_STATE'));
    expect(parse(await stateText(d, 'COS_RECOVERY')).state.passive.digest).toBe(st.state.passive!.digest);
    expect(await assessmentEnv(d)).toContain('hv_assessment_state=armed');
    const record = JSON.parse(await readFile(path.join(d.byLabel('COS_OEM').mountpoint!, 'hvinstall/upgrade.json'), 'utf8'));
    expect(record.to.name).toContain('v2');
    expect(record.armed).toBe(true);
  });

  it('refuses a second upgrade before the armed one was booted, changing nothing', async () => {
    const before = await onelinerDigest(imageFile(d, 'passive.img'));
    const r = await upgrade(d, 'v3', ['--yes']);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toMatch(/has not been booted yet/);
    expect(await onelinerDigest(imageFile(d, 'passive.img'))).toBe(before);
    expect(await marker(imageFile(d, 'active.img'))).toBe('image v2');
  });

  it('refuses without --yes', async () => {
    const r = await upgrade(d, 'v3');
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/pass --yes/);
  });
});

describe('hvinstall upgrade killed in the middle of the switch, then run again', () => {
  it('ends with the new image active and the previous one passive, never the new one twice', async () => {
    const d = await installedNode();
    const killed = await upgrade(d, 'v2', ['--yes'], { HVINSTALL_TEST_SIGKILL_AT: 'upgrade:after-move-active' });
    expect(killed.signal).toBe('SIGKILL');
    const again = await upgrade(d, 'v2', ['--yes']);
    expect(again.exitCode, again.stderr).toBe(0);
    expect(again.stderr).toMatch(/build: kept/);
    expect(await marker(imageFile(d, 'active.img'))).toBe('image v2');
    expect(await marker(imageFile(d, 'passive.img'))).toBe('image v1');
    expect(await label(imageFile(d, 'passive.img'))).toBe('COS_PASSIVE');
    expect((await stateYaml(d)).state.passive!.digest).toBe(await onelinerDigest(imageFile(d, 'passive.img')));
    expect(await stateText(d, 'COS_RECOVERY')).toBe(await stateText(d, 'COS_STATE'));
  });
});
