import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, readFile, rm, writeFile, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { validateConfig } from '../../../config/index.js';
import { sendWebhooks } from '../../../installer/remote/webhooks.js';
import { waitUntil } from '../../../lib/wait.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import {
  curl, makeTree, profilesYaml, rawGet, rawRequest, runHvpxe, SECRET_OUTSIDE, sha256, startHvpxe, stopHvpxe,
  type Running, type Tree,
} from './harness.js';

let dir: string;
let tree: Tree;
let profiles: string;
let hv: Running | undefined;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-pxe-serve-'));
  tree = await makeTree(dir);
  profiles = path.join(dir, 'profiles.yaml');
  await writeFile(profiles, profilesYaml(tree));
  hv = await startHvpxe(['serve', '--root', tree.root, '--profiles', profiles, '--listen', '127.0.0.1:0']);
});

afterAll(async () => {
  await stopHvpxe(hv);
  await rm(dir, { recursive: true, force: true });
});

async function get(p: string, init?: RequestInit): Promise<{ status: number; text: string; headers: Headers }> {
  const r = await fetch(`${hv!.url}${p}`, init);
  return { status: r.status, text: await r.text(), headers: r.headers };
}

describe('hvpxe serve: scripts and matching', () => {
  it('answers /healthz', async () => {
    const r = await get('/healthz');
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toMatchObject({ status: 'ok', machines: 3 });
  });

  it('/boot.ipxe chains to /ipxe/auto with the iPXE variables', async () => {
    const lines = (await get('/boot.ipxe')).text.split('\n');
    expect(lines[0]).toBe('#!ipxe');
    expect(lines[3]).toBe(`chain --autofree ${hv!.url}/ipxe/auto?mac=\${netX/mac}&uuid=\${uuid}&hostname=\${hostname:uristring}&buildarch=\${buildarch}&platform=\${platform} || goto failed`);
  });

  it('matches by MAC and serves the script line by line (UEFI: initrd=)', async () => {
    const u = hv!.url;
    const lines = (await get('/ipxe/auto?mac=52:54:00:00:00:01&uuid=&hostname=&buildarch=x86_64&platform=efi')).text.split('\n');
    expect(lines).toEqual([
      '#!ipxe',
      '# hvpxe: machine node-1 (group rack1, profile hv, matched by mac)',
      'echo hvpxe: installing node-1 with profile hv',
      `kernel ${u}/artifacts/k/vmlinuz initrd=initrd.img ip=dhcp net.ifnames=1 rd.cos.disable rd.noverifyssl console=tty1 root=live:${u}/artifacts/rootfs.squashfs harvester.install.automatic=true harvester.install.config_url=${u}/config/node-1.yaml?mac=52:54:00:00:00:01 hvinstall.events_url=${u}/events/node-1 rd.net.dhcp.retry=3 || goto failed`,
      `initrd ${u}/artifacts/k/initrd.img || goto failed`,
      'boot || goto failed',
      ':failed',
      'echo hvpxe: downloading or booting the installer for node-1 failed; trying the next boot device in 30 s',
      'sleep 30',
      'exit 1',
      '',
    ]);
  });

  it('matches by SMBIOS UUID (BIOS: no initrd=)', async () => {
    const lines = (await get('/ipxe/auto?mac=aa:aa:aa:aa:aa:aa&uuid=11111111-2222-3333-4444-555555555555&platform=pcbios')).text.split('\n');
    // A default group exists, but the UUID match wins over it.
    expect(lines[1]).toBe('# hvpxe: machine node-3 (group rack1, profile hv, matched by uuid)');
    expect(lines[3]).not.toContain('initrd=');
    expect(lines[3]).toContain(`config_url=${hv!.url}/config/node-3.yaml?uuid=11111111-2222-3333-4444-555555555555`);
  });

  it('falls back to the default group for an unknown MAC', async () => {
    const lines = (await get('/ipxe/auto?mac=de:ad:be:ef:00:01&platform=efi')).text.split('\n');
    expect(lines[1]).toBe('# hvpxe: machine spare-deadbeef0001 (group spare, profile hv, matched by default)');
    const cfg = await get('/config/spare-deadbeef0001.yaml?mac=de:ad:be:ef:00:01');
    expect(cfg.status).toBe(200);
    const doc = parse(cfg.text);
    expect(doc.install.mode).toBe('join');
    expect(doc.install.management_interface.interfaces).toEqual([{ hwAddr: 'de:ad:be:ef:00:01' }]);
    expect((await validateConfig({ ...doc, install: { ...doc.install, automatic: true } })).errors).toEqual([]);
  });

  it('an unmatched machine gets a message and an exit, not a hang', async () => {
    const r = await get('/ipxe/auto?mac=&uuid=99999999-0000-0000-0000-000000000000&hostname=stranger');
    expect(r.status).toBe(200);
    expect(r.text.split('\n')).toEqual([
      '#!ipxe',
      '# hvpxe: no group in profiles.yaml matches this machine',
      'echo hvpxe: no profile matches this machine (MAC unknown, UUID 99999999-0000-0000-0000-000000000000, DHCP hostname stranger).',
      'echo hvpxe: add it to a group in profiles.yaml (mac: or uuid:), or add a default group, then reload hvpxe (SIGHUP).',
      'echo hvpxe: trying the next boot device in 30 s',
      'sleep 30',
      'exit 1',
      '',
    ]);
  });
});

