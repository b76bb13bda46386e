/**
 * The systemd test OS's initramfs (iso-build/systemd-os/files/init), booted under QEMU with
 * Debian's kernel straight from -kernel/-initrd (its ELF image, by the PVH entry), on small disks made here: COS_STATE with
 * active.img and passive.img (a busybox tree whose /sbin/init prints what it finds, then changes
 * state and powers off), COS_OEM with the installer's 90_custom.yaml (rendered by
 * installer/render), COS_PERSISTENT pre-seeded with a node's earlier state, HARV_LH_DEFAULT.
 * Each case is one boot with its own kernel command line; failures are booted as deliberately as
 * the good path. The full image under systemd is `make e2e`'s first-boot stage.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execa, type ResultPromise } from 'execa';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { run } from '../../../lib/exec.js';
import { fetchDebianKernel } from '../../../iso-build/boot-chain.js';
import { buildTestOsTree } from '../../../iso-build/index.js';
import { buildCosInitrd } from '../../../iso-build/systemd-os/initrd.js';
import { systemdOsFile } from '../../../iso-build/systemd-os/files.js';
import { renderYip } from '../../../installer/render/yip.js';
import { POWEROFF_AFTER_OUTPUT } from '../../../iso-build/poweroff-after-output.js';
import { pvhKernel } from '../guest-initrd.js';

const KERNEL_CACHE = process.env.HV_KERNEL_CACHE ?? '/var/cache/hvinstall/debian-kernel';
const BOOT_DEADLINE_MS = 240_000;
const IMAGE_COPY = 'the image copy';

let work: string;
let vmlinuz: string;
let initrd: string;
const disks: Record<string, string> = {};
const guests: ResultPromise[] = [];

/** The image's /sbin/init: what the initramfs left, as HVT- lines; then a node's changes; then power off. */
const REPORT_INIT = `#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
echo "HVT-BOOTED pid=$$"
while read -r src mp fs opts rest; do echo "HVT-MOUNT $mp $fs $src $opts"; done < /proc/mounts
for f in /run/cos/*_mode; do [ -e "$f" ] && echo "HVT-MODE \${f#/run/cos/}"; done
echo "HVT-FILE from-image=$(cat /etc/ssh/from-image 2>/dev/null)"
echo "HVT-FILE node-only=$(cat /etc/ssh/node-only 2>/dev/null)"
echo "HVT-FILE extra=$(cat /var/lib/extra/written 2>/dev/null)"
echo "HVT-FILE machine-id=$(cat /etc/machine-id 2>/dev/null)"
echo "HVT-FILE layout=$(grep -c . /run/cos/cos-layout.env 2>/dev/null)"
echo "HVT-FILE opt-mode=$(stat -c %a /opt)"
echo "HVT-FSTAB $(tr '\\n' '|' < /etc/fstab)"
echo "changed by the node" > /etc/ssh/from-image 2>/dev/null
mkdir -p /var/lib/extra 2>/dev/null && echo "written on an earlier boot" > /var/lib/extra/written
sync
echo "HVT-DONE"
${POWEROFF_AFTER_OUTPUT}
`;

