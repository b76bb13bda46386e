/**
 * downloadFile over https through a proxy (HTTPS_PROXY): the site's private CA (--ca-file,
 * hvinstall.ca_file) checks the server's certificate inside the proxy's tunnel too, and a
 * certificate that CA did not sign is still refused. The proxy is a CONNECT tunnel on loopback.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { downloadFile } from '../../../installer/remote/iso.js';
import { tunnelTo } from './connect-tunnel.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'hv-dl-proxy-tls-'));
const body = Buffer.from('the ISO bytes, through a proxy '.repeat(500));
const sha = createHash('sha256').update(body).digest('hex');
let origin: https.Server;
let proxy: http.Server;
let originUrl = '';
const tunnels: string[] = [];
const saved = { ...process.env };

function cert(name: string): void {
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  run(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}-ca.key`, '-out', `${name}-ca.pem`, '-days', '1', '-subj', `/CN=${name} CA`]);
  run(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', '/CN=127.0.0.1']);
  writeFileSync(path.join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  run(['x509', '-req', '-in', `${name}.csr`, '-CA', `${name}-ca.pem`, '-CAkey', `${name}-ca.key`, '-CAcreateserial', '-out', `${name}.pem`, '-days', '1', '-extfile', 'san.ext']);
}

beforeAll(async () => {
  cert('site');
  cert('other');
  origin = https.createServer({ key: readFileSync(path.join(dir, 'site.key')), cert: readFileSync(path.join(dir, 'site.pem')) }, (_req, res) => {
    res.writeHead(200, { 'content-length': body.length }).end(body);
  });
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  originUrl = `https://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  proxy = http.createServer((_req, res) => res.writeHead(405).end());
  proxy.on('connect', (req: http.IncomingMessage, client: Socket, head: Buffer) => {
    tunnels.push(String(req.url));
    const [host, port] = String(req.url).split(':');
    tunnelTo(client, head, Number(port), host);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  for (const k of ['http_proxy', 'HTTP_PROXY', 'https_proxy', 'no_proxy', 'NO_PROXY']) delete process.env[k];
  process.env.HTTPS_PROXY = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});
afterEach(() => {
  tunnels.length = 0;
});
afterAll(async () => {
  for (const k of ['http_proxy', 'HTTP_PROXY', 'https_proxy', 'HTTPS_PROXY', 'no_proxy', 'NO_PROXY']) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
  origin.closeAllConnections();
  proxy.closeAllConnections();
  await Promise.all([new Promise((r) => origin.close(r)), new Promise((r) => proxy.close(r))]);
  rmSync(dir, { recursive: true, force: true });
});

describe('downloadFile through an https proxy tunnel', () => {
  it("the --ca-file CA checks the server's certificate inside the tunnel", async () => {
    const dest = path.join(dir, 'ok.iso');
    const r = await downloadFile(`${originUrl}/h.iso`, dest, { sha256: sha, caFile: path.join(dir, 'site-ca.pem'), attempts: 1 });
    expect(r.sha256).toBe(sha);
    expect(readFileSync(dest)).toEqual(body);
    expect(tunnels).toEqual([originUrl.replace('https://', '')]);
  });

  it('a CA that did not sign the certificate: refused, nothing written', async () => {
    const dest = path.join(dir, 'refused.iso');
    await expect(downloadFile(`${originUrl}/h.iso`, dest, { sha256: sha, caFile: path.join(dir, 'other-ca.pem'), attempts: 1 })).rejects.toThrow(/TLS certificate of 127\.0\.0\.1:\d+ not accepted/);
    expect(tunnels.length).toBeGreaterThan(0);
    expect(() => readFileSync(dest)).toThrow(/ENOENT/);
  });
});