describe('hvpxe serve: configs', () => {
  it('serves each machine its validated config: first creates, others join the VIP', async () => {
    const c1 = parse((await get('/config/node-1.yaml?mac=52:54:00:00:00:01')).text);
    const c2 = parse((await get('/config/node-2.yaml?mac=52-54-00-00-00-02')).text);
    const c3 = parse((await get('/config/node-3.yaml?uuid=11111111-2222-3333-4444-555555555555')).text);
    expect(c1.install).toMatchObject({ mode: 'create', vip: '10.0.0.100', vip_mode: 'static', iso_url: `${hv!.url}/artifacts/harvester.iso` });
    expect(c2).toMatchObject({ server_url: 'https://10.0.0.100:443', install: { mode: 'join' } });
    expect(c3.install.management_interface).toMatchObject({ method: 'static', ip: '10.0.0.13', subnet_mask: '255.255.255.0', gateway: '10.0.0.1' });
    for (const c of [c1, c2, c3]) {
      const r = await validateConfig({ ...c, install: { ...c.install, automatic: true } });
      expect(r.errors).toEqual([]);
    }
  });

  it("never serves a machine's config (token, password) to a request that does not identify it", async () => {
    for (const q of ['', '?mac=52:54:00:00:00:02', '?uuid=11111111-2222-3333-4444-555555555555', '?mac=garbage']) {
      const r = await get(`/config/node-1.yaml${q}`);
      expect(r.status).toBe(404);
      expect(r.text).not.toContain('cluster-token-xyz123');
    }
    expect((await get('/config/nobody.yaml?mac=52:54:00:00:00:01')).status).toBe(404);
    expect((await get('/ipxe/node-1')).status).toBe(404);
    // Claiming node-1's DHCP hostname does not get its script (which carries its config URL).
    const claimed = (await get('/ipxe/auto?hostname=node-1')).text;
    expect(claimed).toContain('no profile matches this machine');
    expect(claimed).not.toContain('52:54:00:00:00:01');
    expect((await get('/ipxe/node-1?mac=52:54:00:00:00:01')).status).toBe(200);
  });

  it('keeps secrets out of its log', () => {
    const logs = hv!.stderr.join('');
    expect(logs).toContain('"msg":"request"');
    expect(logs).not.toContain('cluster-token-xyz123');
    expect(logs).not.toContain('root-password-secret');
  });
});

