import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { prepareAutomaticInstall, isAutomaticCmdline, mediaSource, postProgressEvent } from '../../../installer/remote/automatic.js';
import { fetchInstallIso } from '../../../installer/remote/install-media.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { bootIpxe, machineOf, makeTree, profilesYaml, REPO, sha256, startHvpxe, stopHvpxe, type Running, type Tree } from '../pxe/harness.js';

let dir: string;
let tree: Tree;
let profiles: string;
let hv: Running | undefined;
let configText: string;
const extra: http.Server[] = [];
const late: Running[] = [];

const quiet = () => new Logger(new MemorySink());
const fast = { attempts: 5, retryDelayMs: 200, timeoutMs: 2_000 };

function cmdline(configUrl: string): string {
  return `BOOT_IMAGE=vmlinuz ip=dhcp net.ifnames=1 rd.cos.disable console=tty1 root=live:http://x/rootfs.squashfs harvester.install.automatic=true harvester.install.config_url=${configUrl}`;
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-remote-auto-'));
  tree = await makeTree(dir);
  profiles = path.join(dir, 'profiles.yaml');
  await writeFile(profiles, profilesYaml(tree));
  hv = await startHvpxe(['serve', '--root', tree.root, '--profiles', profiles, '--listen', '127.0.0.1:0']);
  configText = await (await fetch(await configUrl('52:54:00:00:00:01'))).text();
});

/** A config URL as hvpxe hands it to a booting machine (with a boot credential, good for one fetch). */
async function configUrl(mac: string): Promise<string> {
  return (await bootIpxe(hv!, `mac=${mac}`)).config!;
}

afterAll(async () => {
  await stopHvpxe(hv);
  for (const r of late) await stopHvpxe(r);
  await rm(dir, { recursive: true, force: true });
});

