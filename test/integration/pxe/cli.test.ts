import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, execFileSync } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile, stat, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { makeTree, profilesYaml, runHvpxe, sha256, startHvpxe, stopHvpxe, type Tree } from './harness.js';

let dir: string;
let tree: Tree;
let profiles: string;
const netns = `hvpxe-${randomBytes(3).toString('hex')}`;
let netnsCreated = false;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-pxe-cli-'));
  tree = await makeTree(dir);
  profiles = path.join(dir, 'profiles.yaml');
  await writeFile(profiles, `server_url: http://10.77.0.1:8080\n${profilesYaml(tree)}`);
});

afterAll(async () => {
  if (netnsCreated) execFileSync('ip', ['netns', 'del', netns]);
  await rm(dir, { recursive: true, force: true });
});

describe('hvpxe init', () => {
  it('scaffolds an example whose configs pass the validator once the checksums are filled in', async () => {
    const ex = path.join(dir, 'example');
    const r = await runHvpxe(['init', ex]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(path.join(ex, 'profiles.yaml'));
    expect((await stat(path.join(ex, 'profiles.yaml'))).mode & 0o777).toBe(0o600);
    expect(await readFile(path.join(ex, 'README.md'), 'utf8')).toMatch(/must send a router.*harvester#5675/s);
    let text = await readFile(path.join(ex, 'profiles.yaml'), 'utf8');
    expect(text).toMatch(/fleet: \{ vip: 10\.0\.0\.100/);
    // The artifacts as Harvester v1.8 publishes them (and make iso writes them).
    expect([...text.matchAll(/path: (\S+), sha256/g)].map((m) => m[1])).toEqual([
      'harvester-v1.8.0-vmlinuz-amd64',
      'harvester-v1.8.0-initrd-amd64',
      'harvester-v1.8.0-rootfs-amd64.squashfs',
      'harvester-v1.8.0-amd64.iso',
    ]);
    // Fill in artifacts and their sums the way the README says.
    for (const m of text.matchAll(/path: (\S+), sha256: "(0{64})"/g)) {
      const body = randomBytes(1024);
      await writeFile(path.join(ex, 'artifacts', m[1]), body);
      text = text.replace(`path: ${m[1]}, sha256: "${m[2]}"`, `path: ${m[1]}, sha256: "${sha256(body)}"`);
    }
    await writeFile(path.join(ex, 'profiles.yaml'), text);
    const args = ['serve', '--root', path.join(ex, 'artifacts'), '--profiles', path.join(ex, 'profiles.yaml'), '--listen', '127.0.0.1:0'];
    // The example's secrets are placeholders: the validator refuses them until they are replaced.
    const placeholder = await runHvpxe(args);
    expect(placeholder.code).toBe(1);
    expect(placeholder.stderr).toMatch(/machine node-1 \(group rack1\): token: .*placeholder/);
    expect(placeholder.stderr).not.toContain('change-me-cluster-token');
    text = text.replace('token: change-me-cluster-token', 'token: a-real-cluster-token-7f3a').replace('password: change-me', 'password: a-real-password-9c1e');
    await writeFile(path.join(ex, 'profiles.yaml'), text);
    const hv = await startHvpxe(['serve', '--root', path.join(ex, 'artifacts'), '--profiles', path.join(ex, 'profiles.yaml'), '--listen', '127.0.0.1:0']);
    expect(hv.url).toBe('http://10.0.0.1:8080');
    await stopHvpxe(hv);
    const again = await runHvpxe(['init', ex]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('already exists; not overwriting it');
  });
});

describe('hvpxe render-dnsmasq', () => {
  it('renders a config that dnsmasq --test accepts, and that a real dnsmasq starts with (proxy-DHCP + TFTP)', async () => {
    // dnsmasq drops to an unprivileged user: the TFTP root must be reachable for it.
    await chmod(dir, 0o755);
    const tftp = path.join(dir, 'tftp');
    await mkdir(tftp, { mode: 0o755 });
    const r = await runHvpxe(['render-dnsmasq', '--profiles', profiles, '--tftp-root', tftp, '--interface', 'hvd0']);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('answering proxy-DHCP on 10.77.0.0 (guessed from http://10.77.0.1:8080');
    expect(r.stdout).toContain('pxe-service=tag:ipxe,x86PC,"hvpxe: boot script",http://10.77.0.1:8080/boot.ipxe');
    const conf = path.join(dir, 'dnsmasq.conf');
    await writeFile(conf, r.stdout);
    const test = execFileSync('dnsmasq', ['--test', '-C', conf], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    expect(test + '').toBe('');

    // A real start inside a private network namespace, on a veth of the guessed subnet.
    execFileSync('ip', ['netns', 'add', netns]);
    netnsCreated = true;
    const ipn = (...a: string[]): void => void execFileSync('ip', ['-n', netns, ...a]);
    ipn('link', 'set', 'lo', 'up');
    ipn('link', 'add', 'hvd0', 'type', 'veth', 'peer', 'name', 'hvd1');
    ipn('addr', 'add', '10.77.0.1/24', 'dev', 'hvd0');
    ipn('link', 'set', 'hvd0', 'up');
    ipn('link', 'set', 'hvd1', 'up');
    const pidFile = path.join(dir, 'dnsmasq.pid');
    const proc = spawn('ip', ['netns', 'exec', netns, 'dnsmasq', '-k', '--log-facility=-', `--pid-file=${pidFile}`, '-C', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    proc.stdout.on('data', (d) => (log += d));
    proc.stderr.on('data', (d) => (log += d));
    try {
      const started = Date.now();
      while (!/TFTP root is/.test(log) && proc.exitCode === null && Date.now() - started < 20_000) await new Promise((res) => setTimeout(res, 100));
      expect(`exit ${proc.exitCode}: ${log}`).toMatch(/^exit null: /);
      expect(log).toMatch(/DHCP, proxy on subnet 10\.77\.0\.0/);
      expect(log).toContain(`TFTP root is ${tftp}`);
    } finally {
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise((res) => proc.once('exit', res));
        proc.kill('SIGTERM');
        await exited;
      }
    }
  });

  it('needs a subnet when the server URL has no IPv4 address', async () => {
    const r = await runHvpxe(['render-dnsmasq', '--server-url', 'http://pxe.example:8080']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('pass --subnet NET');
  });
});

describe('hvpxe render-ipxe', () => {
  it('prints boot.ipxe and every machine script', async () => {
    const r = await runHvpxe(['render-ipxe', '--profiles', profiles, '--platform', 'pcbios']);
    expect(r.code).toBe(0);
    expect(r.stdout.match(/^### .*$/gm)).toEqual(['### boot.ipxe', '### ipxe/node-1.ipxe', '### ipxe/node-2.ipxe', '### ipxe/node-3.ipxe']);
    expect(r.stdout).toContain('kernel http://10.77.0.1:8080/artifacts/k/vmlinuz ip=dhcp ');
    expect(r.stdout).not.toContain('cluster-token-xyz123');
  });

  it('--out writes scripts and validated configs (0600) for your own HTTP server', async () => {
    const out = path.join(dir, 'www');
    const r = await runHvpxe(['render-ipxe', '--profiles', profiles, '--out', out]);
    expect(r.code).toBe(0);
    expect((await stat(path.join(out, 'config/node-1.yaml'))).mode & 0o777).toBe(0o600);
    expect(await readFile(path.join(out, 'config/node-2.yaml'), 'utf8')).toContain('server_url: https://10.0.0.100:443');
    expect(await readFile(path.join(out, 'ipxe/node-2.ipxe'), 'utf8')).toContain('harvester.install.config_url=http://10.77.0.1:8080/config/node-2.yaml?mac=52:54:00:00:00:02');
    const bad = path.join(dir, 'bad.yaml');
    await writeFile(bad, `server_url: http://10.77.0.1:8080\n${profilesYaml(tree, { token: null })}`);
    const refused = await runHvpxe(['render-ipxe', '--profiles', bad, '--out', path.join(dir, 'www2')]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/configs invalid/);
    await expect(stat(path.join(dir, 'www2'))).rejects.toThrow();
  });
});
