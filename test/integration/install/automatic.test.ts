/**
 * Automatic mode (`hvinstall install --cmdline-file`), as a PXE-booted node runs it: the config from
 * harvester.install.config_url merged under the command line, the OS from the ISO at install.iso_url
 * (downloaded and checked before any disk is touched), progress posted to hvinstall.events_url.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createServer } from 'node:http';
import { createHash } from 'node:crypto';
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { InstallPlan } from '../../../installer/disk/types.js';
import { Cleanup, tempDir, loopDisk, buildSmallBundle, buildSmallOsTree, configYaml, hvinstall, sh, TEST_SYSTEM_SIZE_MIB } from './helpers.js';
import { verifyInstalledDisk } from './verify.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

interface Served {
  url: string;
  files: Map<string, Buffer>;
  events: Array<Record<string, unknown>>;
}

/** A plain HTTP server on 127.0.0.1 standing in for hvpxe: static files and the /events endpoint. */
async function serve(): Promise<Served> {
  const files = new Map<string, Buffer>();
  const events: Array<Record<string, unknown>> = [];
  const server = createServer((req, res) => {
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
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, files, events };
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

async function setup(publishSha: 'right' | 'wrong', isoUrl: 'served' | 'local' = 'served') {
  const dir = await tempDir(cleanup);
  const disk = await loopDisk(cleanup, dir, 'target', 260);
  const tree = await buildSmallOsTree(dir);
  const srv = await serve();
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
      `harvester.install.skipchecks=true hvinstall.events_url=${srv.url}/events/m1\n`,
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

describe('hvinstall install --cmdline-file (automatic mode)', () => {
  it('fetches the config and the ISO, installs its rootfs and copies its bundle/ without --yes, and posts progress to the events URL', async () => {
    const t = await setup('right');
    // The live installer passes the image it carries as a fallback: an http(s) iso_url still wins.
    const fallback = path.join(t.dir, 'fallback-tree');
    await mkdir(path.join(fallback, 'etc'), { recursive: true });
    await writeFile(path.join(fallback, 'etc/not-the-iso'), 'the fallback must not be installed\n');
    const r = await hvinstall([...autoArgs(t.cmdline, t.stateDir), '--fallback-source', fallback]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toContain('integration-secret-token');
    await verifyAsInstalled(t, { bundle: t.bundle });
    expect(t.srv.events).toContainEqual(expect.objectContaining({ type: 'message', step: 'persistent', message: expect.stringMatching(/^image bundle from the install ISO \(.*\/bundle\): 4 files/) }));
    const done = t.srv.events.filter((e) => e.type === 'step' && e.phase === 'done').map((e) => e.step);
    expect(done).toContain('deploy');
    expect(done.at(-1)).toBe('finish');
    expect(JSON.stringify(t.srv.events)).not.toContain('integration-secret-token');
  });

  it('installs the fallback source for iso_url local, without looking for a boot medium or an ISO', async () => {
    const t = await setup('right', 'local');
    const r = await hvinstall([...autoArgs(t.cmdline, t.stateDir), '--fallback-source', t.tree, '--bundle', 'none']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toMatch(/"from":"fallback"/);
    await verifyAsInstalled(t);
  });

  it('refuses --fallback-source outside automatic mode', async () => {
    const dir = await tempDir(cleanup);
    const cfg = path.join(dir, 'c.yaml');
    await writeFile(cfg, configYaml({ device: '/dev/null', forceEfi: true }));
    const r = await hvinstall(['install', '--config', cfg, '--fallback-source', dir]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--fallback-source is for automatic mode (--cmdline-file without --config); use --source');
  });

  it('stops before touching the disk when the ISO does not match its published sha256', async () => {
    const t = await setup('wrong');
    const r = await hvinstall(autoArgs(t.cmdline, t.stateDir));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/sha256/i);
    // No partition table was written.
    const pt = await sh('sfdisk', ['--dump', t.disk], { allowFailure: true });
    expect(pt.code).not.toBe(0);
    expect((await sh('wipefs', ['--noheadings', t.disk])).stdout.trim()).toBe('');
  });

  it('refuses a command line that does not ask for an automatic install', async () => {
    const dir = await tempDir(cleanup);
    const f = path.join(dir, 'cmdline');
    await writeFile(f, 'BOOT_IMAGE=/vmlinuz console=ttyS0 harvester.install.config_url=http://127.0.0.1:1/c.yaml\n');
    const r = await hvinstall(['install', '--cmdline-file', f]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${f} does not ask for an automatic install (no harvester.install.automatic=true)`);
  });
});