afterEach(async () => {
  for (const s of extra.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

async function flaky(handler: (i: number, res: http.ServerResponse) => void): Promise<{ url: string; hits: () => number }> {
  let n = 0;
  const s = http.createServer((_req, res) => handler(n++, res));
  extra.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}/config.yaml`, hits: () => n };
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe('prepareAutomaticInstall', () => {
  it('fetches config_url from hvpxe, merges the command line over it, validates, and reports media and webhooks', async () => {
    const url = await configUrl('52:54:00:00:00:01');
    const a = await prepareAutomaticInstall(`${cmdline(url)} harvester.install.skipchecks=true`, { fetch: fast, log: quiet() });
    // Named without its boot credential (it is printed and recorded).
    expect(a.source).toBe(url.replace(/credential=[A-Za-z0-9_-]{43}$/, 'credential=<redacted>'));
    expect(a.config.install).toMatchObject({ mode: 'create', automatic: true, skipchecks: true, vip: '10.0.0.100' });
    expect(a.media).toEqual({ kind: 'url', url: `${hv!.url}/artifacts/harvester.iso` });
    await a.webhooks.send('STARTED', { Hostname: 'node-1' });
    expect((await machineOf(hv!, 'node-1')).progress?.event).toBe('STARTED');
    expect(a.events.url).toBeUndefined();
  });

  it('posts our progress events to the hvinstall.events_url that hvpxe put on the kernel line, secrets redacted', async () => {
    const script = await (await fetch(`${hv!.url}/ipxe/auto?mac=52:54:00:00:00:02`)).text();
    const kernelLine = script.split('\n').find((l) => l.startsWith('kernel '))!;
    const args = kernelLine.replace(/^kernel \S+ /, '').replace(/ \|\| goto failed$/, '');
    const a = await prepareAutomaticInstall(args, { fetch: fast, log: quiet() });
    expect(a.events.url).toMatch(new RegExp(`^${hv!.url}/events/node-2\\?credential=[A-Za-z0-9_-]{43}$`));
    await a.events.post({ type: 'step', step: 'partition', status: 'done', token: a.config.token });
    const n2 = await machineOf(hv!, 'node-2');
    expect(n2.progress?.event).toBe('step');
    expect(n2.events.at(-1)!.data).toMatchObject({ type: 'step', step: 'partition', status: 'done', token: '<redacted>' });
    // An unreachable events URL costs at most the timeout and never throws.
    const sink = new MemorySink();
    await expect(postProgressEvent(`http://127.0.0.1:${await freePort()}/events/x`, { type: 'x' }, new Logger(sink, undefined, 'debug'))).resolves.toBeUndefined();
    expect(sink.lines.join('')).toContain('progress event not delivered');
  });

  it('refuses a command line without automatic=true, and recognises its spellings', async () => {
    await expect(prepareAutomaticInstall('ip=dhcp harvester.install.config_url=http://x/', { log: quiet() })).rejects.toThrow(/not an automatic install/);
    expect(isAutomaticCmdline('a harvester.install.automatic b')).toBe(true);
    expect(isAutomaticCmdline('harvester.install.automatic="yes"')).toBe(true);
    expect(isAutomaticCmdline('harvester.install.automatic=false')).toBe(false);
    expect(mediaSource({ install: { isoUrl: 'local' } })).toEqual({ kind: 'local' });
  });

  it('waits for a server that is down and comes up (Harvester-style retries)', async () => {
    const port = await freePort();
    // The credential comes from the running hvpxe; the late one shares its state directory, so it knows it.
    const url = (await configUrl('52:54:00:00:00:01')).replace(new URL(hv!.url).port, String(port));
    await new Promise((r) => setTimeout(r, 500));
    setTimeout(() => {
      void startHvpxe(['serve', '--root', tree.root, '--profiles', profiles, '--listen', `127.0.0.1:${port}`]).then((r) => late.push(r));
    }, 1_000);
    const a = await prepareAutomaticInstall(cmdline(url), { fetch: { attempts: 60, retryDelayMs: 250, timeoutMs: 2_000 }, log: quiet() });
    expect(a.config.install?.mode).toBe('create');
  });

  it('retries a 500 and then gets the config', async () => {
    const s = await flaky((i, res) => {
      res.statusCode = i === 0 ? 500 : 200;
      res.end(i === 0 ? 'boom' : configText);
    });
    const a = await prepareAutomaticInstall(cmdline(s.url), { fetch: fast, log: quiet() });
    expect(s.hits()).toBe(2);
    expect(a.config.install?.mode).toBe('create');
  });

  it('a slow body times out and the next attempt succeeds', async () => {
    const s = await flaky((i, res) => {
      res.writeHead(200, { 'Content-Type': 'application/yaml' });
      if (i === 0) return void res.write(configText.slice(0, 20)); // then nothing
      res.end(configText);
    });
    const a = await prepareAutomaticInstall(cmdline(s.url), { fetch: { attempts: 3, retryDelayMs: 100, timeoutMs: 1_000 }, log: quiet() });
    expect(s.hits()).toBe(2);
    expect(a.config.install?.mode).toBe('create');
  });

  it('gives clear messages: refused, 404 (not retried), HTML instead of YAML, DNS, wrong pinned sha256', async () => {
    const port = await freePort();
    await expect(prepareAutomaticInstall(cmdline(`http://127.0.0.1:${port}/c.yaml`), { fetch: { attempts: 2, retryDelayMs: 50 }, log: quiet() })).rejects.toThrow(
      /automatic install: cannot fetch config: connection refused by 127\.0\.0\.1:\d+ \(after 2 attempts\)/,
    );
    const nf = await flaky((_i, res) => {
      res.statusCode = 404;
      res.end();
    });
    await expect(prepareAutomaticInstall(cmdline(nf.url), { fetch: fast, log: quiet() })).rejects.toThrow(/HTTP 404 from/);
    expect(nf.hits()).toBe(1);
    const html = await flaky((_i, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end('<!doctype html><html><body>Welcome to nginx!</body></html>');
    });
    await expect(prepareAutomaticInstall(cmdline(html.url), { fetch: fast, log: quiet() })).rejects.toThrow(/invalid configuration .*\n.*returned an HTML page/);
    await expect(prepareAutomaticInstall(cmdline('http://no-such-host.invalid/c.yaml'), { fetch: { attempts: 1 }, log: quiet() })).rejects.toThrow(/cannot resolve host no-such-host\.invalid/);
    await expect(
      prepareAutomaticInstall(cmdline(await configUrl('52:54:00:00:00:01')), { fetch: { ...fast, sha256: '0'.repeat(64) }, log: quiet() }),
    ).rejects.toThrow(/sha256 mismatch for .*: expected 0{64}, got [0-9a-f]{64}/);
  });

  it('an invalid remote config stops with the validator findings and keeps secrets out', async () => {
    const s = await flaky((_i, res) => res.end(configText.replace(/^token: .*$/m, '').replace('mode: create', 'mode: bogus')));
    const err = await prepareAutomaticInstall(cmdline(s.url), { fetch: fast, log: quiet() }).catch((e: Error) => e);
    expect((err as Error).message).toMatch(/invalid configuration/);
    expect((err as Error).message).toMatch(/config\.yaml:\d+: install\.mode: .*bogus/);
    expect((err as Error).message).not.toContain('root-password-secret');
  });
});