async function ext4(name: string, label: string, sizeMiB: number, from?: string, type = 'ext4'): Promise<string> {
  const file = path.join(work, `${name}.img`);
  await rm(file, { force: true });
  await run('truncate', ['-s', `${sizeMiB}M`, file]);
  await run('mke2fs', ['-q', '-F', '-t', type, '-b', '4096', '-L', label, ...(from ? ['-d', from] : []), file]);
  return file;
}

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'hv-cos-initrd-'));
  const kernel = await fetchDebianKernel(KERNEL_CACHE);
  vmlinuz = await pvhKernel(kernel.vmlinuz);
  initrd = (await buildCosInitrd({ programsRoot: '/', modulesRoot: kernel.modulesRoot, kernelVersion: kernel.version, out: path.join(work, 'initrd.gz'), epoch: 1_700_000_000 })).file;

  // The image: busybox, the report init, the mount points an Elemental layout needs, a file in a
  // persistent path, and the test OS's own layout defaults in /system/oem.
  const tree = (await buildTestOsTree(path.join(work, 'tree'))).dir;
  for (const d of ['etc/ssh', 'var', 'srv', 'boot', 'lib/firmware', 'usr/libexec', 'home', 'opt', 'system/oem']) await mkdir(path.join(tree, d), { recursive: true });
  await writeFile(path.join(tree, 'sbin/init'), REPORT_INIT);
  await chmod(path.join(tree, 'sbin/init'), 0o755);
  await writeFile(path.join(tree, 'etc/ssh/from-image'), `${IMAGE_COPY}\n`);
  await chmod(path.join(tree, 'opt'), 0o750);
  await writeFile(path.join(tree, 'etc/fstab'), '# the image\'s\n');
  await copyFile(systemdOsFile('00_rootfs.yaml'), path.join(tree, 'system/oem/00_rootfs.yaml'));
  const state = path.join(work, 'state');
  await mkdir(path.join(state, 'cOS'), { recursive: true });
  await ext4('active', 'COS_ACTIVE', 64, tree, 'ext2');
  await run('mv', [path.join(work, 'active.img'), path.join(state, 'cOS/active.img')]);
  await copyFile(path.join(state, 'cOS/active.img'), path.join(state, 'cOS/passive.img'));
  await run('tune2fs', ['-L', 'COS_PASSIVE', path.join(state, 'cOS/passive.img')]);
  disks.state = await ext4('state', 'COS_STATE', 256, state);
  await rm(state, { recursive: true, force: true });
  // rd.cos.disable boots a plain root
  disks.plain = await ext4('plain', 'HV_PLAIN', 64, tree);

  // COS_OEM: the installer's yip, with a persistent path of the config's own, and a broken file after it
  const oem = path.join(work, 'oem');
  await mkdir(oem);
  await writeFile(path.join(oem, '90_custom.yaml'), renderYip({ config: { os: { persistentStatePaths: ['/var/lib/extra'] }, install: {} }, hostname: 'n1', hasDataPartition: true, passwordSalt: 'abcdefgh', warnings: [] }));
  await writeFile(path.join(oem, '95_broken.yaml'), 'stages:\n  rootfs:\n    - environment_file: /run/cos/cos-layout.env\n      environment:\n        OVERLAY: "tmpfs:1%\n');
  disks.oem = await ext4('oem', 'COS_OEM', 32, oem);

  // COS_PERSISTENT as a node left it: its own copy of an image file, and a file only it has
  const persistent = path.join(work, 'persistent');
  await mkdir(path.join(persistent, '.state/etc-ssh.bind'), { recursive: true });
  await writeFile(path.join(persistent, '.state/etc-ssh.bind/from-image'), 'a stale node copy\n');
  await writeFile(path.join(persistent, '.state/etc-ssh.bind/node-only'), 'kept from before\n');
  disks.persistent = await ext4('persistent', 'COS_PERSISTENT', 64, persistent);
  disks.longhorn = await ext4('longhorn', 'HARV_LH_DEFAULT', 32);
}, 600_000);

afterAll(async () => {
  for (const g of guests) g.kill('SIGKILL');
  await Promise.allSettled(guests);
  await rm(work, { recursive: true, force: true });
});

const COS_ARGS = 'root=LABEL=COS_STATE cos-img/filename=/cOS/active.img rd.cos.oemlabel=COS_OEM rd.cos.mount=LABEL=COS_OEM:/oem rd.cos.mount=LABEL=COS_PERSISTENT:/usr/local rd.cos.oemtimeout=120';

interface Boot {
  out: string;
  exitedByItself: boolean;
  mounts: Map<string, { fs: string; src: string; opts: string }>;
  files: Record<string, string>;
  modes: string[];
}

/** Boots the disks with the kernel command line; the guest powers off by itself (rd.emergency=poweroff on failure). */
async function boot(cmdline: string, names = ['state', 'oem', 'persistent', 'longhorn', 'plain']): Promise<Boot> {
  // One vCPU and 256 MiB: the initramfs needs no more, and under TCG each costs CPU time.
  const args = ['-machine', 'q35', '-accel', 'tcg', '-cpu', 'qemu64', '-m', '256', '-smp', '1', '-nographic', '-no-reboot', '-nic', 'none',
    '-kernel', vmlinuz, '-initrd', initrd, '-append', `console=ttyS0 panic=-1 no_timer_check rd.emergency=poweroff ${cmdline}`];
  for (const n of names) args.push('-drive', `file=${disks[n]},if=virtio,format=raw,cache=unsafe`);
  const guest = execa('qemu-system-x86_64', args, { reject: false, stdin: 'ignore', timeout: BOOT_DEADLINE_MS });
  guests.push(guest);
  const r = await guest;
  const out = String(r.stdout).replace(/\r/g, '');
  const mounts = new Map<string, { fs: string; src: string; opts: string }>();
  const files: Record<string, string> = {};
  const modes: string[] = [];
  for (const line of out.split('\n')) {
    let m = /^HVT-MOUNT (\S+) (\S+) (\S+) (\S+)/.exec(line);
    if (m) mounts.set(m[1]!, { fs: m[2]!, src: m[3]!, opts: m[4]! });
    m = /^HVT-FILE ([\w-]+)=(.*)$/.exec(line);
    if (m) files[m[1]!] = m[2]!;
    m = /^HVT-MODE (\S+)/.exec(line);
    if (m) modes.push(m[1]!);
    m = /^HVT-FSTAB (.*)$/.exec(line);
    if (m) files.fstab = m[1]!;
  }
  return { out, exitedByItself: !r.timedOut, mounts, files, modes };
}

