/** Starts the real `hvpxe serve` (built, dist/) on 127.0.0.1 and talks to it over raw sockets and curl. */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, writeFile, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { scriptUrls } from '../../unit/pxe/script-urls.js';

export { scriptUrls };

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const CLI = path.join(REPO, 'dist/pxe/cli.js');

export interface Running {
  proc: ChildProcess;
  url: string;
  /** The admin listener (/machines, /metrics) and the operator token it wants. */
  adminUrl: string;
  token: string;
  stdout: string[];
  stderr: string[];
}

export function sha256(b: Buffer | string): string {
  return createHash('sha256').update(b).digest('hex');
}

/**
 * Spawns hvpxe and waits for its "serving" line (or its exit). The admin listener goes on an
 * ephemeral port unless the arguments name one. `spawnAs` runs it through another command (e.g.
 * setpriv, to run it as another user).
 */
export function startHvpxe(args: string[], timeoutMs = 60_000, spawnAs: string[] = []): Promise<Running> {
  const full = args[0] === 'serve' && !args.includes('--admin-listen') ? [...args, '--admin-listen', '127.0.0.1:0'] : args;
  const argv = [...spawnAs, process.execPath, CLI, ...full];
  const proc = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  const out: string[] = [];
  const err: string[] = [];
  proc.stderr!.on('data', (d) => err.push(String(d)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`hvpxe did not start within ${timeoutMs} ms: ${err.join('')}`));
    }, timeoutMs);
    proc.stdout!.on('data', (d) => {
      out.push(String(d));
      const m = /hvpxe: serving (\S+) .*\n/.exec(out.join(''));
      if (m) {
        clearTimeout(timer);
        // Without an admin listener (an hvpxe before it), /machines was on the boot listener.
        const admin = /; admin (\S+) \(token in (\S+)\)/.exec(m[0]);
        resolve({ proc, url: m[1]!, adminUrl: admin?.[1] ?? m[1]!, token: admin ? readFileSync(admin[2]!, 'utf8').trim() : '', stdout: out, stderr: err });
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(Object.assign(new Error(`hvpxe exited with ${code}: ${err.join('')}`), { exitCode: code, stderr: err.join('') }));
    });
  });
}

