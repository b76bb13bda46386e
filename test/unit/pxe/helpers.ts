import { createHash } from 'node:crypto';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ValidationResult } from '../../../config/types.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { PxeServer } from '../../../pxe/server.js';
import { scriptUrls } from './script-urls.js';

export { scriptUrls };

/**
 * Test double for the one validator (config validateConfig): a few of its rules, so the
 * PXE logic can be tested without depending on another package's progress. Integration tests use
 * the real validator.
 */
export async function validatorDouble(raw: unknown): Promise<ValidationResult> {
  const cfg = raw as { token?: string; install?: { mode?: string; iso_url?: string }; server_url?: string };
  const errors: ValidationResult['errors'] = [];
  if (!cfg.token) errors.push({ severity: 'error', path: 'token', message: 'token not specified' });
  if (cfg.install?.mode === 'create' && cfg.server_url) errors.push({ severity: 'error', path: 'server_url', message: 'ServerURL need to be empty in create mode' });
  if (cfg.install?.mode === 'join' && !cfg.server_url) errors.push({ severity: 'error', path: 'server_url', message: "ServerURL can't empty in join mode" });
  // The config as given: the real validator returns it normalised (camelCase), the same keys here.
  return { valid: errors.length === 0, errors, warnings: [], config: cfg as ValidationResult['config'] };
}

export const SHA_A = 'a'.repeat(64);

export function profilesText(extra = ''): string {
  return `
server_url: http://10.0.0.1:8080
artifacts:
  kernel: { path: k/vmlinuz, sha256: "${SHA_A}" }
  initrd: { path: k/initrd.img, sha256: "${SHA_A}" }
  rootfs: { path: rootfs.squashfs, sha256: "${SHA_A}" }
  iso: { path: harvester.iso, sha256: "${SHA_A}" }
profiles:
  hv:
    kernel: kernel
    initrd: initrd
    rootfs: rootfs
    iso: iso
    kernel_args: [rd.net.dhcp.retry=3, console=ttyS0]
    config:
      scheme_version: 1
      token: tok-\${cluster}
      os:
        password: pw-secret
        ssh_authorized_keys: [ssh-ed25519 AAAA x]
      install:
        device: /dev/disk/by-id/\${disk}
groups:
  - name: rack1
    profile: hv
    fleet: { vip: 10.0.0.100 }
    values: { cluster: alpha, disk: nvme-1 }
    machines:
      - { hostname: node-1, mac: "52:54:00:00:00:01", role: management }
      - { hostname: node-2, mac: "52-54-00-00-00-02", uuid: "4C4C4544-0000-1111-2222-333344445555" }
      - { hostname: node-3, uuid: "11111111-2222-3333-4444-555555555555", ip: 10.0.0.13/24, gateway: 10.0.0.1, dns: [10.0.0.1, 1.1.1.1], values: { disk: sda } }
  - name: named
    profile: hv
    values: { cluster: alpha, disk: sdb }
    machines:
      - { hostname: node-4 }
  - name: spare
    profile: hv
    default: true
    values: { cluster: alpha, disk: any }
    config: { server_url: https://10.0.0.100:443, install: { mode: join } }
${extra}`;
}

/**
 * A started PxeServer on 127.0.0.1 (any port) over a new temporary directory: profilesText()'s four
 * artifacts under dir/root, each with its real sha256 in dir/profiles.yaml. `edit` changes the
 * profiles text, `files` adds files under the root, `tftp` serves TFTP on 127.0.0.1 (any port) too.
 * The caller closes it and removes dir.
 */
export async function startFixtureServer(
  prefix: string,
  opts: { edit?: (text: string) => string; files?: Record<string, Buffer | string>; tftp?: boolean; stateDir?: boolean } = {},
): Promise<{ dir: string; server: PxeServer; log: MemorySink }> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  const root = path.join(dir, 'root');
  await mkdir(path.join(root, 'k'), { recursive: true });
  let text = profilesText();
  for (const f of ['k/vmlinuz', 'k/initrd.img', 'rootfs.squashfs', 'harvester.iso']) {
    await writeFile(path.join(root, f), f);
    text = text.replace(`path: ${f}, sha256: "${SHA_A}"`, `path: ${f}, sha256: "${createHash('sha256').update(f).digest('hex')}"`);
  }
  for (const [f, data] of Object.entries(opts.files ?? {})) await writeFile(path.join(root, f), data);
  await writeFile(path.join(dir, 'profiles.yaml'), opts.edit ? opts.edit(text) : text);
  const log = new MemorySink();
  const server = new PxeServer({
    root,
    profilesPath: path.join(dir, 'profiles.yaml'),
    host: '127.0.0.1',
    port: 0,
    log: new Logger(log),
    validate: validatorDouble,
    admin: { host: '127.0.0.1', port: 0, token: ADMIN_TOKEN },
    ...(opts.stateDir ? { stateDir: path.join(dir, 'state') } : {}),
    ...(opts.tftp ? { tftp: { host: '127.0.0.1', port: 0 } } : {}),
  });
  try {
    await server.start();
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return { dir, server, log };
}

/** An EFI executable as far as hvpxe's check goes (the PE "MZ" magic), standing in for Debian's signed shim and grub. */
export const FAKE_EFI = Buffer.concat([Buffer.from('MZ'), Buffer.alloc(3000, 7)]);

/** The operator token the fixture server's admin listener wants. */
export const ADMIN_TOKEN = 'fixture-admin-token-0123456789';

/** GET on the admin listener with the operator token, as JSON. */
export async function adminJson<T = { machines: Array<Record<string, any>> }>(server: PxeServer, p: string): Promise<T> {
  const r = await fetch(`${server.adminUrl}${p}`, { headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } });
  if (!r.ok) throw new Error(`${p}: HTTP ${r.status}`);
  return (await r.json()) as T;
}

/** GET on the admin listener with the operator token, as text. */
export async function adminText(server: PxeServer, p: string): Promise<string> {
  return (await fetch(`${server.adminUrl}${p}`, { headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
}

/** One machine of /machines. */
export async function machineOf(server: PxeServer, name: string): Promise<Record<string, any>> {
  return (await adminJson(server, '/machines')).machines.find((m) => m.name === name)!;
}

/** Boots a machine over iPXE (its script from /ipxe/auto) and returns the script and its URLs. */
export async function bootIpxe(server: PxeServer, query: string): Promise<{ script: string } & ReturnType<typeof scriptUrls>> {
  const script = await (await fetch(`${server.url}/ipxe/auto?${query}`)).text();
  return { script, ...scriptUrls(script) };
}

/** Posts an event body to a URL; the status. */
export async function postEvent(url: string, body: unknown): Promise<number> {
  const r = await fetch(url, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) });
  await r.arrayBuffer();
  return r.status;
}