describe('fetchInstallIso', () => {
  it("downloads iso_url from hvpxe and verifies it against the artifact's published sha256", async () => {
    const work = path.join(dir, 'w1');
    await mkdir(work);
    const r = await fetchInstallIso({ kind: 'url', url: `${hv!.url}/artifacts/harvester.iso` }, work, { log: quiet() });
    expect(r).toMatchObject({ verified: true, sha256: sha256(tree.files['harvester.iso']) });
    expect(sha256(await readFile(r.path))).toBe(sha256(tree.files['harvester.iso']));
  });

  it('a wrong sha256 stops before any disk is touched and leaves nothing behind', async () => {
    const work = path.join(dir, 'w2');
    await mkdir(work);
    // The ISO on the server changes after hvpxe published its checksum.
    await writeFile(path.join(tree.root, 'harvester.iso'), Buffer.concat([tree.files['harvester.iso'], Buffer.from('tampered')]));
    try {
      await expect(fetchInstallIso({ kind: 'url', url: `${hv!.url}/artifacts/harvester.iso` }, work, { log: quiet() })).rejects.toThrow(
        new RegExp(`checksum mismatch for .*harvester\\.iso: expected sha256 ${sha256(tree.files['harvester.iso'])}, got`),
      );
      expect(await readdir(work)).toEqual([]);
    } finally {
      await writeFile(path.join(tree.root, 'harvester.iso'), tree.files['harvester.iso']);
    }
  });

  it('refuses an automatic install without iso_url', async () => {
    await expect(fetchInstallIso({ kind: 'none' }, dir)).rejects.toThrow('iso_url is required in automatic installation');
  });
});

describe('hvinstall fetch', () => {
  const run = (args: string[]) =>
    new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      const p = spawn(process.execPath, [path.join(REPO, 'dist/installer/cli.js'), 'fetch', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      p.stdout.on('data', (d) => (out += d));
      p.stderr.on('data', (d) => (err += d));
      p.on('exit', (code) => resolve({ code, out, err }));
    });

  it('fetch iso downloads and verifies; fetch config validates and writes the merged config 0600', async () => {
    const out = path.join(dir, 'by-hand.iso');
    const r = await run(['iso', `${hv!.url}/artifacts/harvester.iso`, '--output', out]);
    expect(r.code).toBe(0);
    expect(r.out).toContain(`sha256 ${sha256(tree.files['harvester.iso'])} (verified)`);
    expect(r.err).toMatch(/by-hand\.iso: \d+\.\d\/2\.0 MiB/);
    const cfgOut = path.join(dir, 'merged.yaml');
    const c = await run(['config', '--cmdline', cmdline(await configUrl('52:54:00:00:00:02')), '--attempts', '2', '--output', cfgOut]);
    expect(c.code).toBe(0);
    expect(c.out).toContain('valid; merged config written to');
    expect(await readFile(cfgOut, 'utf8')).toMatch(/serverurl: https:\/\/10\.0\.0\.100:443/i);
    const bad = await run(['iso', `${hv!.url}/artifacts/harvester.iso`, '--output', path.join(dir, 'x.iso'), '--sha256', 'f'.repeat(64)]);
    expect(bad.code).toBe(3);
    expect(bad.err).toContain('checksum mismatch');
    expect((await run(['iso'])).code).toBe(2);
  });
});
