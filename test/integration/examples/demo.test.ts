/**
 * `make demo` (examples/demo.sh) as the README promises it: an install onto a sparse 260 GiB disk
 * through a loop device, the layout and the files shown, the device detached. It broke once unseen
 * (the hardware gate judged this small VM and refused): nothing else runs it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const NOBODY = '65534';
let dir: string;

/** Loop devices still backed by a file under `dir` (`losetup -j` wants the exact file). */
function attachedTo(file: string): string[] {
  return execFileSync('losetup', ['-j', file], { encoding: 'utf8' }).split('\n').filter(Boolean);
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-demo-'));
});

afterAll(async () => {
  // The script detaches in its EXIT trap; should it not have, the device must not outlive the test.
  for (const line of attachedTo(path.join(dir, 'out', 'disk.raw'))) spawnSync('losetup', ['-d', line.split(':')[0]!]);
  await rm(dir, { recursive: true, force: true });
});

describe('make demo (examples/demo.sh)', () => {
  it('installs onto a loop device, shows the Harvester layout and the files written, and detaches', async () => {
    const out = path.join(dir, 'out');
    const r = spawnSync('bash', [path.join(REPO, 'examples/demo.sh')], { cwd: REPO, env: { ...process.env, HV_DEMO_DIR: out }, encoding: 'utf8', timeout: 600_000 });
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    const loop = /install succeeded on (\/dev\/loop\d+)/.exec(r.stdout)?.[1];
    expect(loop, r.stdout).toBeDefined();
    // The partitions the demo lists, in disk order, by their filesystem labels.
    const labels = [...r.stdout.matchAll(new RegExp(`^${loop}p(\\d+)\\s+LABEL=(\\S+)`, 'gm'))].map((m) => `${m[1]}:${m[2]}`);
    expect(labels).toEqual(['2:COS_OEM', '3:COS_RECOVERY', '4:COS_STATE', '5:COS_PERSISTENT', '6:HARV_LH_DEFAULT']);
    // The files written: the images on COS_STATE and the node's configuration on COS_PERSISTENT.
    expect(r.stdout).toMatch(/^644 +536870912 +\/cOS\/active\.img$/m);
    expect(r.stdout).toMatch(/^600 +\d+ +\/\.state\/etc-rancher\.bind\/rke2\/config\.yaml\.d\/90-harvester-server\.yaml$/m);
    expect(r.stdout).toContain(`demo: detached ${loop}`);
    // Nothing left attached or mounted; the disk image stays for the operator, sparse.
    const disk = path.join(out, 'disk.raw');
    expect(attachedTo(disk)).toEqual([]);
    expect((await readFile('/proc/mounts', 'utf8')).split('\n').filter((l) => l.startsWith(`${loop}p`))).toEqual([]);
    const st = await stat(disk);
    expect(st.size).toBe(260 * 1024 ** 3);
    expect(st.blocks * 512).toBeLessThan(4 * 1024 ** 3);
  });

  it('refuses to run without root, saying why and what to run', () => {
    const r = spawnSync('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', 'bash', path.join(REPO, 'examples/demo.sh')], {
      cwd: REPO,
      env: { ...process.env, HV_DEMO_DIR: path.join(dir, 'as-nobody') },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('demo: needs root (loop devices, mkfs, mount); run: sudo make demo');
  });
});
