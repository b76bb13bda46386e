/**
 * Automatic mode (`hvinstall install --cmdline-file`), as a PXE-booted node runs it: the config from
 * harvester.install.config_url merged under the command line, the OS from the ISO at install.iso_url
 * (downloaded and checked before any disk is touched), progress posted to hvinstall.events_url.
 */
import { describe, expect, it } from 'vitest';
import { createServer } from 'node:http';
import { createHash } from 'node:crypto';
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { InstallPlan } from '../../../installer/disk/types.js';
import { Cleanup, tempDir, loopDisk, buildSmallBundle, buildSmallOsTree, configYaml, hvinstall, hvinstallOn, hvinstallOnUefiMachine, labMachineFiles, partitionNode, probe, sh, testCleanup, withMount, TEST_SYSTEM_SIZE_MIB } from './helpers.js';
import { verifyInstalledDisk } from './verify.js';

interface Served {
  url: string;
  files: Map<string, Buffer>;
  events: Array<Record<string, unknown>>;
  /** Every GET path, in order. */
  gets: string[];
}

/** A plain HTTP server on 127.0.0.1 standing in for hvpxe: static files and the /events endpoint. */
async function serve(cleanup: Cleanup): Promise<Served> {
  const files = new Map<string, Buffer>();
  const events: Array<Record<string, unknown>> = [];
  const gets: string[] = [];
  const server = createServer((req, res) => {
    if (req.method === 'GET') gets.push(req.url ?? '');
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/events/m1') {
        for (const line of body.split('\n').filter(Boolean)) {
          try { events.push(JSON.parse(line) as Record<string, unknown>); } catch { /* not JSON */ }
        }
        res.writeHead(204).end();
        return;
      }
      const f = files.get(req.url ?? '');
      if (!f) return void res.writeHead(404).end('not found');
      res.writeHead(200, { 'content-length': f.length, 'content-type': 'application/octet-stream' }).end(f);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  cleanup.add(() => new Promise((r) => { server.closeAllConnections(); server.close(() => r(undefined)); }));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, files, events, gets };
}

/** An ISO holding rootfs.squashfs of the test OS and an image bundle/, as a Harvester ISO carries them. */
async function buildIso(dir: string, tree: string, bundle: string): Promise<Buffer> {
  const isoRoot = path.join(dir, 'iso-root');
  await mkdir(isoRoot, { recursive: true });
  await sh('mksquashfs', [tree, path.join(isoRoot, 'rootfs.squashfs'), '-noappend', '-quiet', '-comp', 'gzip']);
  await sh('cp', ['-a', bundle, path.join(isoRoot, 'bundle')]);
  const iso = path.join(dir, 'hv.iso');
  await sh('xorriso', ['-as', 'mkisofs', '-quiet', '-V', 'COS_LIVE', '-o', iso, isoRoot]);
  return readFile(iso);
}

async function setup(cleanup: Cleanup, publishSha: 'right' | 'wrong', isoUrl: 'served' | 'local' = 'served', skipchecks = true) {
  const dir = await tempDir(cleanup);
  const disk = await loopDisk(cleanup, dir, 'target', 260);
  const tree = await buildSmallOsTree(dir);
  const srv = await serve(cleanup);
  const bundle = await buildSmallBundle(dir);
  const iso = await buildIso(dir, tree, bundle);
  srv.files.set('/hv.iso', iso);
  const sha = createHash('sha256').update(iso).digest('hex');
  srv.files.set('/hv.iso.sha256', Buffer.from(`${publishSha === 'right' ? sha : sha.replace(/^./, (c) => (c === '0' ? '1' : '0'))}  hv.iso\n`));
  srv.files.set('/config.yaml', Buffer.from(configYaml({ device: disk, forceEfi: true, extraInstall: `  iso_url: ${isoUrl === 'served' ? `${srv.url}/hv.iso` : 'local'}` })));
  const cmdline = path.join(dir, 'cmdline');
  await writeFile(
    cmdline,
    `BOOT_IMAGE=/vmlinuz console=ttyS0 harvester.install.automatic=true harvester.install.config_url=${srv.url}/config.yaml ` +
      `${skipchecks ? 'harvester.install.skipchecks=true ' : ''}hvinstall.events_url=${srv.url}/events/m1\n`,
  );
  return { dir, disk, tree, bundle, srv, cmdline, stateDir: path.join(dir, 'state') };
}

