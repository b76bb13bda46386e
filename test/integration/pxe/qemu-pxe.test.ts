/**
 * End to end: a QEMU machine network-boots its NIC's real iPXE ROM, which runs hvpxe's boot.ipxe
 * (TFTP from slirp), chains to hvpxe over HTTP (guestfwd → socat → 127.0.0.1), is matched by its
 * MAC, downloads the kernel and initrd hvpxe serves, and boots them with hvpxe's kernel line. The
 * guest (Debian's kernel, a busybox initramfs) then fetches its config_url from hvpxe like the
 * installer does and prints it on the serial console.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { run } from '../../../lib/exec.js';
import { fetchDebianKernel } from '../../../iso-build/boot-chain.js';
import { freePort, sha256, startHvpxe, stopHvpxe, type Running } from './harness.js';

const KERNEL_CACHE = process.env.HV_KERNEL_CACHE ?? '/var/cache/hvinstall/debian-kernel';
let dir: string;
let hv: Running | undefined;
let port = 0;

const INIT = `#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
echo "HVPXE-CMDLINE: $(cat /proc/cmdline)"
modprobe virtio_pci 2>/dev/null; modprobe virtio_net
ip link set eth0 up
udhcpc -i eth0 -n -q -t 10 -s /udhcpc.sh >/dev/null 2>&1
url=$(sed -n 's/.*harvester\\.install\\.config_url=\\([^ ]*\\).*/\\1/p' /proc/cmdline)
echo HVPXE-CONFIG-BEGIN
wget -q -O - "$url"
echo HVPXE-CONFIG-END
poweroff -f
`;

const UDHCPC = `#!/bin/sh
[ "$1" = bound ] || exit 0
ip addr add "$ip/$mask" dev "$interface"
[ -n "$router" ] && ip route add default via "$router"
exit 0
`;

async function buildInitrd(work: string): Promise<{ vmlinuz: string; initrd: string }> {
  const kernel = await fetchDebianKernel(KERNEL_CACHE);
  const root = path.join(work, 'initramfs');
  for (const d of ['bin', 'proc', 'sys', 'dev', 'tmp']) await mkdir(path.join(root, d), { recursive: true });
  await copyFile('/bin/busybox', path.join(root, 'bin/busybox'));
  await chmod(path.join(root, 'bin/busybox'), 0o755);
  for (const m of ['virtio_pci', 'virtio_net']) {
    const r = await run('modprobe', ['-d', kernel.modulesRoot, '-S', kernel.version, '--show-depends', m], { allowFailure: true });
    for (const line of r.stdout.split('\n')) {
      const ko = /^insmod (\S+)/.exec(line.trim())?.[1];
      if (!ko) continue;
      const dest = path.join(root, path.relative(kernel.modulesRoot, ko).replace(/\.(xz|zst)$/, ''));
      await mkdir(path.dirname(dest), { recursive: true });
      if (ko.endsWith('.xz')) await run('sh', ['-c', `xz -dc '${ko}' > '${dest}'`]);
      else if (ko.endsWith('.zst')) await run('zstd', ['-q', '-f', '-d', ko, '-o', dest]);
      else await copyFile(ko, dest);
    }
  }
  await mkdir(path.join(root, 'lib/modules', kernel.version), { recursive: true });
  await run('depmod', ['-b', root, kernel.version]);
  await writeFile(path.join(root, 'init'), INIT, { mode: 0o755 });
  await writeFile(path.join(root, 'udhcpc.sh'), UDHCPC, { mode: 0o755 });
  const initrd = path.join(work, 'initrd.gz');
  await run('sh', ['-c', `cd '${root}' && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1 > '${initrd}'`]);
  return { vmlinuz: kernel.vmlinuz, initrd };
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-pxe-qemu-'));
  const img = await buildInitrd(dir);
  const root = path.join(dir, 'root');
  await mkdir(root);
  await copyFile(img.vmlinuz, path.join(root, 'vmlinuz'));
  await copyFile(img.initrd, path.join(root, 'initrd.gz'));
  await writeFile(path.join(root, 'rootfs.squashfs'), 'not used by this guest');
  const s = async (f: string): Promise<string> => sha256(await readFile(path.join(root, f)));
  await writeFile(
    path.join(dir, 'profiles.yaml'),
    `server_url: http://10.0.2.100