/** The first line of hvpxe's stderr matching `re`, waiting for it up to `ms` (a request's line is written once its response has closed). */
export async function logLine(r: Running, re: RegExp, ms = 10_000): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    const line = r.stderr.join('').split('\n').find((l) => re.test(l));
    if (line) return line;
    if (Date.now() > deadline) throw new Error(`no hvpxe log line matching ${re} within ${ms} ms`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

/** A GET on the admin listener with the operator token. */
export async function adminGet(r: Running, p: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${r.adminUrl}${p}`, { headers: { Authorization: `Bearer ${r.token}` } });
  return { status: res.status, text: await res.text() };
}

/** One machine of /machines (admin listener). */
export async function machineOf(r: Running, name: string): Promise<Record<string, any>> {
  return (JSON.parse((await adminGet(r, '/machines')).text) as { machines: Array<Record<string, any>> }).machines.find((x) => x.name === name)!;
}

/** A machine's script from /ipxe/auto and the URLs in it. */
export async function bootIpxe(r: Running, query: string): Promise<{ script: string } & ReturnType<typeof scriptUrls>> {
  const script = await (await fetch(`${r.url}/ipxe/auto?${query}`)).text();
  return { script, ...scriptUrls(script) };
}

/**
 * Runs hvpxe to completion (`spawnAs`: through another command, e.g. setpriv). One that is still
 * running after `timeoutMs` (a `serve` that should have refused to start) is stopped, and says so.
 */
export function runHvpxe(args: string[], spawnAs: string[] = [], timeoutMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const argv = [...spawnAs, process.execPath, CLI, ...args];
  const proc = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d) => (stdout += d));
  proc.stderr.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => {
    stderr += `\n[test: still running after ${timeoutMs} ms: stopped]`;
    proc.kill('SIGKILL');
  }, timeoutMs);
  return new Promise((resolve) =>
    proc.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}

/** Stops hvpxe with SIGTERM (SIGKILL after 10 s); how it ended. */
export async function stopHvpxe(r: Running | undefined): Promise<{ code: number | null; signal: NodeJS.Signals | null } | undefined> {
  if (!r) return undefined;
  if (r.proc.exitCode !== null || r.proc.signalCode !== null) return { code: r.proc.exitCode, signal: r.proc.signalCode };
  const exited = new Promise<void>((res) => r.proc.once('exit', () => res()));
  r.proc.kill('SIGTERM');
  const t = setTimeout(() => r.proc.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(t);
  return { code: r.proc.exitCode, signal: r.proc.signalCode };
}

/** Sends bytes exactly as given (no client-side path normalisation) and returns status and body. */
export function rawRequest(url: string, requestText: string): Promise<{ status: number; head: string; body: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(u.port), u.hostname);
    const chunks: Buffer[] = [];
    sock.setTimeout(20_000, () => sock.destroy(new Error('raw request timed out')));
    sock.on('data', (c) => chunks.push(c));
    sock.on('error', reject);
    sock.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const [head, ...rest] = text.split('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), head, body: rest.join('\r\n\r\n') });
    });
    sock.write(requestText);
  });
}

export function rawGet(url: string, target: string): Promise<{ status: number; head: string; body: string }> {
  return rawRequest(url, `GET ${target} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n`);
}

export function curl(args: string[]): { code: number; stdout: string } {
  try {
    return { code: 0, stdout: execFileSync('curl', ['-sS', ...args], { encoding: 'latin1', timeout: 60_000, stdio: ['ignore', 'pipe', 'pipe'] }) };
  } catch (err) {
    const e = err as { status?: number; stdout?: string };
    return { code: e.status ?? -1, stdout: e.stdout ?? '' };
  }
}

export const SECRET_OUTSIDE = 'TOP-SECRET-OUTSIDE-ROOT';

export interface Tree {
  root: string;
  files: Record<string, Buffer>;
}

/** The served tree: artifacts, a FIFO, a directory, symlinks inside and out, a dot-file; a secret outside. */
export async function makeTree(dir: string): Promise<Tree> {
  const root = path.join(dir, 'root');
  const files: Record<string, Buffer> = {
    'k/vmlinuz': randomBytes(64 * 1024),
    'k/initrd.img': randomBytes(128 * 1024),
    'rootfs.squashfs': randomBytes(256 * 1024),
    'harvester.iso': randomBytes(2 * 1024 * 1024 + 17),
  };
  for (const [p, b] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, p)), { recursive: true });
    await writeFile(path.join(root, p), b);
  }
  await writeFile(path.join(dir, 'outside-secret.txt'), SECRET_OUTSIDE);
  await writeFile(path.join(root, '.hidden'), SECRET_OUTSIDE);
  await symlink('../outside-secret.txt', path.join(root, 'escape'));
  await symlink('..', path.join(root, 'escape-dir'));
  await symlink('/dev/zero', path.join(root, 'dev-zero'));
  await symlink('k/vmlinuz', path.join(root, 'inside-link'));
  execFileSync('mkfifo', [path.join(root, 'fifo')]);
  return { root, files };
}

/** A scratch directory with the served tree, the fleet's profiles.yaml and where the history goes. */
export async function serveDir(prefix: string): Promise<{ dir: string; tree: Tree; profiles: string; state: string }> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  const tree = await makeTree(dir);
  const profiles = path.join(dir, 'profiles.yaml');
  await writeFile(profiles, profilesYaml(tree));
  return { dir, tree, profiles, state: path.join(dir, 'state') };
}

export function profilesYaml(t: Tree, opts: { token?: string | null; extraArg?: string; defaultGroup?: boolean } = {}): string {
  const s = (p: string): string => sha256(t.files[p]);
  const token = opts.token === null ? '' : `      token: ${opts.token ?? 'cluster-token-xyz123'}\n`;
  return `
artifacts:
  kernel: { path: k/vmlinuz, sha256: "${s('k/vmlinuz')}" }
  initrd: { path: k/initrd.img, sha256: "${s('k/initrd.img')}" }
  rootfs: { path: rootfs.squashfs, sha256: "${s('rootfs.squashfs')}" }
  iso: { path: harvester.iso, sha256: "${s('harvester.iso')}" }
profiles:
  hv:
    kernel: kernel
    initrd: initrd
    rootfs: rootfs
    iso: iso
    kernel_args: [rd.net.dhcp.retry=3${opts.extraArg ? `, ${opts.extraArg}` : ''}]
    config:
      scheme_version: 1
${token}      os:
        password: root-password-secret
        ssh_authorized_keys: [ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBvCYAjlQ0Ep2hWoJ4yTvXlqxh8g7tJ8V0z4b6gBf0Q0 op@example]
        ntp_servers: [0.suse.pool.ntp.org]
      install:
        device: /dev/disk/by-id/\${disk}
groups:
  - name: rack1
    profile: hv
    fleet: { vip: 10.0.0.100 }
    values: { disk: nvme-test-1 }
    machines:
      - { hostname: node-1, mac: "52:54:00:00:00:01", role: management }
      - { hostname: node-2, mac: "52:54:00:00:00:02" }
      - { hostname: node-3, uuid: "11111111-2222-3333-4444-555555555555", ip: 10.0.0.13/24, gateway: 10.0.0.1, dns: [10.0.0.1], config: { install: { management_interface: { interfaces: [{ name: ens3 }] } } } }
${
  opts.defaultGroup === false
    ? ''
    : `  - name: spare
    profile: hv
    default: true
    values: { disk: any-disk }
    config: { server_url: "https://10.0.0.100:443", install: { mode: join } }
`
}`;
}

/** A port free right now on 127.0.0.1 (for servers whose URL must be known before they start). */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}