const PERSISTENT = ['/etc/NetworkManager', '/etc/systemd', '/etc/rancher', '/etc/ssh', '/var/log', '/var/lib/rancher', '/home', '/opt', '/root', '/usr/libexec', '/var/lib/extra'];

describe('the test OS initramfs (QEMU, Debian kernel)', () => {
  let first: Boot;

  it('mounts the active image read-only, the volumes, the RW overlays and the persistent binds from the installer\'s layout', async () => {
    first = await boot(COS_ARGS);
    const b = first;
    expect(b.exitedByItself, b.out.slice(-3000)).toBe(true);
    expect(b.out).toMatch(/HVTEST-INITRD root=LABEL=COS_STATE image=\/cOS\/active\.img mode=active/);
    expect(b.out).not.toMatch(/HVTEST-INITRD-FAILED/);
    expect(b.out).toMatch(/HVT-DONE/);
    expect(b.modes).toEqual(['active_mode']);
    expect(b.mounts.get('/')).toMatchObject({ fs: 'ext2' });
    expect(b.mounts.get('/')!.src).toMatch(/^\/dev\/loop\d+$/);
    expect(b.mounts.get('/')!.opts.split(',')).toContain('ro');
    expect(b.mounts.get('/oem')).toMatchObject({ fs: 'ext4', src: '/dev/vdb' });
    expect(b.mounts.get('/usr/local')).toMatchObject({ fs: 'ext4', src: '/dev/vdc' });
    // Harvester's RW paths, then the Longhorn disk mounted over its place under the /var overlay, not hidden by it
    for (const p of ['/etc', '/var', '/srv', '/boot', '/lib/firmware']) expect(b.mounts.get(p)?.fs, p).toBe('overlay');
    expect(b.mounts.get('/var/lib/harvester/defaultdisk')).toMatchObject({ fs: 'ext4', src: '/dev/vdd' });
    const order = b.out.split('\n').filter((l) => l.startsWith('HVT-MOUNT ')).map((l) => l.split(' ')[1]);
    expect(order.indexOf('/var/lib/harvester/defaultdisk')).toBeGreaterThan(order.indexOf('/var'));
    for (const p of PERSISTENT) expect(b.mounts.get(p), p).toMatchObject({ fs: 'ext4', src: '/dev/vdc' });
    // the broken file after 90_custom.yaml was skipped, naming it and its line; its OVERLAY did not get in
    expect(b.out).toMatch(/HVTEST-INITRD yip: \/oem\/95_broken\.yaml:5: unterminated quoted string; file skipped/);
    expect(b.out).toMatch(/overlay=tmpfs:25% /);
    expect(b.files.fstab).toMatch(/\/usr\/local\/\.state\/etc-ssh\.bind \/etc\/ssh none defaults,bind 0 0/);
    expect(b.files.fstab).toMatch(/\/dev\/disk\/by-label\/COS_PERSISTENT \/usr\/local auto defaults 0 0/);
    expect(b.files['machine-id']).toMatch(/^[0-9a-f]{32}$/);
  }, BOOT_DEADLINE_MS + 60_000);

  it('mirrors the image into a persistent path at boot: the image copy wins, a node-only file stays', () => {
    expect(first.files['from-image']).toBe(IMAGE_COPY);
    expect(first.files['node-only']).toBe('kept from before');
    expect(first.files.extra).toBe('');
    // an empty image directory gives its mode to the bind dir mounted over it
    expect(first.files['opt-mode']).toBe('750');
  });

  it('on the next boot keeps what the node wrote and mirrors the image over what it changed', async () => {
    const b = await boot(COS_ARGS);
    expect(b.exitedByItself).toBe(true);
    expect(b.files.extra).toBe('written on an earlier boot');
    expect(b.files['from-image']).toBe(IMAGE_COPY);
    expect(b.files['node-only']).toBe('kept from before');
    expect(b.files['machine-id']).toBe(first.files['machine-id']);
  }, BOOT_DEADLINE_MS + 60_000);

  it('boots the passive image in passive mode', async () => {
    const b = await boot(COS_ARGS.replace('/cOS/active.img', '/cOS/passive.img'));
    expect(b.modes).toEqual(['passive_mode']);
    expect(b.out).toMatch(/mode=passive/);
    expect(b.files.extra).toBe('written on an earlier boot');
  }, BOOT_DEADLINE_MS + 60_000);

  it("when rd.cos.oemlabel never appears waits rd.cos.oemtimeout, says so, and boots with the image's own layout", async () => {
    const b = await boot(COS_ARGS.replace('rd.cos.oemlabel=COS_OEM', 'rd.cos.oemlabel=COS_NOPE').replace('rd.cos.oemtimeout=120', 'rd.cos.oemtimeout=2'));
    expect(b.exitedByItself).toBe(true);
    expect(b.out).toMatch(/HVTEST-INITRD WARNING: no filesystem labelled COS_NOPE appeared within 2 s \(rd\.cos\.oemlabel\); the layout comes from the image alone; block devices seen: .*\/dev\/vdb \(COS_OEM\)/);
    expect(b.out).toMatch(/yip: \/system\/oem\/00_rootfs\.yaml: entry 'Layout defaults'/);
    expect(b.out).not.toMatch(/90_custom\.yaml/);
    // the image's defaults: /etc /var /srv in RAM, its persistent paths bound, nothing of the installer's list
    for (const p of ['/etc', '/var', '/srv']) expect(b.mounts.get(p)?.fs, p).toBe('overlay');
    expect(b.mounts.has('/boot')).toBe(false);
    expect(b.mounts.has('/var/lib/harvester/defaultdisk')).toBe(false);
    expect(b.mounts.get('/oem')).toMatchObject({ src: '/dev/vdb' });
    expect(b.mounts.get('/etc/ssh')).toMatchObject({ src: '/dev/vdc' });
    expect(b.mounts.has('/var/lib/extra')).toBe(false);
    expect(b.files['from-image']).toBe(IMAGE_COPY);
  }, BOOT_DEADLINE_MS + 60_000);

  it('stops with a clear message, listing the devices it saw, when the root label never appears', async () => {
    const b = await boot(`${COS_ARGS.replace('root=LABEL=COS_STATE', 'root=LABEL=COS_NOPE')} rd.timeout=3`);
    expect(b.exitedByItself).toBe(true);
    expect(b.out).toMatch(/HVTEST-INITRD-FAILED no filesystem LABEL=COS_NOPE appeared within 3 s \(root= on the kernel command line\); block devices seen: \/dev\/vda \(COS_STATE\), \/dev\/vdb \(COS_OEM\)/);
    expect(b.out).toMatch(/HVTEST-INITRD emergency: /);
    expect(b.out).not.toMatch(/HVT-BOOTED/);
  }, BOOT_DEADLINE_MS + 60_000);

  it('stops naming the images there are when cos-img/filename names none', async () => {
    const b = await boot(COS_ARGS.replace('/cOS/active.img', '/cOS/nope.img'));
    expect(b.out).toMatch(/HVTEST-INITRD-FAILED no image \/cOS\/nope\.img on \/dev\/vda \(LABEL=COS_STATE\); it has: active\.img passive\.img/);
    expect(b.out).not.toMatch(/HVT-BOOTED/);
  }, BOOT_DEADLINE_MS + 60_000);

  it('with rd.cos.disable mounts root= itself and does no layout', async () => {
    const b = await boot('root=LABEL=HV_PLAIN cos-img/filename=/cOS/active.img rd.cos.disable rd.cos.oemlabel=COS_OEM rd.cos.mount=LABEL=COS_OEM:/oem');
    expect(b.out).toMatch(/HVTEST-INITRD cos layout disabled \(rd\.cos\.disable\); root=LABEL=HV_PLAIN/);
    expect(b.mounts.get('/')).toMatchObject({ fs: 'ext4', src: '/dev/vde' });
    expect(b.mounts.has('/oem')).toBe(false);
    expect(b.mounts.has('/etc')).toBe(false);
    expect(b.modes).toEqual([]);
  }, BOOT_DEADLINE_MS + 60_000);
});

describe('the initramfs itself', () => {
  it('is reproducible: the same inputs give the same bytes', async () => {
    const kernel = await fetchDebianKernel(KERNEL_CACHE);
    const again = await buildCosInitrd({ programsRoot: '/', modulesRoot: kernel.modulesRoot, kernelVersion: kernel.version, out: path.join(work, 'initrd-again.gz'), epoch: 1_700_000_000 });
    expect((await readFile(again.file)).equals(await readFile(initrd))).toBe(true);
  }, 300_000);
});
