/**
 * The pure parts of the systemd test OS build: reading apt's simulation, the cache key, the
 * mmdebstrap command line, the os-release, and the image's grub files checked by grub itself.
 */
import { describe, expect, it } from 'vitest';
import { run } from '../../../lib/exec.js';
import { baseSelection, OS_PACKAGES, parseSimulatedInstall, rootKey } from '../../../iso-build/systemd-os/packages.js';
import { mmdebstrapArgs } from '../../../iso-build/systemd-os/root.js';
import { imageOsRelease, IMAGE_FILES, IMAGE_UNITS_OFF, RKE2_STANDIN_PATH } from '../../../iso-build/systemd-os/image.js';
import { RKE2_STANDIN, systemdOsFile } from '../../../iso-build/systemd-os/files.js';
import { readFile } from 'node:fs/promises';

const SIMULATION = `NOTE: This is only a simulation!
Reading package lists...
Inst gcc-12-base (12.2.0-14+deb12u1 Debian:12.15/oldstable [amd64])
Inst libgcc-s1 (12.2.0-14+deb12u1 Debian:12.15/oldstable [amd64]) []
Inst libcap2 (1:2.66-4+deb12u3+b1 Debian:12.15/oldstable [amd64])
Inst libpcre2-8-0 (10.42-1+deb12u2 Debian-Security:12/oldstable-security [amd64])
Inst tzdata [2024a-0+deb12u1] (2026f-0+deb12u1 Debian:12.15/oldstable [all])
Conf gcc-12-base (12.2.0-14+deb12u1 Debian:12.15/oldstable [amd64])
`;

describe('what apt resolves', () => {
  it('reads every Inst line, epochs and upgrades included, and nothing else', () => {
    expect(parseSimulatedInstall(SIMULATION)).toEqual({
      'gcc-12-base': '12.2.0-14+deb12u1',
      'libgcc-s1': '12.2.0-14+deb12u1',
      libcap2: '1:2.66-4+deb12u3+b1',
      'libpcre2-8-0': '10.42-1+deb12u2',
      tzdata: '2026f-0+deb12u1',
    });
  });

  it('selects what mmdebstrap minbase installs: the essential set, the other required packages, apt', () => {
    expect(baseSelection('bookworm', 'amd64')).toEqual([
      '?narrow(?or(?archive(^bookworm$),?codename(^bookworm$)),?architecture(amd64),?essential)',
      '?narrow(?or(?archive(^bookworm$),?codename(^bookworm$)),?architecture(amd64),?and(?priority(required),?not(?essential)))',
      'apt',
    ]);
  });
});

describe('the cache key of the root', () => {
  const base = { packages: OS_PACKAGES, versions: { libc6: '2.36-9+deb12u14', systemd: '252.39-1~deb12u2' }, sources: 'Types: deb\n' };
  it('is stable for the same inputs, whatever their order', () => {
    expect(rootKey(base)).toBe(rootKey({ ...base, packages: [...OS_PACKAGES].reverse(), versions: { systemd: '252.39-1~deb12u2', libc6: '2.36-9+deb12u14' } }));
  });
  it('changes with any version, package or source', () => {
    const k = rootKey(base);
    expect(rootKey({ ...base, versions: { ...base.versions, libc6: '2.36-9+deb12u15' } })).not.toBe(k);
    expect(rootKey({ ...base, versions: { ...base.versions, extra: '1' } })).not.toBe(k);
    expect(rootKey({ ...base, packages: [...OS_PACKAGES, 'vim'] })).not.toBe(k);
    expect(rootKey({ ...base, sources: 'Types: deb\nURIs: http://mirror.example\n' })).not.toBe(k);
  });
});