describe('hvpxe serve: artifacts as curl expects them', () => {
  const iso = () => tree.files['harvester.iso'];
  const url = () => `${hv!.url}/artifacts/harvester.iso`;

  it('HEAD and GET carry length, ranges, ETag and Last-Modified; the body is the file', () => {
    const head = curl(['-I', url()]).stdout;
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    expect(head).toMatch(new RegExp(`content-length: ${iso().length}`, 'i'));
    expect(head).toMatch(/accept-ranges: bytes/i);
    expect(head).toMatch(/etag: "[0-9a-f]+-[0-9a-f]+-[0-9a-f]+"/i);
    expect(head).toMatch(/last-modified: \w{3}, \d{2} \w{3} \d{4}/i);
    const out = path.join(dir, 'iso.full');
    expect(curl(['-o', out, url()]).code).toBe(0);
    return readFile(out).then((b) => expect(sha256(b)).toBe(sha256(iso())));
  });

  it('curl -r gives 206 with Content-Range and exactly those bytes', async () => {
    const out = path.join(dir, 'iso.range');
    const hdr = curl(['-D', '-', '-o', out, '-r', '100-1099', url()]).stdout;
    expect(hdr).toMatch(/^HTTP\/1\.1 206/);
    expect(hdr).toMatch(new RegExp(`content-range: bytes 100-1099/${iso().length}`, 'i'));
    expect((await readFile(out)).equals(iso().subarray(100, 1100))).toBe(true);
    const suffix = curl(['-D', '-', '-o', out, '-r', '-10', url()]).stdout;
    expect(suffix).toMatch(new RegExp(`content-range: bytes ${iso().length - 10}-${iso().length - 1}/${iso().length}`, 'i'));
  });

  it('curl -C - resumes a partial download to the identical file', async () => {
    const out = path.join(dir, 'iso.resume');
    await writeFile(out, iso().subarray(0, 777_777));
    expect(curl(['-C', '-', '-o', out, url()]).code).toBe(0);
    expect(sha256(await readFile(out))).toBe(sha256(iso()));
  });

  it('an unsatisfiable range is a 416 with bytes */size', () => {
    const hdr = curl(['-D', '-', '-o', '/dev/null', '-r', `${iso().length}-`, url()]).stdout;
    expect(hdr).toMatch(/^HTTP\/1\.1 416/);
    expect(hdr).toMatch(new RegExp(`content-range: bytes \\*/${iso().length}`, 'i'));
  });

  it('curl --etag-compare gets a 304 with no body; a stale If-Range gets the whole file', async () => {
    const etagFile = path.join(dir, 'etag.txt');
    curl(['-o', '/dev/null', '--etag-save', etagFile, url()]);
    expect((await readFile(etagFile, 'utf8')).trim()).toMatch(/^"[0-9a-f-]+"$/);
    const code = curl(['-o', path.join(dir, 'etag.out'), '-w', '%{http_code} %{size_download}', '--etag-compare', etagFile, url()]).stdout;
    expect(code).toBe('304 0');
    const stale = curl(['-o', '/dev/null', '-w', '%{http_code} %{size_download}', '-r', '0-9', '-H', 'If-Range: "stale"', url()]).stdout;
    expect(stale).toBe(`200 ${iso().length}`);
    const etag = (await readFile(etagFile, 'utf8')).trim();
    const fresh = curl(['-o', '/dev/null', '-w', '%{http_code} %{size_download}', '-r', '0-9', '-H', `If-Range: ${etag}`, url()]).stdout;
    expect(fresh).toBe('206 10');
  });

  it('curl -z (If-Modified-Since) gets a 304 for an unchanged file and a 200 after a change', async () => {
    const ref = path.join(dir, 'ref');
    await writeFile(ref, '');
    expect(curl(['-o', '/dev/null', '-w', '%{http_code}', '-z', ref, url()]).stdout).toBe('304');
    const old = new Date(Date.now() - 86_400_000);
    await utimes(ref, old, old);
    expect(curl(['-o', '/dev/null', '-w', '%{http_code}', '-z', ref, url()]).stdout).toBe('200');
  });

  it('follows a symlink that stays inside the root', () => {
    expect(curl(['-o', '/dev/null', '-w', '%{http_code}', `${hv!.url}/artifacts/inside-link`]).stdout).toBe('200');
  });
});

