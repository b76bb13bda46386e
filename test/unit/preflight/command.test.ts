// `hvinstall preflight` through the CLI dispatcher, on fixture sysroots; stdout captured in-process.
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../../installer/cli.js';
import { HvError } from '../../../lib/errors.js';
import { FIXTURES } from './helpers.js';

let out = '';
function captureStdout(): void {
  out = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    out += String(chunk);
    return true;
  });
}
afterEach(() => vi.restoreAllMocks());

const root = (name: string) => path.join(FIXTURES, name);

describe('hvinstall preflight', () => {
  it('prints a table and exits 0 when nothing fails', async () => {
    captureStdout();
    const code = await main(['preflight', '--sysroot', root('prod-nvme'), '--profile', 'production']);
    expect(code).toBe(0);
    expect(out).toMatch(/^CHECK\s+RESULT\s+MEASURED\s+THRESHOLD\s+WHAT TO DO$/m);
    expect(out).toMatch(/^cpu\.cores\s+pass\s+128 logical CPUs \(64 cores\)\s+>= 16\s+-$/m);
    expect(out).toContain('Suggested install device: /dev/nvme1n1');
    expect(out).toContain('14 passed, 0 warnings, 0 failed');
    expect(out).not.toContain('Findings:');
  });

  it('exits 1 on failures and lists each finding with its message', async () => {
    captureStdout();
    const code = await main(['preflight', '--sysroot', root('lab-vm')]);
    expect(code).toBe(1);
    expect(out).toMatch(/^virt\.cpu-flags\s+FAIL\s+neither vmx nor svm\s+vmx or svm\s+This is a VM \(kvm\)/m);
    expect(out).toContain('  FAIL virt.kvm: Harvester requires hardware-assisted virtualization, but /dev/kvm does not exist.');
    expect(out).toContain('  WARN virt.host: System is virtualized (kvm) which is not supported in production.');
  });

  it('--json prints the facts (a MachineFacts) with the report alongside', async () => {
    captureStdout();
    const code = await main(['preflight', '--sysroot', root('legacy-bios'), '--json', '--profile', 'production']);
    expect(code).toBe(1);
    const j = JSON.parse(out);
    expect(j.profile).toBe('production');
    expect(j.summary).toEqual({ pass: 11, warn: 0, fail: 2 });
    expect(j.checks.find((c: { id: string }) => c.id === 'firmware.uefi')).toMatchObject({ result: 'fail', skippable: false });
    expect(j.firmware).toEqual({ uefi: false });
    expect(j.cpu).toMatchObject({ threads: 16, cores: 8, vmx: true });
    expect(j.disks.map((d: { name: string }) => d.name)).toEqual(['sda', 'sdb']);
    expect(j.sysroot).toBe(root('legacy-bios'));
    expect(j.gate).toBeUndefined();
  });

  it('usage errors exit 2 with a message: unknown profile, missing sysroot, unknown option', async () => {
    captureStdout();
    await expect(main(['preflight', '--profile', 'fast'])).rejects.toMatchObject({
      message: "unknown profile 'fast': use testing or production",
      exitCode: 2,
    });
    await expect(main(['preflight', '--sysroot', root('no-such-fixture')])).rejects.toSatisfy(
      (e: unknown) => e instanceof HvError && e.exitCode === 2 && e.message.startsWith('sysroot is not a directory: '),
    );
    await expect(main(['preflight', '--frobnicate'])).rejects.toMatchObject({ exitCode: 2, message: 'unknown option --frobnicate' });
    expect(out).toBe('');
  });

  it('--help prints the options and exits 0', async () => {
    captureStdout();
    expect(await main(['preflight', '--help'])).toBe(0);
    expect(out).toContain('usage: hvinstall preflight [--config FILE|URL|-] [--source DIR|SQUASHFS] [--profile testing|production] [--sysroot DIR] [--json]');
  });
});

describe('hvinstall preflight --config', () => {
  const BASE = `scheme_version: 1
token: not-a-real-token
os:
  hostname: lab1
  password: lab-password
install:
  mode: create
  automatic: true
  iso_url: http://192.0.2.1/harvester.iso
  vip: 192.0.2.10
  vip_mode: static
  device: /dev/disk/by-id/virtio-lab-disk-0
  management_interface:
    method: dhcp
    interfaces:
      - hwAddr: "52:54:00:12:34:56"
`;
  let dir = '';
  async function writeConfig(text: string): Promise<string> {
    const { mkdtemp, writeFile } = await import('node:fs/promises');
    const os = await import('node:os');
    dir = await mkdtemp(path.join(os.tmpdir(), 'hv-preflight-cmd-'));
    const f = path.join(dir, 'config.yaml');
    await writeFile(f, text);
    return f;
  }
  afterEach(async () => {
    const { rm } = await import('node:fs/promises');
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = '';
  });

  it('checks the configured disk and NIC and says an automatic install would abort', async () => {
    const f = await writeConfig(BASE);
    captureStdout();
    expect(await main(['preflight', '--config', f, '--sysroot', root('lab-vm')])).toBe(1);
    expect(out).toMatch(/^device\.exists \/dev\/disk\/by-id\/virtio-lab-disk-0\s+pass\s+\/dev\/vda/m);
    expect(out).toMatch(/^nic\.exists 52:54:00:12:34:56\s+pass\s+enp1s0 52:54:00:12:34:56/m);
    expect(out).toContain(
      'Install (automatic): preflight failed (automatic mode): cpu.cores, memory, virt.cpu-flags, virt.kvm\n  to go on: set harvester.install.skipchecks=true on the kernel command line (or install.skipchecks: true in the config) to install anyway',
    );
    expect(out).not.toContain('not-a-real-token');
  });

  it('install.skipchecks lets those failures through (still exit 1: the report is unchanged)', async () => {
    const f = await writeConfig(BASE.replace('  automatic: true\n', '  automatic: true\n  skipchecks: true\n'));
    captureStdout();
    expect(await main(['preflight', '--config', f, '--sysroot', root('lab-vm'), '--json'])).toBe(1);
    const j = JSON.parse(out);
    expect(j.gate).toEqual({
      proceed: true,
      needsAcknowledgement: false,
      message: 'preflight failures overridden by install.skipchecks: cpu.cores, memory, virt.cpu-flags, virt.kvm',
    });
    expect(out).not.toContain('not-a-real-token');
  });

  it('an invalid config is reported on stderr and the hardware is still checked', async () => {
    const f = await writeConfig(BASE.replace('token: not-a-real-token\n', ''));
    captureStdout();
    let err = '';
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      err += String(chunk);
      return true;
    });
    expect(await main(['preflight', '--config', f, '--sysroot', root('prod-nvme')])).toBe(1);
    expect(err).toMatch(/config\.yaml has \d+ validation error\(s\); run 'hvinstall validate .*config\.yaml' \(checking the hardware anyway\)/);
    expect(out).toMatch(/^device\.exists \/dev\/disk\/by-id\/virtio-lab-disk-0\s+FAIL\s+not found/m);
  });

  it('a config file that does not exist is an environment error (exit 2), nothing printed on stdout', async () => {
    captureStdout();
    await expect(main(['preflight', '--config', '/nonexistent/hv-config.yaml', '--sysroot', root('lab-vm')])).rejects.toMatchObject({ exitCode: 2 });
    expect(out).toBe('');
  });
});
