/**
 * The agent's Kubernetes client never sends the node's credentials to a server whose certificate it
 * did not check: a kubeconfig without a CA is checked against the system's CAs (a private cluster
 * CA then fails), and only the kubeconfig's own insecure-skip-tls-verify turns the check off.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KubeClient } from '../../../agent/kube/client.js';
import { loadKubeCredentials } from '../../../agent/kube/kubeconfig.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'hv-kube-tls-'));
let server: https.Server;
let url = '';
let seen: Array<string | undefined> = [];

beforeAll(async () => {
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  run(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=cluster CA']);
  run(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'srv.key', '-out', 'srv.csr', '-subj', '/CN=127.0.0.1']);
  writeFileSync(path.join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  run(['x509', '-req', '-in', 'srv.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'srv.pem', '-days', '1', '-extfile', 'san.ext']);
  server = https.createServer({ key: readFileSync(path.join(dir, 'srv.key')), cert: readFileSync(path.join(dir, 'srv.pem')) }, (req, res) => {
    seen.push(req.headers.authorization);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ metadata: { name: 'n1' } }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  rmSync(dir, { recursive: true, force: true });
});

async function client(cluster: Record<string, unknown>): Promise<KubeClient> {
  const file = path.join(dir, `kubeconfig-${Object.keys(cluster).join('-')}.yaml`);
  const doc = { clusters: [{ name: 'c', cluster: { server: url, ...cluster } }], users: [{ name: 'u', user: { token: 'node-bearer-token' } }], contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }], 'current-context': 'x' };
  writeFileSync(file, JSON.stringify(doc));
  return new KubeClient(await loadKubeCredentials(file, (p) => p), { timeoutMs: 5_000 });
}

describe('KubeClient and the server certificate', () => {
  it('no CA in the kubeconfig: the private cluster certificate is refused and no token is sent', async () => {
    seen = [];
    const c = await client({});
    await expect(c.getNode('n1')).rejects.toThrow(/TLS verification failed/);
    expect(seen).toEqual([]);
    await c.close();
  });

  it('the kubeconfig CA: verified, and the token goes with the request', async () => {
    seen = [];
    const c = await client({ 'certificate-authority-data': readFileSync(path.join(dir, 'ca.pem')).toString('base64') });
    expect((await c.getNode('n1')).metadata.name).toBe('n1');
    expect(seen).toEqual(['Bearer node-bearer-token']);
    await c.close();
  });

  it("the kubeconfig's own insecure-skip-tls-verify: true is honoured, as kubectl honours it", async () => {
    const c = await client({ 'insecure-skip-tls-verify': true });
    expect((await c.getNode('n1')).metadata.name).toBe('n1');
    await c.close();
  });
});