describe('the mmdebstrap command line', () => {
  const args = mmdebstrapArgs({ target: '/cache/.root-x/tree', sources: ['/etc/apt/sources.list.d/debian.sources'], debCache: "/cache/it's debs" });
  it('installs the packages on the host lists, keeps the debs, and builds no Debian initramfs', () => {
    expect(args).toContain('--variant=minbase');
    expect(args).toContain(`--include=${OS_PACKAGES.join(',')}`);
    expect(args).toContain('--skip=update');
    expect(args.some((a) => a.startsWith('--setup-hook=') && a.includes('/var/lib/apt/lists'))).toBe(true);
    expect(args.some((a) => a.startsWith('--essential-hook=') && a.includes('dpkg-divert') && a.includes('/usr/sbin/update-initramfs'))).toBe(true);
    expect(args.some((a) => a.startsWith('--customize-hook=') && a.includes('--remove /usr/sbin/update-initramfs'))).toBe(true);
    expect(args.slice(-3)).toEqual(['bookworm', '/cache/.root-x/tree', '/etc/apt/sources.list.d/debian.sources']);
  });
  it('quotes the deb cache path for the hooks', () => {
    expect(args.filter((a) => a.includes("'/cache/it'\\''s debs'")).length).toBe(2);
  });
  it('leaves no host key, machine id or resolv.conf of the build host in the image', () => {
    const hook = args.find((a) => a.includes('ssh_host_'))!;
    expect(hook).toMatch(/rm -f "\$1"\/etc\/ssh\/ssh_host_\* "\$1\/etc\/resolv.conf"/);
    expect(hook).toContain(': > "$1/etc/machine-id"');
  });
});

