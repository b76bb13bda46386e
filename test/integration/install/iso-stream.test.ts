/**
 * Automatic mode with an ISO that is not held in RAM (--iso-to-disk, what a machine whose free RAM
 * is smaller than the ISO gets by itself): before the disk is touched only the ISO's directory,
 * its rootfs.squashfs and harvester-release.yaml are fetched, by byte range; the persistent step
 * then reads the whole ISO once through its sha256 and writes the bundle straight onto
 * COS_PERSISTENT. A wrong sha256, or an ISO that changes on the server mid-install, fails the
 * install with the disk invalidated; a server without byte ranges gets the RAM download.
 */
import { describe, expect, it } from 'vitest';
import { createServer } from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { InstallPlan } from '../../../installer/disk/types.js';
import { Cleanup, tempDir, loopDisk, buildSmallBundle, buildSmallOsTree, configYaml, hvinstall, hvinstallOnUefiMachine, sh, testCleanup, TEST_SYSTEM_SIZE_MIB } from './helpers.js';
import { verifyInstalledDisk } from './verify.js';

interface Served {
  url: string;
  files: Map<string, Buffer>;
  /** The Range header of every request for the ISO, in order ('-' for none). */
  isoRequests: string[];
  events: Array<Record<string, unknown>>;
  /** Called before each ISO answer: lets a test change the ISO on the server. */
  beforeIso?: (range: string) => void;
  /** Bytes of a range answer to send before the connection is cut (undefined: the whole answer). */
  cutAfter?: (range: string) => number | undefined;
}

/** A static server with single byte ranges, a strong ETag and If-Range, as hvpxe serves artifacts. */
async function serve(cleanup: Cleanup, opts: { ranges: boolean }): Promise<Served> {
  const s: Served = { url: '', files: new Map(), isoRequests: [], events: [] };
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/events/m1') {
        for (const line of body.split('\n').filter(Boolean)) {
          try { s.events.push(JSON.parse(line) as Record<string, unknown>); } catch { /* not JSON */ }
        }
        return void res.writeHead(204).end();
      }
      const range = String(req.headers.range ?? '-');
      if (req.url === '/hv.iso') {
        s.isoRequests.push(range);
        s.beforeIso?.(range);
      }
      const f = s.files.get(req.url ?? '');
      if (!f) return void res.writeHead(404).end('not found');
      const etag = `"${createHash('sha256').update(f).digest('hex').slice(0, 16)}"`;
      const m = /^bytes=(\d+)-(\d+)$/.exec(range);
      const ifRange = req.headers['if-range'];
      if (opts.ranges && m && (ifRange === undefined || ifRange === etag)) {
        const start = Number(m[1]);
        const end = Math.min(Number(m[2]), f.length - 1);
        res.writeHead(206, { etag, 'accept-ranges': 'bytes', 'content-range': `bytes ${start}-${end}/${f.length}`, 'content-length': end - start + 1 });
        const cut = req.url === '/hv.iso' ? s.cutAfter?.(range) : undefined;
        if (cut === undefined) return void res.end(f.subarray(start, end + 1));
        return void res.write(f.subarray(start, start + cut), () => res.socket?.destroy());
      }
      res.writeHead(200, { etag, 'content-length': f.length }).end(f);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  cleanup.add(() => new Promise((r) => { server.closeAllConnections(); server.close(() => r(undefined)); }));
  s.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return s;
}

async function buildIso(dir: string, tree: string, bundle: string, name = 'hv.iso'): Promise<Buffer> {
  const isoRoot = path.join(dir, `${name}-root`);
  await mkdir(isoRoot, { recursive: true });
  await sh('mksquashfs', [tree, path.join(isoRoot, 'rootfs.squashfs'), '-noappend', '-quiet', '-comp', 'gzip']);
  await sh('cp', ['-a', bundle, path.join(isoRoot, 'bundle')]);
  const iso = path.join(dir, name);
  await sh('xorriso', ['-as', 'mkisofs', '-quiet', '-R', '-V', 'COS_LIVE', '-o', iso, isoRoot]);
  return readFile(iso);
}

/** An ISO with the OS image and a filler of the bundle's size, but no /bundle. */
async function buildIsoWithoutBundle(dir: string, tree: string, bundle: string): Promise<Buffer> {
  const isoRoot = path.join(dir, 'nobundle-root');
  await mkdir(isoRoot, { recursive: true });
  await sh('mksquashfs', [tree, path.join(isoRoot, 'rootfs.squashfs'), '-noappend', '-quiet', '-comp', 'gzip']);
  await sh('cp', [path.join(bundle, 'filler.bin'), path.join(isoRoot, 'filler.bin')]);
  const iso = path.join(dir, 'nobundle.iso');
  await sh('xorriso', ['-as', 'mkisofs', '-quiet', '-R', '-V', 'COS_LIVE', '-o', iso, isoRoot]);
  return readFile(iso);
}

