/**
 * registries against real files and daemons: the guard renders /etc/rancher/rke2/registries.yaml from
 * /oem/harvester.config (written by the installer's serialiser), restores it when it is truncated,
 * deleted or edited, applies a changed source; and the rendered mirror really works: a real
 * containerd pulls, through the mirror, an image held by a real registry (docker-registry) on
 * 127.0.0.1, pushed there with skopeo from an OCI layout built by hand.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rename, rm, stat, truncate, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { run } from '../../../../lib/exec.js';
import { Logger, MemorySink } from '../../../../lib/logger.js';
import { Redactor } from '../../../../lib/redact.js';
import { runGuards } from '../../../../agent/runner.js';
import { statusFile } from '../../../../agent/status.js';
import { defaultSettings } from '../../../../agent/settings.js';
import type { StatusDocument } from '../../../../agent/guard.js';
import { serialiseHarvesterConfig } from '../../../../config/index.js';
import { renderRegistriesYaml } from '../../../../node/registries.js';

let dir: string;
const daemons: ChildProcess[] = [];
const REG = 'etc/rancher/rke2/registries.yaml';

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hvagent-reg-'));
});

afterEach(async () => {
  for (const d of daemons.splice(0)) {
    if (d.exitCode === null && d.signalCode === null) {
      d.kill('SIGTERM');
      await new Promise((r) => d.once('exit', r));
    }
  }
  const mounts = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').map((l) => l.split(' ')[4]).filter((m): m is string => !!m && m.startsWith(dir + '/'));
  for (const m of mounts.reverse()) await run('umount', ['-l', m], { allowFailure: true });
  await rm(dir, { recursive: true, force: true });
});

async function writeNodeConfig(setting: string): Promise<void> {
  const text = await serialiseHarvesterConfig({ schemeVersion: 1, token: 'node-token-secret', install: { mode: 'create', vip: '10.0.0.100', vipMode: 'static' }, systemSettings: { 'containerd-registry': setting } });
  await mkdir(path.join(dir, 'oem'), { recursive: true });
  await writeFile(path.join(dir, 'oem/harvester.config'), text, { mode: 0o600 });
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const fileContent = () => readFile(path.join(dir, REG), 'utf8');

function startAgent(checkIntervalMs: number) {
  const stop = new AbortController();
  const sink = new MemorySink();
  const s = defaultSettings();
  s.backoff = { initialMs: 100, maxMs: 500 };
  s.guards.registries = { checkIntervalMs };
  const log = new Logger(sink, new Redactor());
  const done = runGuards({ mode: 'run', rootDir: dir, settings: s, log, signal: stop.signal, only: ['registries'] });
  return { stop, sink, done };
}

async function phase(): Promise<string | undefined> {
  const doc = JSON.parse(await readFile(statusFile(dir), 'utf8')) as StatusDocument;
  return doc.guards[0]?.phase === 'watching' ? 'watching' : undefined;
}

const MIRROR = '{"Mirrors":{"docker.io":{"Endpoints":["https://mirror.example:5000"]}},"Configs":{"mirror.example:5000":{"Auth":{"Username":"puller","Password":"p4ss-w0rd-secret"}}}}';

describe('registries guard keeps registries.yaml', () => {
  it('renders it 0600 with credentials, and restores it within 2 s when truncated, deleted or edited', async () => {
    await writeNodeConfig(MIRROR);
    // Periodic checks far apart: restoring must come from watching the directory.
    const agent = startAgent(600_000);
    try {
      await waitFor('watching', phase, 60_000);
      const want = renderRegistriesYaml(MIRROR);
      expect(await fileContent()).toBe(want);
      expect((await stat(path.join(dir, REG))).mode & 0o777).toBe(0o600);

      await truncate(path.join(dir, REG), 0);
      await waitFor('restored after truncate', async () => ((await fileContent()) === want ? true : undefined), 2000);

      await unlink(path.join(dir, REG));
      await waitFor('restored after delete', async () => ((await fileContent()) === want ? true : undefined), 2000);

      // Edited the way an editor saves: a new file renamed over the old one.
      await writeFile(path.join(dir, REG + '.new'), want.replace('mirror.example:5000"', 'evil.example"'));
      await rename(path.join(dir, REG + '.new'), path.join(dir, REG));
      await waitFor('restored after edit', async () => ((await fileContent()) === want ? true : undefined), 2000);

      // The whole directory removed (moved away at once, then deleted): recreated, watched again.
      await rename(path.join(dir, 'etc/rancher/rke2'), path.join(dir, 'rke2.gone'));
      await rm(path.join(dir, 'rke2.gone'), { recursive: true });
      await waitFor('restored after the directory was removed', async () => ((await fileContent()) === want ? true : undefined), 2000);

      // Back-to-back damage, each right after the previous restore: no change may slip between checks.
      for (let i = 0; i < 5; i++) {
        await truncate(path.join(dir, REG), 0);
        await waitFor(`restored after truncate #${i}`, async () => ((await fileContent()) === want ? true : undefined), 2000);
        await unlink(path.join(dir, REG));
        await waitFor(`restored after delete #${i}`, async () => ((await fileContent()) === want ? true : undefined), 2000);
      }

      const drift = agent.sink.lines.map((l) => JSON.parse(l) as { msg: string; drift?: string }).filter((l) => l.msg.startsWith('registries.yaml drift'));
      expect(drift.map((d) => d.drift)).toEqual(expect.arrayContaining(['truncated', 'deleted', 'edited']));
      expect(agent.sink.lines.join('')).not.toContain('p4ss-w0rd-secret');
    } finally {
      agent.stop.abort();
      await agent.done;
    }
    const doc = JSON.parse(await readFile(statusFile(dir), 'utf8')) as StatusDocument;
    expect(doc.state).toBe('stopped');
    expect(JSON.stringify(doc)).not.toContain('p4ss-w0rd-secret');
  });

  it('applies a changed declared source, including a change to configs only (harvester#4530)', async () => {
    await writeNodeConfig(MIRROR);
    const agent = startAgent(300);
    try {
      await waitFor('watching', phase, 60_000);
      const changed = MIRROR.replace('p4ss-w0rd-secret', 'n3w-p4ss-secret');
      await writeNodeConfig(changed);
      const want = renderRegistriesYaml(changed);
      await waitFor('new source applied', async () => ((await fileContent()) === want ? true : undefined), 30_000);
      // The log line follows the write: wait for it too.
      await waitFor('source change logged', async () => (agent.sink.lines.some((l) => l.includes('declared containerd-registry changed')) ? true : undefined), 10_000);
      expect(agent.sink.lines.join('')).not.toContain('n3w-p4ss-secret');
    } finally {
      agent.stop.abort();
      await agent.done;
    }
  });

  it('fails with the setting\'s error and leaves the existing file alone when the source is not valid', async () => {
    await writeNodeConfig('{"Mirrors": {"docker.io": {"Endpoints": ["ftp://nope"]}}}');
    await mkdir(path.join(dir, 'etc/rancher/rke2'), { recursive: true });
    await writeFile(path.join(dir, REG), 'mirrors: {}\n');
    const s = defaultSettings();
    const r = await runGuards({ mode: 'once', rootDir: dir, settings: s, log: new Logger(new MemorySink(), new Redactor()), signal: new AbortController().signal, only: ['registries'] });
    expect(r.ok).toBe(false);
    expect(r.status.guards[0]!.lastError).toBe('system_settings.containerd-registry (/oem/harvester.config system_settings.containerd-registry): Mirrors.docker.io.Endpoints: "ftp://nope" is not an http(s) URL');
    expect(await fileContent()).toBe('mirrors: {}\n');
  });
});

/** A one-layer image as an OCI layout, built by hand (no network, no image builder). */
async function buildOciLayout(ociDir: string, fileText: string): Promise<void> {
  const blobs = path.join(ociDir, 'blobs/sha256');
  await mkdir(blobs, { recursive: true });
  const layerSrc = path.join(dir, 'layer');
  await mkdir(layerSrc, { recursive: true });
  await writeFile(path.join(layerSrc, 'hello.txt'), fileText);
  const layerTar = path.join(dir, 'layer.tar');
  await run('tar', ['-C', layerSrc, '-cf', layerTar, 'hello.txt']);
  const tar = await readFile(layerTar);
  const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
  const put = async (b: Buffer | string) => {
    await writeFile(path.join(blobs, sha(b)), b);
    return { digest: `sha256:${sha(b)}`, size: Buffer.byteLength(b) };
  };
  const layer = await put(tar);
  const config = await put(JSON.stringify({ architecture: 'amd64', os: 'linux', config: {}, rootfs: { type: 'layers', diff_ids: [`sha256:${sha(tar)}`] } }));
  const manifest = await put(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config }, layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', ...layer }] }));
  await writeFile(path.join(ociDir, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests: [{ mediaType: 'application/vnd.oci.image.manifest.v1+json', ...manifest, annotations: { 'org.opencontainers.image.ref.name': '1.0' } }] }));
  await writeFile(path.join(ociDir, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');
}

function startDaemon(cmd: string, args: string[]): { child: ChildProcess; output: () => string } {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  daemons.push(child);
  return { child, output: () => out };
}

async function startRegistry(): Promise<string> {
  const conf = path.join(dir, 'registry.yml');
  await writeFile(conf, `version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: ${dir}/registry-store\nhttp:\n  addr: 127.0.0.1:0\n`);
  const reg = startDaemon('docker-registry', ['serve', conf]);
  return waitFor('registry listening', async () => /listening on (127\.0\.0\.1:\d+)/.exec(reg.output())?.[1], 30_000);
}

async function startContainerd(): Promise<string> {
  const c = path.join(dir, 'ctd');
  await mkdir(c, { recursive: true });
  const sock = path.join(c, 'c.sock');
  await writeFile(path.join(c, 'config.toml'), `version = 2\nroot = "${c}/root"\nstate = "${c}/state"\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n[grpc]\n  address = "${sock}"\n[ttrpc]\n  address = "${c}/t.sock"\n`);
  startDaemon('containerd', ['-c', path.join(c, 'config.toml')]);
  await waitFor('containerd answering', async () => ((await run('ctr', ['-a', sock, 'version'], { timeoutMs: 5000, allowFailure: true })).exitCode === 0 ? true : undefined), 60_000);
  return sock;
}

const RKE2_CASE = path.resolve(import.meta.dirname, '../../../fixtures/rke2-registries/mirror-http');

/** A copy of the case's certs.d (the hosts.toml RKE2 writes, see its README) for the registry on `port`. */
async function rke2HostsDir(port: string, into: string): Promise<string> {
  const rel = 'registry.hv.invalid/hosts.toml';
  const text = (await readFile(path.join(RKE2_CASE, 'certs.d', rel), 'utf8')).replaceAll('__PORT__', port);
  await mkdir(path.dirname(path.join(into, rel)), { recursive: true });
  await writeFile(path.join(into, rel), text);
  return into;
}

describe('the rendered mirror works with real containerd and a real registry', () => {
  it('containerd reads the hosts.toml RKE2 writes for the rendered registries.yaml and pulls through the mirror of a name that does not resolve', async () => {
    const addr = await startRegistry();
    const port = addr.split(':')[1]!;
    const oci = path.join(dir, 'oci');
    await buildOciLayout(oci, 'hello from the mirror\n');
    await run('skopeo', ['copy', '--dest-tls-verify=false', `oci:${oci}:1.0`, `docker://${addr}/hv/hello:1.0`], { timeoutMs: 120_000 });
    const sock = await startContainerd();

    const setting = (await readFile(path.join(RKE2_CASE, 'setting.json'), 'utf8')).replaceAll('__PORT__', port).trim();
    await writeNodeConfig(setting);
    const r = await runGuards({ mode: 'once', rootDir: dir, settings: defaultSettings(), log: new Logger(new MemorySink(), new Redactor()), signal: new AbortController().signal, only: ['registries'] });
    expect(r.ok).toBe(true);
    // The registries.yaml the RKE2 case was written from is exactly what the guard rendered.
    expect(await fileContent()).toBe((await readFile(path.join(RKE2_CASE, 'registries.yaml'), 'utf8')).replaceAll('__PORT__', port));

    // Without the mirror the name does not resolve: the pull fails.
    const noMirror = await run('ctr', ['-a', sock, '-n', 'k8s.io', 'images', 'pull', '--hosts-dir', path.join(dir, 'empty-hosts'), 'registry.hv.invalid/hv/hello:1.0'], { timeoutMs: 120_000, allowFailure: true });
    expect(noMirror.exitCode).not.toBe(0);

    const hostsDir = await rke2HostsDir(port, path.join(dir, 'certs.d'));
    await run('ctr', ['-a', sock, '-n', 'k8s.io', 'images', 'pull', '--hosts-dir', hostsDir, 'registry.hv.invalid/hv/hello:1.0'], { timeoutMs: 120_000 });
    const images = await run('ctr', ['-a', sock, '-n', 'k8s.io', 'images', 'ls', '-q']);
    expect(images.stdout.split('\n')).toContain('registry.hv.invalid/hv/hello:1.0');
  });
});