describe('the image files', () => {
  it('os-release keeps Debian and adds the boot entry name Elemental reads (GRUB_ENTRY_NAME)', () => {
    const debian = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nID=debian\nGRUB_ENTRY_NAME="old"\n';
    const out = imageOsRelease(debian, 'abc123');
    expect(out).toContain('ID=debian\n');
    expect(out).toContain('GRUB_ENTRY_NAME="hvinstall test OS"\n');
    expect(out).toContain('IMAGE_VERSION=abc123\n');
    expect(out.match(/GRUB_ENTRY_NAME=/g)).toHaveLength(1);
  });

  it('grub.cfg and bootargs.cfg parse with grub-script-check', async () => {
    for (const f of ['grub.cfg', 'bootargs.cfg']) {
      const r = await run('grub-script-check', [systemdOsFile(f)], { allowFailure: true });
      expect(r.exitCode, `${f}: ${r.stdout}${r.stderr}`).toBe(0);
    }
    // and the check is a real one: a broken copy fails
    const r = await run('sh', ['-c', `sed 's/^fi$/f/' '${systemdOsFile('grub.cfg')}' | grub-script-check`], { allowFailure: true });
    expect(r.exitCode).not.toBe(0);
  });

  it('grub.cfg has the entries, knobs and files of the Elemental contract', async () => {
    const cfg = await readFile(systemdOsFile('grub.cfg'), 'utf8');
    for (const id of ['cos', 'fallback', 'recovery']) expect(cfg).toMatch(new RegExp(`^menuentry .* --id ${id} \\{`, 'm'));
    for (const knob of ['extra_cmdline', 'extra_active_cmdline', 'default_fallback', 'default_menu_entry', 'next_entry', 'saved_entry']) expect(cfg).toContain(`\${${knob}}`);
    expect(cfg).toContain('set oem_env_file="/grub_oem_env"');
    expect(cfg).toContain('set custom_file="/grubcustom"');
    expect(cfg).toMatch(/source "\(\$\{loopdev\}\)\/etc\/cos\/bootargs\.cfg"/);
  });

  it("grub.cfg drops Debian grub 2.06's TPM verifier before any loopback (it reads a loop-mounted image whole: out of memory)", async () => {
    const lines = (await readFile(systemdOsFile('grub.cfg'), 'utf8')).split('\n').map((l) => l.trim());
    const rmmod = lines.indexOf('rmmod tpm');
    const firstLoopback = lines.findIndex((l) => /^loopback\s+"?\$\{loopdev\}/.test(l));
    expect(rmmod).toBeGreaterThan(-1);
    expect(firstLoopback).toBeGreaterThan(-1);
    expect(rmmod).toBeLessThan(firstLoopback);
  });

  it("bootargs.cfg gives Harvester's kernel command line", async () => {
    const b = await readFile(systemdOsFile('bootargs.cfg'), 'utf8');
    const active = /else\n\s*set kernelcmd="([^"]+)"/.exec(b)![1]!;
    expect(active).toBe(
      '${console_params} root=LABEL=${state_label} cos-img/filename=${img} panic=0 net.ifnames=1 rd.cos.oemlabel=${oem_label} rd.cos.mount=LABEL=${oem_label}:/oem rd.cos.mount=LABEL=${persistent_label}:/usr/local rd.cos.oemtimeout=120 audit=1 audit_backlog_limit=8192 intel_iommu=on amd_iommu=on iommu=pt ${third_party_kernel_args}',
    );
    expect(b).toContain('set kernel=/boot/vmlinuz');
    expect(b).toContain('set initramfs=/boot/initrd');
  });

  it("leaves out only Debian's maintenance timers and the tty1 getty, never a unit the report or hvagent checks", async () => {
    const report = await readFile(systemdOsFile('hvtest-report'), 'utf8');
    for (const link of IMAGE_UNITS_OFF) {
      expect(link).toMatch(/^etc\/systemd\/system\/[a-z-]+\.target\.wants\/[\w@.-]+\.(timer|service)$/);
      const unit = link.split('/').pop()!;
      expect(report).not.toContain(unit);
      expect(['NetworkManager.service', 'containerd.service', 'ssh.service', 'systemd-timesyncd.service', 'hvagent.service']).not.toContain(unit);
    }
    expect(IMAGE_UNITS_OFF).toContain('etc/systemd/system/timers.target.wants/apt-daily.timer');
  });

  it('sshd offers the one host key the first boot makes (ed25519), the one the report checks is kept', async () => {
    const dropIn = await readFile(systemdOsFile('ssh-hostkeys.conf'), 'utf8');
    expect(dropIn).toContain('ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key');
    expect(dropIn).not.toContain('ssh-keygen -A');
    expect(await readFile(systemdOsFile('sshd-hostkey.conf'), 'utf8')).toMatch(/^HostKey \/etc\/ssh\/ssh_host_ed25519_key$/m);
    expect(IMAGE_FILES).toContainEqual(['sshd-hostkey.conf', 'etc/ssh/sshd_config.d/hvtest-hostkey.conf', 0o644]);
    expect(await readFile(systemdOsFile('hvtest-report'), 'utf8')).toContain('/etc/ssh/ssh_host_ed25519_key.pub');
  });

  it('every file the image takes exists', async () => {
    for (const [src] of IMAGE_FILES) await expect(readFile(systemdOsFile(src))).resolves.toBeDefined();
  });

  it("rke2-server.service runs the project's one rke2 stand-in, carried where the unit looks, with the node Debian's nodejs installs", async () => {
    expect(await readFile(RKE2_STANDIN, 'utf8')).toContain('TEST DOUBLE for the `rke2` binary');
    const unit = await readFile(systemdOsFile('rke2-server.service'), 'utf8');
    expect(unit).toMatch(new RegExp(`^ExecStart=/usr/bin/node /${RKE2_STANDIN_PATH} server$`, 'm'));
    expect(OS_PACKAGES).toContain('nodejs');
    const env = /^Environment=HV_RKE2_STANDIN=\/(\S+)$/m.exec(unit)![1]!;
    const dest = IMAGE_FILES.find(([, d]) => d === env);
    expect(dest?.[0]).toBe('rke2-standin.json');
    expect(JSON.parse(await readFile(systemdOsFile('rke2-standin.json'), 'utf8')).server.port).toBe(6443);
  });

  it("the baseline boot's bootstrap is ordered as rancherd.service and probes the stand-in's port, pulled in by the harness alone", async () => {
    const unit = await readFile(systemdOsFile('hvtest-bootstrap-baseline.service'), 'utf8');
    const values = (key: string) => [...unit.matchAll(new RegExp(`^${key}=(.*)$`, 'gm'))].flatMap((m) => m[1]!.split(/\s+/));
    // rancher/rancherd rancherd.service and Harvester's drop-in: oneshot, after the network and the clock
    expect(values('Type')).toEqual(['oneshot']);
    expect(values('After')).toEqual(expect.arrayContaining(['network-online.target', 'time-sync.target']));
    expect(values('Wants')).toEqual(expect.arrayContaining(['network-online.target', 'time-sync.target']));
    expect(values('Before')).toContain('multi-user.target');
    expect(unit).not.toMatch(/^\[Install\]/m);
    const exec = values('ExecStart')[0]!;
    expect(IMAGE_FILES.find(([, d]) => `/${d}` === exec)?.[0]).toBe('hvtest-bootstrap-baseline');
    const script = await readFile(systemdOsFile('hvtest-bootstrap-baseline'), 'utf8');
    expect(script).toContain('systemctl start rke2-server.service');
    expect(script).toContain('-connect 127.0.0.1:6443');
    expect(script).toContain('GET /readyz');
    const harness = await readFile(new URL('../../e2e/first-boot.sh', import.meta.url), 'utf8');
    expect(/^FB_MASK="(.*)"$/m.exec(harness)?.[1]?.split(' ')).toContain('systemd.wants=hvtest-bootstrap-baseline.service');
  });
});