async function setup(cleanup: Cleanup, opts: { ranges: boolean; sha: 'right' | 'wrong' | 'none'; withBundle?: boolean }) {
  const dir = await tempDir(cleanup);
  const disk = await loopDisk(cleanup, dir, 'target', 260);
  const tree = await buildSmallOsTree(dir);
  const srv = await serve(cleanup, { ranges: opts.ranges });
  const bundle = await buildSmallBundle(dir);
  // Incompressible and larger than the ISO's first 4 MiB that the directory is read from, so the
  // ranges fetched before the disk are not the whole ISO.
  await writeFile(path.join(bundle, 'filler.bin'), randomBytes(8 * 1024 * 1024));
  const iso = opts.withBundle === false ? await buildIsoWithoutBundle(dir, tree, bundle) : await buildIso(dir, tree, bundle);
  srv.files.set('/hv.iso', iso);
  const sha = createHash('sha256').update(iso).digest('hex');
  if (opts.sha !== 'none') srv.files.set('/hv.iso.sha256', Buffer.from(`${opts.sha === 'right' ? sha : sha.replace(/^./, (c) => (c === '0' ? '1' : '0'))}  hv.iso\n`));
  srv.files.set('/config.yaml', Buffer.from(configYaml({ device: disk, forceEfi: true, extraInstall: `  iso_url: ${srv.url}/hv.iso` })));
  const cmdline = path.join(dir, 'cmdline');
  await writeFile(cmdline, `BOOT_IMAGE=/vmlinuz harvester.install.automatic=true harvester.install.config_url=${srv.url}/config.yaml harvester.install.skipchecks=true hvinstall.events_url=${srv.url}/events/m1\n`);
  return { dir, disk, tree, bundle, iso, srv, cmdline, stateDir: path.join(dir, 'state') };
}

const args = (t: Awaited<ReturnType<typeof setup>>) => ['install', '--cmdline-file', t.cmdline, '--iso-to-disk', '--progress', 'json', '--system-size', String(TEST_SYSTEM_SIZE_MIB), '--state-dir', t.stateDir, '--no-reboot'];

async function verifyAsInstalled(t: Awaited<ReturnType<typeof setup>>): Promise<void> {
  const merged = `${t.srv.files.get('/config.yaml')!.toString().trimEnd()}\n  automatic: true\n  skipchecks: true\n  config_url: ${t.srv.url}/config.yaml\n`;
  await writeFile(path.join(t.dir, 'fetched.yaml'), merged);
  const p = await hvinstall(['plan', '--config', path.join(t.dir, 'fetched.yaml'), '--json', '--system-size', String(TEST_SYSTEM_SIZE_MIB)]);
  expect(p.code, p.stderr).toBe(0);
  await verifyInstalledDisk((JSON.parse(p.stdout) as { plan: InstallPlan }).plan, t.tree, t.dir, { bundle: t.bundle });
}

