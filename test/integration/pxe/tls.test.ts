import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sendWebhooks } from '../../../installer/remote/webhooks.js';
import { downloadFile } from '../../../installer/remote/iso.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { curl, makeTree, profilesYaml, scriptUrls, logLine, sha256, startHvpxe, stopHvpxe, type Running, type Tree } from './harness.js';

let dir: string;
let tree: Tree;
let hv: Running | undefined;
let cert: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-pxe-tls-'));
  tree = await makeTree(dir);
  cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  const profiles = path.join(dir, 'profiles.yaml');
  await writeFile(profiles, profilesYaml(tree));
  hv = await startHvpxe(['serve', '--root', tree.root, '--profiles', profiles, '--listen', '127.0.0.1:0', '--tls-cert', cert, '--tls-key', key]);
});

afterAll(async () => {
  await stopHvpxe(hv);
  await rm(dir, { recursive: true, force: true });
});

describe('hvpxe serve over TLS', () => {
  it('serves https with the given certificate; clients without the CA are refused', async () => {
    expect(hv!.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(curl(['--cacert', cert, '-o', '/dev/null', '-w', '%{http_code}', `${hv!.url}/healthz`]).stdout).toBe('200');
    expect(curl(['-o', '/dev/null', `${hv!.url}/healthz`]).code).toBe(60);
    const script = curl(['--cacert', cert, `${hv!.url}/ipxe/auto?mac=52:54:00:00:00:01`]).stdout;
    expect(script).toMatch(new RegExp(`harvester\\.install\\.config_url=${hv!.url}/config/node-1\\.yaml\\?credential=[A-Za-z0-9_-]{43} `));
    // The admin listener is https too, and wants the operator token.
    expect(hv!.adminUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(curl(['--cacert', cert, '-o', '/dev/null', '-w', '%{http_code}', `${hv!.adminUrl}/machines`]).stdout).toBe('401');
  });

  it('webhooks: insecure skips verification, otherwise a TLS failure is logged and nothing throws', async () => {
    const { events } = scriptUrls(curl(['--cacert', cert, `${hv!.url}/ipxe/auto?mac=52:54:00:00:00:01`]).stdout);
    const hook = (insecure: boolean) => ({ install: { webhooks: [{ event: 'SUCCEEDED', method: 'POST', url: events!, payload: '{"event":"SUCCEEDED"}', insecure }] } });
    const ok = new MemorySink();
    await sendWebhooks('SUCCEEDED', hook(true), { vars: {}, log: new Logger(ok) });
    expect(ok.lines.join('')).toContain('webhook sent');
    const bad = new MemorySink();
    await sendWebhooks('SUCCEEDED', hook(false), { vars: {}, log: new Logger(bad) });
    expect(bad.lines.join('')).toMatch(/webhook failed.*(self.signed|certificate|verify)/i);
    const m = JSON.parse(curl(['--cacert', cert, '-H', `Authorization: Bearer ${hv!.token}`, `${hv!.adminUrl}/machines`]).stdout);
    expect(m.machines.find((x: { name: string }) => x.name === 'node-1').progress.event).toBe('SUCCEEDED');
  });

  it('the ISO download trusts a CA file, and fails at once (no retries) without it', async () => {
    const dest = path.join(dir, 'tls.iso');
    const r = await downloadFile(`${hv!.url}/artifacts/harvester.iso`, dest, { caFile: cert, sha256: sha256(tree.files['harvester.iso']) });
    expect(sha256(await readFile(r.path))).toBe(sha256(tree.files['harvester.iso']));
    // Encrypted in user space: its start-up line says artifacts are streamed, and why.
    expect(hv!.stderr.join('')).toMatch(/"msg":"serving".*"artifacts":"streamed \(TLS: /);
    expect(JSON.parse(await logLine(hv!, /"msg":"request","method":"GET","path":"\/artifacts\/harvester\.iso","status":200/))).toMatchObject({ via: 'streamed' });
    await expect(downloadFile(`${hv!.url}/artifacts/harvester.iso`, path.join(dir, 'untrusted.iso'), { attempts: 5, retryDelayMs: 5_000 })).rejects.toThrow(
      /TLS certificate of 127\.0\.0\.1:\d+ not accepted .*pass the CA bundle/,
    );
  });
});
