/**
 * Reads RKE2's certificates where RKE2 keeps them (docs.rke2.io/security/certificates, `rke2
 * certificate check`): server/tls/*.crt and server/tls/etcd/*.crt on servers (the API server's, the
 * supervisor's, the controllers' and etcd's; rotated by `rke2 certificate rotate`), agent/*.crt on
 * every node (client-kubelet.crt, serving-kubelet.crt, client-kube-proxy.crt,
 * client-rke2-controller.crt; renewed by rke2-agent at its start). Parsed with node:crypto (no
 * openssl on the node's path). A file that does not parse is reported, never thrown.
 */
import { X509Certificate } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { CertificateFact, CertScope, UnreadableCertificate } from './plan.js';

export const RKE2_DATA_DIR = '/var/lib/rancher/rke2';

const DIRS: Array<{ dir: string; scope: CertScope }> = [
  { dir: 'server/tls', scope: 'server' },
  { dir: 'server/tls/etcd', scope: 'server' },
  { dir: 'agent', scope: 'agent' },
];

/** The first certificate of a PEM file: its notAfter and whether it is a CA. Pure. */
export function parseCertificate(pem: string | Buffer, nodePath: string, scope: CertScope): CertificateFact | UnreadableCertificate {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(pem);
  } catch (err) {
    return { path: nodePath, problem: `not a PEM certificate (${(err as Error).message})` };
  }
  const notAfterMs = Date.parse(cert.validTo);
  if (Number.isNaN(notAfterMs)) return { path: nodePath, problem: `its notAfter ${JSON.stringify(cert.validTo)} is not a date` };
  return { path: nodePath, scope, ca: cert.ca, notAfterMs };
}

export interface ObservedCertificates {
  certs: CertificateFact[];
  unreadable: UnreadableCertificate[];
}

/** Every *.crt of RKE2's certificate directories under the node root; a missing directory has none. */
export async function readCertificates(root: (p: string) => string, dataDir = RKE2_DATA_DIR): Promise<ObservedCertificates> {
  const out: ObservedCertificates = { certs: [], unreadable: [] };
  for (const { dir, scope } of DIRS) {
    const nodeDir = path.posix.join(dataDir, dir);
    const names = await readdir(root(nodeDir)).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return [] as string[];
      throw err;
    });
    for (const name of names.filter((n) => n.endsWith('.crt')).sort()) {
      const nodePath = path.posix.join(nodeDir, name);
      const pem = await readFile(root(nodePath)).catch((err: NodeJS.ErrnoException) => err);
      const fact = pem instanceof Error ? { path: nodePath, problem: `cannot read: ${pem.code ?? pem.message}` } : parseCertificate(pem, nodePath, scope);
      if ('problem' in fact) out.unreadable.push(fact);
      else out.certs.push(fact);
    }
  }
  return out;
}