// Each test on disks, directories and a server of its own, most of its time waiting on tools and
// the disk: the tests run side by side (a Cleanup each, run when the test ends).
describe.concurrent('the install ISO streamed to COS_PERSISTENT', () => {
  it('reads the whole ISO through its sha256 before the disk, then streams the bundle in place with the sha256 checked again', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, { ranges: true, sha: 'right' });
    const r = await hvinstallOnUefiMachine(args(t));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toContain('"where":"persistent","why":"--iso-to-disk: the ISO is streamed to COS_PERSISTENT"');
    expect(r.stderr).toMatch(/"msg":"install ISO read and verified before touching the disk".*"verified":"sha256 [0-9a-f]{64} \(from http:\/\/127\.0\.0\.1:\d+\/hv\.iso\.sha256\) matched"/);
    await verifyAsInstalled(t);
    // A one-byte probe, the directory's first MiBs, the whole ISO (verified before the disk), the whole ISO again (the bundle).
    const whole = `bytes=0-${t.iso.length - 1}`;
    expect(t.srv.isoRequests[0]).toBe('bytes=0-0');
    expect(t.srv.isoRequests.at(-1)).toBe(whole);
    expect(t.srv.isoRequests.filter((h) => h === whole)).toHaveLength(2);
    expect(t.srv.events).toContainEqual(expect.objectContaining({ type: 'message', step: 'persistent', message: expect.stringMatching(/^image bundle streamed from .*\/hv\.iso \(streamed to COS_PERSISTENT: --iso-to-disk.*\): 5 files at COS_PERSISTENT\/\.state\/var-lib-rancher\.bind\/hvagent\/bundle; the ISO's sha256 [0-9a-f]{64} matches$/) }));
  });

  it('resumes the ordered read where a dropped connection left it, with If-Range, and installs the same bundle', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, { ranges: true, sha: 'right' });
    const whole = `bytes=0-${t.iso.length - 1}`;
    let cuts = 0;
    const cutAt = 5 * 1024 * 1024 + 123;
    // The second whole read is the one that streams the bundle onto COS_PERSISTENT.
    t.srv.cutAfter = (range) => (range === whole && cuts++ === 1 ? cutAt : undefined);
    const r = await hvinstallOnUefiMachine(args(t));
    expect(r.code, r.stderr).toBe(0);
    await verifyAsInstalled(t);
    // The resumed request starts past what arrived (not at 0), and nothing is read again from 0.
    const resumed = t.srv.isoRequests.slice(t.srv.isoRequests.lastIndexOf(whole) + 1);
    expect(resumed).toHaveLength(1);
    const from = Number(/^bytes=(\d+)-(\d+)$/.exec(resumed[0]!)![1]);
    expect(from).toBeGreaterThan(0);
    expect(from).toBeLessThanOrEqual(cutAt);
    expect(resumed[0]).toBe(`bytes=${from}-${t.iso.length - 1}`);
  });

  // A replaced ISO whose published .sha256 no longer matches: refused before anything from it is
  // deployed, with or without /bundle (without one the stream never reads the ISO again), and with --bundle.
  for (const c of [{ name: 'with /bundle', withBundle: true, extra: [] }, { name: 'without /bundle', withBundle: false, extra: [] }, { name: 'with --bundle given', withBundle: true, extra: ['--bundle', 'none'] }]) {
    it(`refuses an ISO whose sha256 does not match before the disk is touched (${c.name})`, async ({ expect, onTestFinished }) => {
      const cleanup = testCleanup(onTestFinished);
      const t = await setup(cleanup, { ranges: true, sha: 'wrong', withBundle: c.withBundle });
      const r = await hvinstallOnUefiMachine([...args(t), ...c.extra]);
      expect(r.code).toBe(3);
      expect(r.stderr).toMatch(/checksum mismatch for .*\/hv\.iso: expected sha256 [0-9a-f]{64}, got [0-9a-f]{64}/);
      expect(r.stderr).toContain('nothing from this ISO was used');
      await expect(readFile(path.join(t.stateDir, `${path.basename(t.disk)}.journal.json`), 'utf8')).rejects.toThrow(/ENOENT/);
      expect((await sh('blkid', ['-p', t.disk], { allowFailure: true })).code).toBe(2);
    });
  }

  it('refuses an ISO nobody published a digest for, before any of it is read, unless the command line consents', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, { ranges: true, sha: 'none', withBundle: false });
    const r = await hvinstallOnUefiMachine(args(t));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cannot verify the install ISO ${t.srv.url}/hv.iso: no ${t.srv.url}/hv.iso.sha256 is published next to it`);
    expect(r.stderr).toContain('hvinstall.unverified_media=true');
    expect(t.srv.isoRequests).toEqual(['bytes=0-0']);
    expect((await sh('blkid', ['-p', t.disk], { allowFailure: true })).code).toBe(2);
    await writeFile(t.cmdline, `${(await readFile(t.cmdline, 'utf8')).trim()} hvinstall.unverified_media=true\n`);
    const consented = await hvinstallOnUefiMachine(args(t));
    expect(consented.code, consented.stderr).toBe(0);
    expect(consented.stderr).toContain('installed unverified');
  });

  it('fails when the ISO changes on the server between the verified read and the bundle stream (If-Range)', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, { ranges: true, sha: 'right' });
    const other = Buffer.from(t.iso);
    other[other.length - 1] ^= 0xff;
    let wholeReads = 0;
    t.srv.beforeIso = (range) => {
      if (range === `bytes=0-${t.iso.length - 1}` && ++wholeReads === 2) t.srv.files.set('/hv.iso', other);
    };
    const r = await hvinstallOnUefiMachine(args(t));
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('install failed in step persistent');
    expect(r.stderr).toMatch(/answered HTTP 200 to a request for bytes 0-\d+: the ISO changed on the server, or the server stopped serving ranges/);
  });

  it('downloads to RAM as before when the server serves no byte ranges, saying why', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, { ranges: false, sha: 'right' });
    const r = await hvinstallOnUefiMachine(args(t));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toContain('"where":"ram","why":"--iso-to-disk asks to stream the ISO to COS_PERSISTENT, but the server does not serve byte ranges: it goes to RAM"');
    await verifyAsInstalled(t);
  });

  it('a live system without xorriso refuses the streamed path before any ISO byte is fetched, the disk untouched', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const t = await setup(cleanup, { ranges: true, sha: 'right' });
    // A PATH with every command of this machine except xorriso, as a live image built without it.
    const bin = path.join(t.dir, 'bin-without-xorriso');
    await mkdir(bin);
    for (const dir of ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin']) {
      for (const name of await readdir(dir).catch(() => [] as string[])) {
        if (name === 'xorriso' || name.startsWith('xorriso')) continue;
        await symlink(path.join(dir, name), path.join(bin, name)).catch(() => undefined);
      }
    }
    const r = await hvinstallOnUefiMachine(args(t), { PATH: bin });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain('the install ISO must be streamed to disk (--iso-to-disk: the ISO is streamed to COS_PERSISTENT), which needs xorriso, and this live system has none');
    expect(r.stderr).toContain('install.iso_url');
    expect(r.stderr).not.toContain('command not found');
    // Only the size probe reached the ISO.
    expect(t.srv.isoRequests).toEqual(['bytes=0-0']);
    const fh = await open(t.disk, 'r');
    try {
      const head = Buffer.alloc(1024 * 1024, 0xff);
      await fh.read(head, 0, head.length, 0);
      expect(head.every((b) => b === 0)).toBe(true);
    } finally {
      await fh.close();
    }
  });
});
