/**
 * github:/gitlab: SSH keys fetched once at install, against a key server on 127.0.0.1 standing in
 * for github.com (the provider URL is the one thing pointed elsewhere): the keys replace the entry,
 * an unreachable source keeps the entry for yip (a warning), and a source that answers "no keys"
 * for a node with no other login refuses the install.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { parseFetchedKeys, resolveSshKeys } from '../../../installer/remote/ssh-keys.js';
import { sshKeySourceUrl } from '../../../config/ssh-key.js';
import type { HarvesterConfig } from '../../../config/types.js';

const ED = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHkJfGqk3C6Yl1uQf1Jx3m0t4c2fVbXw3Qy1m9d8H7pQ';
const RSA = 'ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7vbqajDhA2vTq9ZxQ3Jm8 alice@laptop';
let server: http.Server;
let base = '';
const stalled: net.Socket[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    if (req.url === '/alice.keys') return void res.end(`${ED}\n${RSA}\n`);
    if (req.url === '/nokeys.keys') return void res.end('\n');
    if (req.url === '/html.keys') return void res.end(`${ED}\nooxx\n`);
    if (req.url === '/slow.keys') return; // never answers: the deadline must end the wait
    res.statusCode = 404;
    res.end('Not Found');
  });
  server.on('connection', (s) => stalled.push(s));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const s of stalled) s.destroy();
  await new Promise((r) => server.close(r));
});

const providers = () => ({ github: `${base}/%s.keys`, gitlab: `${base}/gitlab/%s.keys` });
const fast = () => ({ providers: providers(), timeoutMs: 500, attempts: 2, retryDelayMs: 10 });
const cfg = (keys: string[], password?: string): HarvesterConfig => ({ os: { sshAuthorizedKeys: keys, ...(password ? { password } : {}) }, install: { mode: 'create' } });

describe('key sources (rancher/yip pkg/plugins/ssh.go)', () => {
  it.each([
    ['github:alice', 'https://github.com/alice.keys'],
    ['gitlab:bob', 'https://gitlab.com/bob.keys'],
    ['github: someuser', 'https://github.com/someuser.keys'],
    ['https://keys.example.com/ops.pub', 'https://keys.example.com/ops.pub'],
    [ED, undefined],
  ])('%s -> %s', (entry, url) => expect(sshKeySourceUrl(entry)).toBe(url));
});

describe("the fetched body, as Harvester's console reads an SSH key URL", () => {
  it('keys, one a line; blank lines skipped', () => expect(parseFetchedKeys(`\n${ED}\n\n${RSA}\n`)).toEqual({ keys: [ED, RSA] }));
  it('a line that is not a key', () => expect(parseFetchedKeys(`\nooxx`)).toEqual({ problem: 'fail to parse on line 2: ooxx' }));
  it('no key at all', () => expect(parseFetchedKeys('')).toEqual({ problem: 'no key found' }));
});

describe('resolveSshKeys', () => {
  it('replaces github:alice by her keys, in place, each saying where it came from', async () => {
    const r = await resolveSshKeys(cfg(['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherKeyWrittenOut01 me', 'github:alice'], 'pw'), fast());
    expect(r.errors).toEqual([]);
    expect(r.warnings).toEqual([]);
    expect(r.config.os?.sshAuthorizedKeys).toEqual(['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherKeyWrittenOut01 me', `${ED} github:alice`, RSA]);
  });

  it('an unreachable source keeps the entry for yip and warns; the install goes on (even as the only login)', async () => {
    const closed = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const port = (s.address() as AddressInfo).port;
        s.close(() => resolve(port));
      });
    });
    const r = await resolveSshKeys(cfg(['github:alice']), { ...fast(), providers: { github: `http://127.0.0.1:${closed}/%s.keys`, gitlab: '' } });
    expect(r.errors).toEqual([]);
    expect(r.config.os?.sshAuthorizedKeys).toEqual(['github:alice']);
    expect(r.warnings).toEqual([
      `os.ssh_authorized_keys: github:alice: connection refused by 127.0.0.1:${closed} (after 2 attempts) (http://127.0.0.1:${closed}/alice.keys); kept as written, so yip fetches it at every boot as on Harvester: a node that boots without access to 127.0.0.1:${closed} has no SSH login from it`,
    ]);
  });

  it('a source that never answers ends at the deadline, as unreachable', async () => {
    const r = await resolveSshKeys(cfg(['github:slow'], 'pw'), fast());
    expect(r.errors).toEqual([]);
    expect(r.warnings).toEqual([expect.stringMatching(/^os\.ssh_authorized_keys: github:slow: timed out after 500 ms fetching .* \(after 2 attempts\) .*kept as written, so yip fetches it at every boot/)]);
  });

  it('no such user, as the only login: the install is refused', async () => {
    const r = await resolveSshKeys(cfg(['github:nobody']), fast());
    expect(r.errors).toEqual([`os.ssh_authorized_keys: github:nobody: HTTP 404 from ${base}/nobody.keys (${base}/nobody.keys); the node would have no login (no password, no other SSH key)`]);
  });

  it('no key found, or a body that is not keys, with a password beside: a warning, the entry kept', async () => {
    const r = await resolveSshKeys(cfg(['github:nokeys', 'github:html'], 'pw'), fast());
    expect(r.errors).toEqual([]);
    expect(r.warnings).toEqual([
      `os.ssh_authorized_keys: github:nokeys: no key found (${base}/nokeys.keys); kept as written, it gives no key at boot either`,
      `os.ssh_authorized_keys: github:html: fail to parse on line 2: ooxx (${base}/html.keys); kept as written, it gives no key at boot either`,
    ]);
    expect(r.config.os?.sshAuthorizedKeys).toEqual(['github:nokeys', 'github:html']);
  });

  it('one source with keys is a login: another failing one is then only a warning', async () => {
    const r = await resolveSshKeys(cfg(['github:nobody', 'github:alice']), fast());
    expect(r.errors).toEqual([]);
    expect(r.config.os?.sshAuthorizedKeys).toEqual(['github:nobody', `${ED} github:alice`, RSA]);
  });

  it('a config without key sources is returned as it is, without any request', async () => {
    const c = cfg([ED], 'pw');
    const r = await resolveSshKeys(c, { providers: { github: 'http://192.0.2.1/%s', gitlab: '' } });
    expect(r.config).toBe(c);
  });
});