artifacts:
  kernel: { path: vmlinuz, sha256: "${await s('vmlinuz')}" }
  initrd: { path: initrd.gz, sha256: "${await s('initrd.gz')}" }
  rootfs: { path: rootfs.squashfs, sha256: "${await s('rootfs.squashfs')}" }
profiles:
  hv:
    kernel: kernel
    initrd: initrd
    rootfs: rootfs
    kernel_args: [console=ttyS0, panic=-1, quiet]
    config:
      scheme_version: 1
      token: qemu-cluster-token-1
      os: { password: qemu-password-2, ssh_authorized_keys: [ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBvCYAjlQ0Ep2hWoJ4yTvXlqxh8g7tJ8V0z4b6gBf0Q0 q] }
      install: { device: /dev/vda, iso_url: http://10.0.2.100/none.iso }
groups:
  - name: lab
    profile: hv
    fleet: { vip: 10.0.2.200 }
    machines: [{ hostname: pxe-node-1, mac: "52:54:00:12:34:61" }]
`,
  );
  port = await freePort();
  hv = await startHvpxe(['serve', '--root', root, '--profiles', path.join(dir, 'profiles.yaml'), '--listen', `127.0.0.1:${port}`]);
}, 600_000);

afterAll(async () => {
  await stopHvpxe(hv);
  await rm(dir, { recursive: true, force: true });
});

describe('PXE boot through hvpxe in QEMU', () => {
  it('iPXE runs boot.ipxe, is matched by MAC, boots the served kernel, and the guest fetches its config', async () => {
    const tftp = path.join(dir, 'tftp');
    await mkdir(tftp);
    const boot = await fetch(`http://127.0.0.1:${port}/boot.ipxe`);
    await writeFile(path.join(tftp, 'boot.ipxe'), await boot.text());
    const r = await run(
      'qemu-system-x86_64',
      [
        '-machine', 'q35', '-accel', 'tcg', '-cpu', 'max', '-m', '768', '-smp', '1', '-nographic', '-no-reboot', '-boot', 'n',
        '-netdev', `user,id=n0,restrict=on,tftp=${tftp},bootfile=boot.ipxe,guestfwd=tcp:10.0.2.100:80-cmd:socat - TCP:127.0.0.1:${port}`,
        '-device', 'virtio-net-pci,netdev=n0,mac=52:54:00:12:34:61',
      ],
      { timeoutMs: 300_000, allowFailure: true },
    );
    const out = r.stdout + r.stderr;
    const cmdline = /HVPXE-CMDLINE: (.*)/.exec(out)?.[1];
    expect(cmdline, out.slice(-3000)).toBeDefined();
    expect(cmdline).toContain('root=live:http://10.0.2.100/artifacts/rootfs.squashfs harvester.install.automatic=true');
    expect(cmdline).toContain('harvester.install.config_url=http://10.0.2.100/config/pxe-node-1.yaml?mac=52:54:00:12:34:61');
    const config = /HVPXE-CONFIG-BEGIN\r?\n([\s\S]*?)HVPXE-CONFIG-END/.exec(out)?.[1];
    expect(config, out.slice(-3000)).toBeDefined();
    const doc = parse(config!.replace(/\r/g, ''));
    expect(doc).toMatchObject({ token: 'qemu-cluster-token-1', install: { mode: 'create', vip: '10.0.2.200' }, os: { hostname: 'pxe-node-1' } });
    const m = (await (await fetch(`http://127.0.0.1:${port}/machines`)).json()) as { machines: Array<Record<string, any>> };
    const node = m.machines.find((x) => x.name === 'pxe-node-1')!;
    expect(node.matchedBy).toBe('mac');
    expect(node.fetched.ipxe).toBeTruthy();
    expect(node.fetched.config).toBeTruthy();
    expect(node.fetched.artifacts.vmlinuz.status).toBe(200);
    expect(node.fetched.artifacts['initrd.gz'].status).toBe(200);
  });
});