describe('hvpxe serve: nothing outside --root', () => {
  const attempts = [
    '/artifacts/../outside-secret.txt',
    '/artifacts/..%2foutside-secret.txt',
    '/artifacts/%2e%2e/outside-secret.txt',
    '/artifacts/%2e%2e%2foutside-secret.txt',
    '/artifacts/%2E%2E%2Foutside-secret.txt',
    '/artifacts/k/../../outside-secret.txt',
    '/artifacts/k/..%2f..%2foutside-secret.txt',
    '/artifacts/k/%2e%2e/%2e%2e/outside-secret.txt',
    '/artifacts/..\\outside-secret.txt',
    '/artifacts/..%5coutside-secret.txt',
    '/artifacts/%252e%252e/outside-secret.txt',
    '/artifacts/%c0%ae%c0%ae/outside-secret.txt',
    '/artifacts/..;/outside-secret.txt',
    '/artifacts/escape',
    '/artifacts/escape-dir/outside-secret.txt',
    '/artifacts/dev-zero',
    '/artifacts/.hidden',
    '/artifacts/k/vmlinuz%00.txt',
    '/artifacts/%00',
    '/artifacts//etc/passwd',
    '/artifacts/%2fetc%2fpasswd',
    '/artifacts/./k/vmlinuz',
    '/artifacts/fifo',
    '/artifacts/k',
    '/../outside-secret.txt',
    '//artifacts/../../outside-secret.txt',
    '/config/../profiles.yaml',
    '/artifacts/' + 'a/'.repeat(600) + 'x',
  ];
  it(`refuses ${attempts.length} crafted paths without leaking a byte`, async () => {
    expect(attempts.length).toBeGreaterThanOrEqual(20);
    for (const a of attempts) {
      const r = await rawGet(hv!.url, a);
      expect({ a, status: r.status >= 400 && r.status < 500 }).toEqual({ a, status: true });
      expect(r.body).not.toContain(SECRET_OUTSIDE);
      expect(r.body).not.toContain('root:x:0:0');
    }
    // …and it still serves real files afterwards (the FIFO did not wedge it).
    expect((await rawGet(hv!.url, '/artifacts/k/vmlinuz')).status).toBe(200);
  });

  it('bounds request headers, URLs and event bodies; refuses other methods', async () => {
    const bigHeader = await rawRequest(hv!.url, `GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: ${'a'.repeat(20_000)}\r\nConnection: close\r\n\r\n`);
    expect(bigHeader.status).toBe(431);
    expect((await rawGet(hv!.url, `/healthz?${'q'.repeat(5000)}`)).status).toBe(414);
    const big = await get('/events/node-1', { method: 'POST', body: 'x'.repeat(70_000) });
    expect(big.status).toBe(413);
    expect((await get('/artifacts/k/vmlinuz', { method: 'DELETE' })).status).toBe(405);
    expect((await get('/events/nobody', { method: 'POST', body: '{}' })).status).toBe(404);
  });
});

describe('hvpxe serve: /machines and install events', () => {
  it('records fetches and the webhook progress the installer posts back', async () => {
    // What a booting node-1 does: its script, its config, an artifact (attributed by client address), then STARTED.
    await get('/ipxe/auto?mac=52:54:00:00:00:01');
    const c1 = parse((await get('/config/node-1.yaml?mac=52:54:00:00:00:01')).text);
    expect((await get('/artifacts/k/vmlinuz')).status).toBe(200);
    const { config } = await validateConfig(c1);
    const sink = new MemorySink();
    await sendWebhooks('STARTED', config, { vars: { Hostname: 'node-1', MACAddr: '52:54:00:00:00:01', IPAddrV4: '10.0.0.11' }, log: new Logger(sink) });
    expect(sink.lines.join('')).toContain('webhook sent');
    const m = JSON.parse((await get('/machines')).text).machines.find((x: { name: string }) => x.name === 'node-1');
    expect(m.fetched.ipxe).toBeTruthy();
    expect(m.fetched.config).toBeTruthy();
    expect(m.progress.event).toBe('STARTED');
    expect(m.events.at(-1).data).toEqual({ event: 'STARTED', hostname: 'node-1', mac: '52:54:00:00:00:01', ipv4: '10.0.0.11', ipv6: '' });
    expect(m.fetched.artifacts['k/vmlinuz']).toMatchObject({ status: 200, bytes: tree.files['k/vmlinuz'].length });
  });
});

