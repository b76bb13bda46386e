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
  adminGet, bootIpxe, curl, machineOf, makeTree, profilesYaml, rawGet, rawRequest, runHvpxe, SECRET_OUTSIDE, logLine, sha256, startHvpxe, stopHvpxe,
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
  it('answers /healthz: a status to machines, the details to the operator', async () => {
    const r = await get('/healthz');
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toEqual({ status: 'ok' });
    expect(JSON.parse((await adminGet(hv!, '/healthz')).text)).toMatchObject({ status: 'ok', problems: [], machines: 3 });
  });

  it('/boot.ipxe chains to /ipxe/auto with the iPXE variables', async () => {
    const lines = (await get('/boot.ipxe')).text.split('\n');
    expect(lines[0]).toBe('#!ipxe');
    expect(lines[3]).toBe(`chain --autofree ${hv!.url}/ipxe/auto?mac=\${netX/mac}&uuid=\${uuid}&hostname=\${hostname:uristring}&buildarch=\${buildarch}&platform=\${platform} || goto failed`);
  });

  it('matches by MAC and serves the script line by line (UEFI: initrd=)', async () => {
    const u = hv!.url;
    const text = (await get('/ipxe/auto?mac=52:54:00:00:00:01&uuid=&hostname=&buildarch=x86_64&platform=efi')).text;
    const credential = /credential=([A-Za-z0-9_-]{43}) /.exec(text)![1];
    const lines = text.split('\n');
    expect(lines).toEqual([
      '#!ipxe',
      '# hvpxe: machine node-1 (group rack1, profile hv, matched by mac)',
      'echo hvpxe: installing node-1 with profile hv',
      `kernel ${u}/artifacts/k/vmlinuz initrd=initrd.img ip=dhcp net.ifnames=1 rd.cos.disable console=tty1 root=live:${u}/artifacts/rootfs.squashfs harvester.install.automatic=true harvester.install.config_url=${u}/config/node-1.yaml?credential=${credential} hvinstall.events_url=${u}/events/node-1?credential=${credential} rd.net.dhcp.retry=3 || goto failed`,
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
    expect(lines[3]).toMatch(new RegExp(`config_url=${hv!.url}/config/node-3\\.yaml\\?credential=[A-Za-z0-9_-]{43} `));
  });

  it('falls back to the default group for an unknown MAC', async () => {
    const boot = await bootIpxe(hv!, 'mac=de:ad:be:ef:00:01&platform=efi');
    expect(boot.script.split('\n')[1]).toBe('# hvpxe: machine spare-deadbeef0001 (group spare, profile hv, matched by default)');
    const cfg = await get(boot.config!.slice(hv!.url.length));
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
    const config = async (q: string): Promise<any> => parse(await (await fetch((await bootIpxe(hv!, q)).config!)).text());
    const c1 = await config('mac=52:54:00:00:00:01');
    const c2 = await config('mac=52-54-00-00-00-02');
    const c3 = await config('uuid=11111111-2222-3333-4444-555555555555');
    expect(c1.install).toMatchObject({ mode: 'create', vip: '10.0.0.100', vip_mode: 'static', iso_url: `${hv!.url}/artifacts/harvester.iso` });
    expect(c2).toMatchObject({ server_url: 'https://10.0.0.100:443', install: { mode: 'join' } });
    expect(c3.install.management_interface).toMatchObject({ method: 'static', ip: '10.0.0.13', subnet_mask: '255.255.255.0', gateway: '10.0.0.1' });
    for (const c of [c1, c2, c3]) {
      const r = await validateConfig({ ...c, install: { ...c.install, automatic: true } });
      expect(r.errors).toEqual([]);
    }
  });

  it("never serves a machine's config (token, password) without a boot credential of its own; a replay is refused and recorded", async () => {
    // Knowing the machine's MAC or UUID is no longer enough; neither is another machine's credential.
    const node2 = await bootIpxe(hv!, 'mac=52:54:00:00:00:02');
    for (const q of ['', '?mac=52:54:00:00:00:01', '?uuid=11111111-2222-3333-4444-555555555555', '?credential=garbage', `?credential=${node2.credential}`, `?credential=${'A'.repeat(43)}`]) {
      const r = await get(`/config/node-1.yaml${q}`);
      expect({ q, status: r.status }).toEqual({ q, status: 404 });
      expect(r.text).not.toContain('cluster-token-xyz123');
    }
    expect((await get(`/config/nobody.yaml?credential=${node2.credential}`)).status).toBe(404);
    expect((await get('/ipxe/node-1')).status).toBe(404);
    // Claiming node-1's DHCP hostname does not get its script (which carries its config URL).
    const claimed = (await get('/ipxe/auto?hostname=node-1')).text;
    expect(claimed).toContain('no profile matches this machine');
    expect(claimed).not.toContain('52:54:00:00:00:01');
    expect((await get('/ipxe/node-1?mac=52:54:00:00:00:01')).status).toBe(200);
    // The config once per credential: a second fetch is refused, recorded and counted.
    const first = await get(node2.config!.slice(hv!.url.length));
    expect(first.status).toBe(200);
    expect(first.text).toContain('cluster-token-xyz123');
    const again = await get(node2.config!.slice(hv!.url.length));
    expect(again.status).toBe(403);
    expect(again.text).toBe('refused: the config was already served for this boot credential: boot the machine again for a new one\n');
    expect(again.text).not.toContain('cluster-token-xyz123');
    const m = await machineOf(hv!, 'node-2');
    expect(m.refusals.at(-1)).toMatchObject({ what: 'config', reason: 'the config was already served for this boot credential: boot the machine again for a new one', address: '127.0.0.1' });
    expect(m.refusals.filter((r: { what: string }) => r.what === 'config')).toHaveLength(1);
    expect((await machineOf(hv!, 'node-1')).refusals.map((r: { reason: string }) => r.reason)).toEqual(expect.arrayContaining([expect.stringMatching(/^no boot credential/), expect.stringMatching(/^not a boot credential hvpxe gave this machine/)]));
    expect((await adminGet(hv!, '/metrics')).text).toMatch(/^hvpxe_refused_total\{what="config",reason="used"\} 1$/m);
    expect(hv!.stderr.join('')).toMatch(/"msg":"refused","what":"config","machine":"node-2","reason":"the config was already served/);
  });

  it('serves /machines and /metrics only on the admin listener, only with the operator token', async () => {
    for (const p of ['/machines', '/metrics']) {
      const boot = await get(p);
      expect({ p, status: boot.status }).toEqual({ p, status: 404 });
      expect(boot.text).not.toContain('52:54:00');
      const anonymous = await fetch(`${hv!.adminUrl}${p}`);
      expect(anonymous.status).toBe(401);
      expect(await anonymous.text()).not.toContain('52:54:00');
      expect((await fetch(`${hv!.adminUrl}${p}`, { headers: { Authorization: `Bearer ${hv!.token}x` } })).status).toBe(401);
      expect((await fetch(`${hv!.adminUrl}${p}`, { headers: { Authorization: hv!.token } })).status).toBe(401);
      expect((await adminGet(hv!, p)).status).toBe(200);
    }
    expect(hv!.adminUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    // /machines never shows a credential or its hash.
    const boot = await bootIpxe(hv!, 'mac=52:54:00:00:00:02');
    const listing = (await adminGet(hv!, '/machines')).text;
    expect(listing).not.toContain(boot.credential);
    expect(listing).not.toContain('"sha256"');
    expect(JSON.parse(listing).machines.find((x: { name: string }) => x.name === 'node-2').credentials.at(-1)).toEqual({ issuedAt: expect.any(String), via: 'ipxe', address: '127.0.0.1' });
  });

  it('keeps secrets out of its log', () => {
    const logs = hv!.stderr.join('');
    expect(logs).toContain('"msg":"request"');
    expect(logs).not.toContain('cluster-token-xyz123');
    expect(logs).not.toContain('root-password-secret');
    // Nor a boot credential, nor the operator token.
    expect(logs).not.toMatch(/credential=|[A-Za-z0-9_-]{43}/);
    expect(logs).not.toContain(hv!.token);
  });
});

describe('hvpxe serve: artifacts as curl expects them', () => {
  const iso = () => tree.files['harvester.iso'];
  const url = () => `${hv!.url}/artifacts/harvester.iso`;

  it('HEAD and GET carry length, ranges, ETag and Last-Modified; the body is the file', async () => {
    const head = curl(['-I', url()]).stdout;
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    expect(head).toMatch(new RegExp(`content-length: ${iso().length}`, 'i'));
    expect(head).toMatch(/accept-ranges: bytes/i);
    expect(head).toMatch(/etag: "[0-9a-f]+-[0-9a-f]+-[0-9a-f]+"/i);
    expect(head).toMatch(/last-modified: \w{3}, \d{2} \w{3} \d{4}/i);
    const out = path.join(dir, 'iso.full');
    expect(curl(['-o', out, url()]).code).toBe(0);
    // Plain HTTP from a build that has the addon: bodies go out with sendfile (pxe/zero-copy-send.ts),
    // as the start-up line and the request's log line say.
    expect(hv!.stderr.join('')).toMatch(/"msg":"serving".*"artifacts":"sendfile"/);
    expect(JSON.parse(await logLine(hv!, /"msg":"request","method":"GET","path":"\/artifacts\/harvester\.iso","status":200/))).toMatchObject({ via: 'sendfile' });
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
    const events = (await bootIpxe(hv!, 'mac=52:54:00:00:00:01')).events!;
    const big = await fetch(events, { method: 'POST', body: 'x'.repeat(70_000) });
    expect(big.status).toBe(413);
    expect((await get('/artifacts/k/vmlinuz', { method: 'DELETE' })).status).toBe(405);
    expect((await get('/events/nobody', { method: 'POST', body: '{}' })).status).toBe(404);
  });
});

describe('hvpxe serve: /machines and install events', () => {
  it('records fetches and the webhook progress the installer posts back', async () => {
    // What a booting node-1 does: its script, its config, an artifact (attributed by client address), then STARTED.
    const boot = await bootIpxe(hv!, 'mac=52:54:00:00:00:01');
    const c1 = parse(await (await fetch(boot.config!)).text());
    expect((await get('/artifacts/k/vmlinuz')).status).toBe(200);
    const { config } = await validateConfig(c1);
    expect(config.install?.webhooks?.map((w) => w.url)).toContain(boot.events);
    const sink = new MemorySink();
    await sendWebhooks('STARTED', config, { vars: { Hostname: 'node-1', MACAddr: '52:54:00:00:00:01', IPAddrV4: '10.0.0.11' }, log: new Logger(sink) });
    expect(sink.lines.join('')).toContain('webhook sent');
    // The installer's log never shows the credential in the URLs it prints.
    expect(sink.lines.join('')).not.toContain(boot.credential);
    const m = await machineOf(hv!, 'node-1');
    expect(m.fetched.ipxe).toBeTruthy();
    expect(m.fetched.config).toBeTruthy();
    expect(m.progress.event).toBe('STARTED');
    expect(m.events.at(-1).data).toEqual({ event: 'STARTED', hostname: 'node-1', mac: '52:54:00:00:00:01', ipv4: '10.0.0.11', ipv6: '' });
    expect(m.fetched.artifacts['k/vmlinuz']).toMatchObject({ status: 200, bytes: tree.files['k/vmlinuz'].length });
  });

  it('refuses events without a credential of a current boot of that machine, and records the refusal', async () => {
    const node3 = await bootIpxe(hv!, 'uuid=11111111-2222-3333-4444-555555555555');
    const node2 = await bootIpxe(hv!, 'mac=52:54:00:00:00:02');
    const succeeded = JSON.stringify({ event: 'SUCCEEDED' });
    for (const q of ['', '?credential=nope', `?credential=${node2.credential}`]) {
      expect((await get(`/events/node-3${q}`, { method: 'POST', body: succeeded })).status).toBe(404);
    }
    const m = await machineOf(hv!, 'node-3');
    expect(m.installed).toBeUndefined();
    expect(m.boot.next).toBe('install');
    expect(m.refusals.filter((r: { what: string }) => r.what === 'events')).toHaveLength(3);
    expect((await get(node3.events!.slice(hv!.url.length), { method: 'POST', body: succeeded })).status).toBe(204);
    expect((await machineOf(hv!, 'node-3')).installed.via).toBe('SUCCEEDED webhook');
  });
});

describe('hvpxe serve: reload', () => {
  it('SIGHUP with an invalid profile keeps the old one serving; a valid one replaces it', async () => {
    const before = (await get('/ipxe/auto?mac=52:54:00:00:00:01')).text;
    await writeFile(profiles, profilesYaml(tree, { token: null, extraArg: 'hv.marker=new' }));
    hv!.proc.kill('SIGHUP');
    const err = await waitUntil(
      async () => {
        const h = JSON.parse((await adminGet(hv!, '/healthz')).text);
        return h.problems.length ? { done: true as const, value: h.problems[0] as string } : { done: false as const, reason: 'no reload yet' };
      },
      { what: 'the refused reload', timeoutMs: 60_000, intervalMs: 200 },
    );
    expect(err).toMatch(/^the last reload of profiles.yaml was refused \(still serving the previous profiles\): .*machine node-1 \(group rack1\): .*token/is);
    // A refused reload says so on both listeners' /healthz.
    expect(JSON.parse((await get('/healthz')).text)).toEqual({ status: 'degraded' });
    const again = await bootIpxe(hv!, 'mac=52:54:00:00:00:01');
    expect(again.script.replace(/credential=[A-Za-z0-9_-]{43}/g, '')).toBe(before.replace(/credential=[A-Za-z0-9_-]{43}/g, ''));
    expect(await (await fetch(again.config!)).text()).toContain('cluster-token-xyz123');

    await writeFile(profiles, profilesYaml(tree, { extraArg: 'hv.marker=new' }));
    hv!.proc.kill('SIGHUP');
    await waitUntil(
      async () => {
        const h = JSON.parse((await adminGet(hv!, '/healthz')).text);
        return h.reloads >= 1 ? { done: true as const, value: h } : { done: false as const, reason: 'not reloaded' };
      },
      { what: 'the accepted reload', timeoutMs: 60_000, intervalMs: 200 },
    );
    expect((await get('/ipxe/auto?mac=52:54:00:00:00:01')).text).toContain(' hv.marker=new || goto failed');
    expect(JSON.parse((await get('/healthz')).text)).toEqual({ status: 'ok' });
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
  it('a client that closes the moment it has the whole body is logged as served whole, not aborted', async () => {
    const net = await import('node:net');
    const u = new URL(hv!.url);
    const ROUNDS = 20;
    const isoLines = () => hv!.stderr.join('').split('\n').filter((l) => l.includes('"msg":"request"')).map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.path === '/artifacts/harvester.iso');
    const before = isoLines().length;
    for (let i = 0; i < ROUNDS; i++) {
      await new Promise<void>((resolve, reject) => {
        let got = -1;
        let head = Buffer.alloc(0);
        const sock = net.connect(Number(u.port), u.hostname, () => sock.write('GET /artifacts/harvester.iso HTTP/1.1\r\nHost: t\r\nRange: bytes=4000-4999\r\n\r\n'));
        sock.on('data', (d: Buffer) => {
          if (got < 0) {
            head = Buffer.concat([head, d]);
            const end = head.indexOf('\r\n\r\n');
            if (end < 0) return;
            got = head.length - end - 4;
          } else got += d.length;
          // the last byte is here: gone at once, before the server has returned from its send
          if (got >= 1000) {
            sock.resetAndDestroy();
            resolve();
          }
        });
        sock.on('error', reject);
      });
    }
    await waitUntil(async () => (isoLines().length >= before + ROUNDS ? { done: true as const, value: true } : { done: false as const, reason: `${isoLines().length - before} of ${ROUNDS} request lines` }), {
      what: 'the request lines',
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    const lines = isoLines().slice(before);
    expect(lines).toHaveLength(ROUNDS);
    for (const l of lines) expect(l).toMatchObject({ status: 206, bytes: 1000 });
    expect(lines.filter((l) => l.aborted)).toEqual([]);
  });

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
