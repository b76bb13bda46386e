/**
 * Reads the parts of a kubeconfig the agent needs to talk to the API server with the node's own
 * credentials (the kubelet's kubeconfig on agents, rke2.yaml on servers): server URL, CA, and a
 * client certificate or a bearer token. File references are resolved relative to the kubeconfig and
 * under the agent's root.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse } from 'yaml';
import { HvError } from '../../lib/errors.js';

export interface KubeCredentials {
  server: string;
  ca?: string;
  cert?: string;
  key?: string;
  token?: string;
  /** The kubeconfig's own `insecure-skip-tls-verify: true`: the one way the server's certificate goes unchecked. */
  insecureSkipTlsVerify?: boolean;
  /** Where these came from, for messages. */
  source: string;
}

type Named<T> = { name?: string } & T;
interface KubeconfigDoc {
  'current-context'?: string;
  clusters?: Array<Named<{ cluster?: Record<string, string | boolean> }>>;
  users?: Array<Named<{ user?: Record<string, string> }>>;
  contexts?: Array<Named<{ context?: { cluster?: string; user?: string } }>>;
}

/** Pure: picks the current context's cluster and user. File references stay as paths. */
export function parseKubeconfig(text: string, source: string): { cluster: Record<string, string | boolean>; user: Record<string, string> } {
  let doc: KubeconfigDoc;
  try {
    doc = parse(text) as KubeconfigDoc;
  } catch (err) {
    throw new HvError(`kubeconfig is not valid YAML: ${(err as Error).message}`, { where: source });
  }
  if (!doc || typeof doc !== 'object') throw new HvError('kubeconfig is empty', { where: source });
  const ctxName = doc['current-context'];
  const ctx = doc.contexts?.find((c) => c.name === ctxName)?.context ?? doc.contexts?.[0]?.context;
  const cluster = (ctx?.cluster ? doc.clusters?.find((c) => c.name === ctx.cluster) : doc.clusters?.[0])?.cluster;
  const user = (ctx?.user ? doc.users?.find((u) => u.name === ctx.user) : doc.users?.[0])?.user ?? {};
  if (!cluster?.server) {
    throw new HvError('kubeconfig names no cluster server', { where: source, hint: 'check the file RKE2 wrote; it may be truncated' });
  }
  return { cluster, user };
}

/** Loads credentials; `root` maps node paths into the agent's --root. */
export async function loadKubeCredentials(file: string, root: (p: string) => string): Promise<KubeCredentials> {
  const real = root(file);
  let text: string;
  try {
    text = await readFile(real, 'utf8');
  } catch {
    throw new HvError(`kubeconfig not found: ${file}`, {
      where: real,
      hint: 'RKE2 writes it when the node first registers; wait for the rke2 guard to succeed',
    });
  }
  const { cluster, user } = parseKubeconfig(text, file);
  const base = path.posix.dirname(file);
  const text_ = (v: string | boolean | undefined): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
  const readRef = async (dataKey: string, fileKey: string): Promise<string | undefined> => {
    const data = text_(cluster[dataKey]) ?? text_(user[dataKey]);
    if (data) return Buffer.from(data, 'base64').toString('utf8');
    const ref = text_(cluster[fileKey]) ?? text_(user[fileKey]);
    if (!ref) return undefined;
    const abs = path.posix.isAbsolute(ref) ? ref : path.posix.join(base, ref);
    try {
      return await readFile(root(abs), 'utf8');
    } catch {
      throw new HvError(`kubeconfig ${file} refers to ${abs}, which cannot be read`, { where: root(abs) });
    }
  };
  return {
    server: String(cluster.server),
    ...(cluster['insecure-skip-tls-verify'] === true ? { insecureSkipTlsVerify: true } : {}),
    ca: await readRef('certificate-authority-data', 'certificate-authority'),
    cert: await readRef('client-certificate-data', 'client-certificate'),
    key: await readRef('client-key-data', 'client-key'),
    token: user.token,
    source: file,
  };
}