/** Verifies the disk against the plan of the fetched config with the command line's keys merged in, as the install saw it. */
async function verifyAsInstalled(t: Awaited<ReturnType<typeof setup>>, opts: { bundle?: string } = {}): Promise<void> {
  const merged = `${t.srv.files.get('/config.yaml')!.toString().trimEnd()}\n  automatic: true\n  skipchecks: true\n  config_url: ${t.srv.url}/config.yaml\n`;
  await writeFile(path.join(t.dir, 'fetched.yaml'), merged);
  const p = await hvinstall(['plan', '--config', path.join(t.dir, 'fetched.yaml'), '--json', '--system-size', String(TEST_SYSTEM_SIZE_MIB)]);
  expect(p.code, p.stderr).toBe(0);
  await verifyInstalledDisk((JSON.parse(p.stdout) as { plan: InstallPlan }).plan, t.tree, t.dir, opts);
}

const autoArgs = (cmdline: string, stateDir: string) => [
  'install', '--cmdline-file', cmdline, '--progress', 'json', '--system-size', String(TEST_SYSTEM_SIZE_MIB), '--state-dir', stateDir, '--no-reboot',
];

// Each test on disks, directories and a server of its own, most of its time waiting on tools and
// the disk: the tests run side by side (a Cleanup each, run when the test ends).
describe.concurrent('hvinstall install --cmdline-file (automatic mode)', () => {
  it('fetches the config and the ISO, installs its rootfs and copies its bundle/ without --yes, and posts progress to the events URL', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, 'right');
    // The live installer passes the image it carries as a fallback: an http(s) iso_url still wins.
    const fallback = path.join(t.dir, 'fallback-tree');
    await mkdir(path.join(fallback, 'etc'), { recursive: true });
    await writeFile(path.join(fallback, 'etc/not-the-iso'), 'the fallback must not be installed\n');
    const r = await hvinstallOnUefiMachine([...autoArgs(t.cmdline, t.stateDir), '--fallback-source', fallback]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toContain('integration-secret-token');
    // The log names the ISO it installs from, not its kind.
    expect(r.stderr).toContain(`"isoUrl":"${t.srv.url}/hv.iso"`);
    await verifyAsInstalled(t, { bundle: t.bundle });
    expect(t.srv.events).toContainEqual(expect.objectContaining({ type: 'message', step: 'persistent', message: expect.stringMatching(/^image bundle from the install ISO \(.*\/bundle\): 4 files/) }));
    const done = t.srv.events.filter((e) => e.type === 'step' && e.phase === 'done').map((e) => e.step);
    expect(done).toContain('deploy');
    expect(done.at(-1)).toBe('finish');
    expect(JSON.stringify(t.srv.events)).not.toContain('integration-secret-token');
  });

  it('installs the fallback source for iso_url local, without looking for a boot medium or an ISO', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, 'right', 'local');
    const r = await hvinstallOnUefiMachine([...autoArgs(t.cmdline, t.stateDir), '--fallback-source', t.tree, '--bundle', 'none']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toMatch(/"from":"fallback"/);
    await verifyAsInstalled(t);
  });

  it("PXE's root=live:URL: --source names the OS image over http; it is downloaded, checked against its .sha256 and installed; a wrong one is refused before the disk", async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, 'right', 'local');
    const squashfs = path.join(t.dir, 'rootfs.squashfs');
    await sh('mksquashfs', [t.tree, squashfs, '-noappend', '-quiet', '-comp', 'gzip']);
    const image = await readFile(squashfs);
    const sha = createHash('sha256').update(image).digest('hex');
    t.srv.files.set('/rootfs.squashfs', image);
    t.srv.files.set('/rootfs.squashfs.sha256', Buffer.from(`${sha}  rootfs.squashfs\n`));
    const r = await hvinstallOnUefiMachine([...autoArgs(t.cmdline, t.stateDir), '--source', `${t.srv.url}/rootfs.squashfs`, '--bundle', 'none']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`"verified":"sha256 ${sha} (from ${t.srv.url}/rootfs.squashfs.sha256) matched"`);
    await verifyAsInstalled(t);

    const bad = await setup(cleanup, 'right', 'local');
    bad.srv.files.set('/rootfs.squashfs', image);
    bad.srv.files.set('/rootfs.squashfs.sha256', Buffer.from(`${sha.replace(/^./, (c) => (c === '0' ? '1' : '0'))}  rootfs.squashfs\n`));
    const refused = await hvinstallOnUefiMachine([...autoArgs(bad.cmdline, bad.stateDir), '--source', `${bad.srv.url}/rootfs.squashfs`, '--bundle', 'none']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/sha256/);
    await untouched(bad.disk);
  });

  it('refuses --fallback-source outside automatic mode', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const dir = await tempDir(cleanup);
    const cfg = path.join(dir, 'c.yaml');
    await writeFile(cfg, configYaml({ device: '/dev/null', forceEfi: true }));
    const r = await hvinstall(['install', '--config', cfg, '--fallback-source', dir]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--fallback-source is for automatic mode (--cmdline-file without --config); use --source');
  });

  it('stops before touching the disk when the ISO does not match its published sha256', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, 'wrong');
    const r = await hvinstallOnUefiMachine(autoArgs(t.cmdline, t.stateDir));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/sha256/i);
    // No partition table was written.
    const pt = await sh('sfdisk', ['--dump', t.disk], { allowFailure: true });
    expect(pt.code).not.toBe(0);
    expect((await sh('wipefs', ['--noheadings', t.disk])).stdout.trim()).toBe('');
  });

  it('refuses a command line that does not ask for an automatic install', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const dir = await tempDir(cleanup);
    const f = path.join(dir, 'cmdline');
    await writeFile(f, 'BOOT_IMAGE=/vmlinuz console=ttyS0 harvester.install.config_url=http://127.0.0.1:1/c.yaml\n');
    const r = await hvinstall(['install', '--cmdline-file', f]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${f} does not ask for an automatic install (no harvester.install.automatic=true)`);
  });
});

async function partitionByLabel(disk: string, label: string): Promise<string> {
  for (let n = 1; n <= 8; n++) if ((await probe(partitionNode(disk, n))).LABEL === label) return partitionNode(disk, n);
  throw new Error(`no ${label} on ${disk}`);
}

/** The disk has no partition table and no signature: nothing was written. */
async function untouched(disk: string): Promise<void> {
  expect((await sh('sfdisk', ['--dump', disk], { allowFailure: true })).code).not.toBe(0);
  expect((await sh('wipefs', ['--noheadings', disk])).stdout.trim()).toBe('');
}

describe.concurrent("Harvester's hardware gate in automatic mode", () => {
  it('refuses a legacy-BIOS machine before the ISO is fetched, even with skipchecks, and tells hvpxe', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, 'right');
    const r = await hvinstallOn({ firmware: 'bios' }, autoArgs(t.cmdline, t.stateDir));
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain("install refused by Harvester's hardware gate (this machine); no disk was touched:");
    expect(r.stderr).toMatch(/\n {2}FAIL firmware\.uefi: legacy BIOS \(\/sys\/firmware\/efi absent\)/);
    expect(r.stderr).toContain('to go on: nothing overrides firmware.uefi');
    expect(t.srv.gets).not.toContain('/hv.iso');
    expect(t.srv.events).toContainEqual(expect.objectContaining({ type: 'gate', decision: 'refused', checked: 'this machine' }));
    expect(t.srv.events).toContainEqual(expect.objectContaining({ type: 'install', phase: 'failed', device: t.disk, message: expect.stringMatching(/^refused by the hardware gate: preflight failed: firmware\.uefi/) }));
    await untouched(t.disk);
  });

  it('refuses a machine below the minimums without install.skipchecks, listing each check and the override', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, 'right', 'served', false);
    const lab = await labMachineFiles(t.dir);
    const r = await hvinstallOn({ firmware: 'uefi', ...lab }, autoArgs(t.cmdline, t.stateDir));
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain('FAIL cpu.cores: 2 logical CPUs (2 cores) (needs >= 8): Only 2 CPU cores detected. Harvester requires at least 8 cores for testing and 16 for production use.');
    expect(r.stderr).toContain('FAIL memory: 2GiB (MemTotal)');
    expect(r.stderr).toContain('FAIL virt.cpu-flags:');
    expect(r.stderr).toContain('decision: preflight failed (automatic mode): cpu.cores, memory, virt.cpu-flags');
    expect(r.stderr).toContain('to go on: set harvester.install.skipchecks=true on the kernel command line (or install.skipchecks: true in the config) to install anyway');
    expect(t.srv.gets).not.toContain('/hv.iso');
    await untouched(t.disk);
  });

  it('installs the same machine with harvester.install.skipchecks=true, the overridden checks in the install log and the events', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, 'right');
    const lab = await labMachineFiles(t.dir);
    const r = await hvinstallOn({ firmware: 'uefi', ...lab }, [...autoArgs(t.cmdline, t.stateDir), '--bundle', 'none']);
    expect(r.code, r.stderr).toBe(0);
    const gate = t.srv.events.find((e) => e.type === 'gate') as { decision: string; lines: string[] } | undefined;
    expect(gate?.decision).toBe('overridden');
    expect(gate?.lines).toContain('decision: preflight failures overridden by install.skipchecks: cpu.cores, memory, virt.cpu-flags' + (gate!.lines.some((l) => l.startsWith('FAIL virt.kvm')) ? ', virt.kvm' : ''));
    const log = await withMount(await partitionByLabel(t.disk, 'COS_OEM'), t.dir, (m) => readFile(path.join(m, 'install/install.log'), 'utf8'));
    expect(log).toMatch(/"msg":"gate".*"decision":"overridden".*FAIL cpu\.cores/);
  });
});

describe.concurrent('the hardware gate of hvinstall install --config', () => {
  it('judges this machine when there is no --device: a legacy-BIOS host is refused before the disk is touched', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const dir = await tempDir(cleanup);
    const disk = await loopDisk(cleanup, dir, 'target', 260);
    const cfg = path.join(dir, 'c.yaml');
    await writeFile(cfg, configYaml({ device: disk, forceEfi: true, extraInstall: '  skipchecks: true' }));
    const tree = await buildSmallOsTree(dir);
    const r = await hvinstallOn({ firmware: 'bios' }, ['install', '--config', cfg, '--source', tree, '--yes', '--state-dir', path.join(dir, 'state')]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain("install refused by Harvester's hardware gate (this machine)");
    expect(r.stderr).toContain('FAIL firmware.uefi');
    await untouched(disk);
  });

  it('a loop device given as --device is a disk for another machine: judged by --facts, refused when those facts fail', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const dir = await tempDir(cleanup);
    const disk = await loopDisk(cleanup, dir, 'target', 260);
    const cfg = path.join(dir, 'c.yaml');
    await writeFile(cfg, configYaml({ device: disk, forceEfi: true }));
    const tree = await buildSmallOsTree(dir);
    const facts = path.join(dir, 'bios-machine.json');
    await writeFile(facts, JSON.stringify({ sysroot: '/', cpu: { cores: 16, threads: 32, vmx: true, svm: false, devKvm: true }, memoryBytes: 128 * 1024 ** 3, firmware: { uefi: false }, virtualization: { isVm: false }, disks: [], nics: [{ name: 'eth0', mac: '52:54:00:12:34:56', virtual: false, loopback: false, operState: 'up', carrier: true, speedMbps: 10000 }] }));
    const r = await hvinstall(['install', '--config', cfg, '--device', disk, '--facts', facts, '--source', tree, '--yes', '--state-dir', path.join(dir, 'state')]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`install refused by Harvester's hardware gate (the facts in ${facts})`);
    expect(r.stderr).toContain(`checked: the facts in ${facts} (--device ${disk} is a loop device)`);
    expect(r.stderr).toContain('FAIL firmware.uefi');
    expect(r.stderr).not.toContain('cpu.cores');
    await untouched(disk);
    const noDevice = await hvinstall(['install', '--config', cfg, '--facts', facts, '--source', tree, '--yes']);
    expect(noDevice.code).toBe(2);
    expect(noDevice.stderr).toContain('--facts is for a disk built here for another machine (--device onto a loop device)');
  });
});