describe('hvpxe serve: reload', () => {
  it('SIGHUP with an invalid profile keeps the old one serving; a valid one replaces it', async () => {
    const before = (await get('/ipxe/auto?mac=52:54:00:00:00:01')).text;
    await writeFile(profiles, profilesYaml(tree, { token: null, extraArg: 'hv.marker=new' }));
    hv!.proc.kill('SIGHUP');
    const err = await waitUntil(
      async () => {
        const h = JSON.parse((await get('/healthz')).text);
        return h.lastReloadError ? { done: true as const, value: h.lastReloadError as string } : { done: false as const, reason: 'no reload yet' };
      },
      { what: 'the refused reload', timeoutMs: 60_000, intervalMs: 200 },
    );
    expect(err).toMatch(/machine node-1 \(group rack1\): .*token/i);
    expect((await get('/ipxe/auto?mac=52:54:00:00:00:01')).text).toBe(before);
    expect((await get('/config/node-1.yaml?mac=52:54:00:00:00:01')).text).toContain('cluster-token-xyz123');

    await writeFile(profiles, profilesYaml(tree, { extraArg: 'hv.marker=new' }));
    hv!.proc.kill('SIGHUP');
    await waitUntil(
      async () => {
        const h = JSON.parse((await get('/healthz')).text);
        return h.reloads >= 1 ? { done: true as const, value: h } : { done: false as const, reason: 'not reloaded' };
      },
      { what: 'the accepted reload', timeoutMs: 60_000, intervalMs: 200 },
    );
    expect((await get('/ipxe/auto?mac=52:54:00:00:00:01')).text).toContain(' hv.marker=new || goto failed');
  });
});

describe('hvpxe serve: refusing to start', () => {
  it('an invalid profile refuses to start with the validator messages (exit 1)', async () => {
    const bad = path.join(dir, 'bad.yaml');
    await writeFile(bad, profilesYaml(tree, { token: null }));
    const r = await runHvpxe(['serve', '--root', tree.root, '--profiles', bad, '--listen', '127.0.0.1:0']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/hvpxe: error: .*bad\.yaml: \d+ problems? in what hvpxe would serve/);
    expect(r.stderr).toMatch(/machine node-2 \(group rack1\): .*token/i);
    expect(r.stderr).not.toContain('root-password-secret');
  });

  it('a wrong artifact checksum refuses to start and names both sums', async () => {
    const bad = path.join(dir, 'badsum.yaml');
    await writeFile(bad, profilesYaml(tree).replace(sha256(tree.files['k/initrd.img']), '0'.repeat(64)));
    const r = await runHvpxe(['serve', '--root', tree.root, '--profiles', bad, '--listen', '127.0.0.1:0']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`artifacts.initrd (k/initrd.img): sha256 mismatch: profiles.yaml says ${'0'.repeat(64)}, the file has ${sha256(tree.files['k/initrd.img'])}`);
  });

  it('usage errors exit 2', async () => {
    expect((await runHvpxe(['serve', '--root', tree.root])).code).toBe(2);
    const r = await runHvpxe(['serve', '--root', tree.root, '--profiles', profiles, '--listen', '0.0.0.0:0']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/needs a URL machines can reach/);
  });
});

describe('hvpxe serve: clients that go away', () => {
  it('a client dropping mid-download frees its file and the server keeps serving', async () => {
    const fds = async (): Promise<number> => (await import('node:fs/promises')).readdir(`/proc/${hv!.proc.pid}/fd`).then((l) => l.length);
    const before = await fds();
    const net = await import('node:net');
    const u = new URL(hv!.url);
    for (let i = 0; i < 5; i++) {
      await new Promise<void>((resolve, reject) => {
        const sock = net.connect(Number(u.port), u.hostname, () => sock.write('GET /artifacts/harvester.iso HTTP/1.1\r\nHost: t\r\n\r\n'));
        sock.once('data', () => {
          sock.destroy();
          resolve();
        });
        sock.on('error', reject);
      });
    }
    await waitUntil(async () => ((await fds()) <= before ? { done: true as const, value: true } : { done: false as const, reason: `fds ${await fds()} > ${before}` }), {
      what: 'file descriptors to be released',
      timeoutMs: 30_000,
      intervalMs: 200,
    });
    expect((await get('/artifacts/k/vmlinuz')).status).toBe(200);
    const lines = hv!.stderr.join('').split('\n').filter((l) => l.includes('"msg":"request"')).map((l) => JSON.parse(l));
    expect(lines.some((l) => l.path === '/artifacts/harvester.iso' && l.status === 206 && l.bytes === 1000)).toBe(true);
  });
});
