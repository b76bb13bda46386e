/**
 * Reading RKE2's certificates with node:crypto: the first certificate of a bundle, CAs told apart,
 * a file that does not parse reported by name while the others are read.
 */
import { mkdtempSync, mkdirSync, copyFileSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { parseCertificate, readCertificates } from '../../../agent/certs/observe.js';

const FIXTURES = fileURLToPath(new URL('../../fixtures/rke2-certs/', import.meta.url));
let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('RKE2 certificates, read with node:crypto', () => {
  it("a bundle's first certificate (the leaf, not the CA after it) gives the notAfter", () => {
    const fact = parseCertificate(readFileSync(path.join(FIXTURES, 'client-kubelet.crt')), '/var/lib/rancher/rke2/agent/client-kubelet.crt', 'agent');
    expect(fact).toEqual({ path: '/var/lib/rancher/rke2/agent/client-kubelet.crt', scope: 'agent', ca: false, notAfterMs: Date.parse('2026-06-01T12:00:00Z') });
    expect(parseCertificate(readFileSync(path.join(FIXTURES, 'client-ca.crt')), '/x/client-ca.crt', 'agent')).toMatchObject({ ca: true });
  });

  it('not a certificate: a problem naming the file, no throw', () => {
    expect(parseCertificate('-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n', '/x/y.crt', 'server')).toMatchObject({ path: '/x/y.crt', problem: expect.stringMatching(/^not a PEM certificate/) });
  });

  it('reads server/tls, server/tls/etcd and agent under the root; missing directories have none; broken files are named', async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'hv-certs-'));
    const at = (p: string) => path.join(dir!, p);
    mkdirSync(at('var/lib/rancher/rke2/agent'), { recursive: true });
    mkdirSync(at('var/lib/rancher/rke2/server/tls/etcd'), { recursive: true });
    copyFileSync(path.join(FIXTURES, 'client-kubelet.crt'), at('var/lib/rancher/rke2/agent/client-kubelet.crt'));
    copyFileSync(path.join(FIXTURES, 'client-ca.crt'), at('var/lib/rancher/rke2/server/tls/etcd/server-ca.crt'));
    writeFileSync(at('var/lib/rancher/rke2/server/tls/serving-kube-apiserver.crt'), 'truncated\n');
    writeFileSync(at('var/lib/rancher/rke2/server/tls/serving-kube-apiserver.key'), 'not read: not a .crt\n');
    mkdirSync(at('var/lib/rancher/rke2/server/tls/temporary-certs.crt'));
    const got = await readCertificates((p) => path.join(dir!, p));
    expect(got.certs.map((c) => [c.path, c.scope, c.ca])).toEqual([
      ['/var/lib/rancher/rke2/server/tls/etcd/server-ca.crt', 'server', true],
      ['/var/lib/rancher/rke2/agent/client-kubelet.crt', 'agent', false],
    ]);
    expect(got.unreadable.map((u) => u.path)).toEqual(['/var/lib/rancher/rke2/server/tls/serving-kube-apiserver.crt', '/var/lib/rancher/rke2/server/tls/temporary-certs.crt']);
    expect(got.unreadable[1]!.problem).toBe('cannot read: EISDIR');
    expect(await readCertificates((p) => path.join(dir!, 'nothing', p))).toEqual({ certs: [], unreadable: [] });
  });
});
