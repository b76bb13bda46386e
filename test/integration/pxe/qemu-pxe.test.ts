/**
 * End to end: a QEMU machine network-boots its NIC's real iPXE ROM, which runs hvpxe's boot.ipxe
 * (TFTP from slirp), chains to hvpxe over HTTP (guestfwd → socat → 127.0.0.1), is matched by its
 * MAC, downloads the kernel and initrd hvpxe serves, and boots them with hvpxe's kernel line. The
 * guest (Debian's kernel, a busybox + node initramfs) fetches its config_url, then runs the
 * installer's prepareAutomaticInstall on its real /proc/cmdline and reports STARTED back to hvpxe.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chmod, copyFile, cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { run } from '../../../lib/exec.js';
import { POWEROFF_AFTER_OUTPUT } from '../../../iso-build/poweroff-after-output.js';
import { copyWithLibs } from '../guest-initrd.js';
import { fetchDebianKernel } from '../../../iso-build/boot-chain.js';
import { freePort, machineOf, REPO, scriptUrls, sha256, startHvpxe, stopHvpxe, type Running } from './harness.js';

const KERNEL_CACHE = process.env.HV_KERNEL_CACHE ?? '/var/cache/hvinstall/debian-kernel';
let dir: string;
let hv: Running | undefined;
let port = 0;

const INIT = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
echo "HVPXE-CMDLINE: $(cat /proc/cmdline)"
modprobe virtio_pci 2>/dev/null; modprobe virtio_net
ip link set eth0 up
udhcpc -i eth0 -n -q -t 10 -s /udhcpc.sh >/dev/null 2>&1
url=$(sed -n 's/.*harvester\\.install\\.config_url=\\([^ ]*\\).*/\\1/p' /proc/cmdline)
echo HVPXE-AUTO-BEGIN
cd /hv && node --input-type=module -e '
import { readFileSync } from "node:fs";
import { prepareAutomaticInstall } from "/hv/dist/installer/remote/automatic.js";
import { Logger, MemorySink } from "/hv/dist/lib/logger.js";
const a = await prepareAutomaticInstall(readFileSync("/proc/cmdline", "utf8"), { fetch: { attempts: 3, retryDelayMs: 1000 }, log: new Logger(new MemorySink()) });
console.log(JSON.stringify({ source: a.source, mode: a.config.install.mode, automatic: a.config.install.automatic, events: a.events.url }));
console.log("HVPXE-CONFIG-BEGIN");
console.log(JSON.stringify(a.config));
console.log("HVPXE-CONFIG-END");
await a.webhooks.send("STARTED");
await a.events.post({ type: "step", step: "fetch-config", status: "done" });
' 2>&1
echo HVPXE-AUTO-END
wget -q -O /dev/null "$url"; echo "HVPXE-REFETCH: $?"
${POWEROFF_AFTER_OUTPUT}
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
  // Node and the built installer, to run its automatic-mode preparation inside the PXE-booted guest.
  await copyWithLibs('/usr/bin/node', root);
  await cp(path.join(REPO, 'dist'), path.join(root, 'hv/dist'), { recursive: true });
  await writeFile(path.join(root, 'hv/package.json'), '{"type":"module"}\n');
  const deps = (await run('npm', ['ls', '--omit=dev', '--parseable', '--all'], { cwd: REPO, allowFailure: true })).stdout.split('\n').slice(1).filter(Boolean);
  for (const d of deps) await cp(d, path.join(root, 'hv', path.relative(REPO, d)), { recursive: true });
  await writeFile(path.join(root, 'init'), INIT, { mode: 0o755 });
  await writeFile(path.join(root, 'udhcpc.sh'), UDHCPC, { mode: 0o755 });
  const initrd = path.join(work, 'initrd.zst');
  await run('sh', ['-c', `cd '${root}' && find . | LC_ALL=C sort | cpio -o -H newc --quiet | zstd -q -3 -T0 > '${initrd}'`], { timeoutMs: 10 * 60_000 });
  return { vmlinuz: kernel.vmlinuz, initrd };
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-pxe-qemu-'));
  const img = await buildInitrd(dir);
  const root = path.join(dir, 'root');
  await mkdir(root);
  await copyFile(img.vmlinuz, path.join(root, 'vmlinuz'));
  await copyFile(img.initrd, path.join(root, 'initrd.zst'));
  await writeFile(path.join(root, 'rootfs.squashfs'), 'not used by this guest');
  const s = async (f: string): Promise<string> => sha256(await readFile(path.join(root, f)));
  await writeFile(
    path.join(dir, 'profiles.yaml'),
    `server_url: http://10.0.2.100
artifacts:
  kernel: { path: vmlinuz, sha256: "${await s('vmlinuz')}" }
  initrd: { path: initrd.zst, sha256: "${await s('initrd.zst')}" }
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
        '-machine', 'q35', '-accel', 'tcg', '-cpu', 'qemu64', '-m', '2048', '-smp', '1', '-nographic', '-no-reboot', '-boot', 'n',
        '-netdev', `user,id=n0,restrict=on,tftp=${tftp},bootfile=boot.ipxe,guestfwd=tcp:10.0.2.100:80-cmd:socat - TCP:127.0.0.1:${port}`,
        '-device', 'virtio-net-pci,netdev=n0,mac=52:54:00:12:34:61',
      ],
      { timeoutMs: 300_000, allowFailure: true },
    );
    const out = r.stdout + r.stderr;
    const cmdline = /HVPXE-CMDLINE: (.*)/.exec(out)?.[1];
    expect(cmdline, out.slice(-3000)).toBeDefined();
    expect(cmdline).toContain('root=live:http://10.0.2.100/artifacts/rootfs.squashfs harvester.install.automatic=true');
    const urls = scriptUrls(cmdline!);
    expect(urls.config).toMatch(/^http:\/\/10\.0\.2\.100\/config\/pxe-node-1\.yaml\?credential=[A-Za-z0-9_-]{43}$/);
    expect(urls.events).toBe(`http://10.0.2.100/events/pxe-node-1?credential=${urls.credential}`);
    const config = /HVPXE-CONFIG-BEGIN\r?\n([\s\S]*?)HVPXE-CONFIG-END/.exec(out)?.[1];
    expect(config, out.slice(-3000)).toBeDefined();
    const doc = JSON.parse(config!.replace(/\r/g, ''));
    // The config is served once per boot credential: the guest's second fetch of the same URL is refused.
    expect(/HVPXE-REFETCH: (\d+)/.exec(out)?.[1]).not.toBe('0');
    expect(doc).toMatchObject({ token: 'qemu-cluster-token-1', install: { mode: 'create', vip: '10.0.2.200' }, os: { hostname: 'pxe-node-1' } });
    const node = await machineOf(hv!, 'pxe-node-1');
    expect(node.matchedBy).toBe('mac');
    expect(node.fetched.ipxe).toBeTruthy();
    expect(node.fetched.config).toBeTruthy();
    expect(node.fetched.artifacts.vmlinuz.status).toBe(200);
    expect(node.fetched.artifacts['initrd.zst'].status).toBe(200);
    // The installer's automatic mode ran in the guest: config from hvpxe, STARTED webhook with the guest's own NIC values, our progress event.
    const auto = /HVPXE-AUTO-BEGIN\r?\n([\s\S]*?)HVPXE-AUTO-END/.exec(out)?.[1]?.trim();
    expect(JSON.parse(auto!.split('\n')[0]!)).toEqual({
      // The installer names its config by the URL without its boot credential.
      source: urls.config!.replace(urls.credential!, '<redacted>'),
      mode: 'create',
      automatic: true,
      events: urls.events,
    });
    const started = node.events.find((e: { event: string }) => e.event === 'STARTED');
    expect(started.data).toEqual({ event: 'STARTED', hostname: 'pxe-node-1', mac: '52:54:00:12:34:61', ipv4: '10.0.2.15', ipv6: expect.any(String) });
    expect(node.progress.event).toBe('step');
  });
});
