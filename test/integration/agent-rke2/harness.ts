/**
 * Shared set-up for the rke2 / vip / promotion guard tests: a temporary node root with RKE2's TLS
 * layout (real certificates from openssl), the rke2 TEST DOUBLE (test/fixtures/rke2-standin), and a
 * minimal in-test Kubernetes API (Nodes and Leases, mutual TLS) standing in for the cluster.
 */
import { mkdtemp, mkdir, writeFile, readdir, readFile, rm } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Logger, MemorySink } from '../../../lib/logger.js';
import type { GuardContext } from '../../../agent/guard.js';
import type { HarvesterConfig } from '../../../config/types.js';

export const STANDIN = fileURLToPath(new URL('../../fixtures/rke2-standin/rke2-standin.mjs', import.meta.url));
export const TLS_DIR = '/var/lib/rancher/rke2/server/tls';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A CA, a serving cert for 127.0.0.1, and RKE2's client-admin cert, as RKE2 lays them out. */
export async function makeTls(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server-ca.key', '-out', 'server-ca.crt', '-days', '2', '-subj', '/CN=rke2-server-ca'], dir);
  await writeFile(path.join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'serving-kube-apiserver.key', '-out', 'serving.csr', '-subj', '/CN=kube-apiserver'], dir);
  openssl(['x509', '-req', '-in', 'serving.csr', '-CA', 'server-ca.crt', '-CAkey', 'server-ca.key', '-CAcreateserial', '-out', 'serving-kube-apiserver.crt', '-days', '2', '-extfile', 'san.ext'], dir);
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'client-admin.key', '-out', 'client.csr', '-subj', '/O=system:masters/CN=system:admin'], dir);
  openssl(['x509', '-req', '-in', 'client.csr', '-CA', 'server-ca.crt', '-CAkey', 'server-ca.key', '-CAcreateserial', '-out', 'client-admin.crt', '-days', '2'], dir);
}

export interface KubeApiDouble {
  url: string;
  nodes: Map<string, { metadata: { name: string; labels: Record<string, string>; annotations: Record<string, string> } }>;
  leases: Map<string, string>;
  patches: Array<{ node: string; body: unknown }>;
  /** Events POSTed, with their namespace. */
  events: Array<{ namespace: string; body: Record<string, unknown> }>;
  close(): Promise<void>;
}

/** TEST DOUBLE of the Kubernetes API: GET/PATCH Nodes, GET Leases, client certificates required. */
export async function startKubeApiDouble(tlsDir: string): Promise<KubeApiDouble> {
  const nodes: KubeApiDouble['nodes'] = new Map();
  const leases = new Map<string, string>();
  const patches: KubeApiDouble['patches'] = [];
  const events: KubeApiDouble['events'] = [];
  const server = https.createServer(
    {
      key: await readFile(path.join(tlsDir, 'serving-kube-apiserver.key')),
      cert: await readFile(path.join(tlsDir, 'serving-kube-apiserver.crt')),
      ca: await readFile(path.join(tlsDir, 'server-ca.crt')),
      requestCert: true,
      rejectUnauthorized: true,
    },
    (req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const send = (code: number, obj: unknown) => res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(obj));
        const node = /^\/api\/v1\/nodes\/([^/]+)$/.exec(req.url ?? '');
        const event = /^\/api\/v1\/namespaces\/([^/]+)\/events$/.exec(req.url ?? '');
        if (event && req.method === 'POST') {
          const posted = JSON.parse(body) as Record<string, unknown>;
          events.push({ namespace: decodeURIComponent(event[1]!), body: posted });
          return send(201, { ...posted, metadata: { name: `event-${events.length}`, namespace: event[1] } });
        }
        const lease = /^\/apis\/coordination\.k8s\.io\/v1\/namespaces\/kube-system\/leases\/([^/]+)$/.exec(req.url ?? '');
        if (node) {
          const n = nodes.get(decodeURIComponent(node[1]!));
          if (!n) return send(404, { kind: 'Status', message: `nodes "${node[1]}" not found` });
          if (req.method === 'PATCH') {
            const p = JSON.parse(body) as { metadata?: { annotations?: Record<string, string>; labels?: Record<string, string> } };
            patches.push({ node: n.metadata.name, body: p });
            Object.assign(n.metadata.annotations, p.metadata?.annotations ?? {});
            Object.assign(n.metadata.labels, p.metadata?.labels ?? {});
          }
          return send(200, { apiVersion: 'v1', kind: 'Node', ...n });
        }
        if (lease && req.method === 'GET') {
          const holder = leases.get(lease[1]!);
          if (!holder) return send(404, { kind: 'Status', message: `leases "${lease[1]}" not found` });
          return send(200, { kind: 'Lease', metadata: { name: lease[1] }, spec: { holderIdentity: holder } });
        }
        send(404, { kind: 'Status', message: 'not found' });
      });
    },
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}`,
    nodes,
    leases,
    patches,
    events,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

export interface Node {
  dir: string;
  root: (p: string) => string;
  sink: MemorySink;
  serverPort: number;
  agentPort: number;
  settings: Record<string, unknown>;
  /** Writes the stand-in's behaviour file (read at each rke2 start). */
  behave(b: { server?: Record<string, unknown>; agent?: Record<string, unknown>; certificate?: Record<string, unknown> }): Promise<void>;
  ctx(config: HarvesterConfig, extra?: Record<string, unknown>): GuardContext & { abort(): void };
  writeKubeconfig(nodePath: string, server: string): Promise<void>;
  cleanup(): Promise<void>;
}

export async function makeNode(): Promise<Node> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-rke2-'));
  const root = (p: string) => path.join(dir, p);
  await makeTls(root(TLS_DIR));
  const serverPort = await freePort();
  const agentPort = await freePort();
  const behaviourFile = path.join(dir, 'standin.json');
  const sink = new MemorySink();
  const settings: Record<string, unknown> = {
    binary: STANDIN,
    supervisor: 'process',
    apiServerUrl: `https://127.0.0.1:${serverPort}`,
    kubeletHealthzUrl: `http://127.0.0.1:${agentPort}/healthz`,
    probeWindowMs: 8_000,
    probeIntervalMs: 200,
    pollIntervalMs: 200,
    maxCrashes: 3,
    nodeName: 'node-2',
    env: { HV_RKE2_STANDIN: behaviourFile },
  };
  const node: Node = {
    dir,
    root,
    sink,
    serverPort,
    agentPort,
    settings,
    async behave(b) {
      await writeFile(
        behaviourFile,
        JSON.stringify({
          server: b.server && { port: serverPort, tlsDir: root(TLS_DIR), ...b.server },
          agent: b.agent && { port: agentPort, ...b.agent },
          certificate: b.certificate,
        }),
      );
    },
    ctx(config, extra = {}) {
      const ac = new AbortController();
      return {
        root,
        config,
        log: new Logger(sink, undefined, 'debug'),
        signal: ac.signal,
        settings: { ...settings, ...extra },
        progress: () => undefined,
        now: Date.now,
        abort: () => ac.abort(),
      };
    },
    async writeKubeconfig(nodePath, server) {
      await mkdir(path.dirname(root(nodePath)), { recursive: true });
      await writeFile(
        root(nodePath),
        [
          'apiVersion: v1',
          'clusters:',
          `- cluster: {server: "${server}", certificate-authority: ${TLS_DIR}/server-ca.crt}`,
          '  name: local',
          'contexts:',
          '- context: {cluster: local, user: user}',
          '  name: local',
          'current-context: local',
          'users:',
          `- user: {client-certificate: ${TLS_DIR}/client-admin.crt, client-key: ${TLS_DIR}/client-admin.key}`,
          '  name: user',
          '',
        ].join('\n'),
      );
    },
    async cleanup() {
      // Stop every stand-in this node started, by the PIDs the agent recorded.
      for (const f of await readdir(root('/run/hvagent')).catch(() => [] as string[])) {
        if (!f.endsWith('.pid')) continue;
        try {
          const { pid } = JSON.parse(await readFile(root(`/run/hvagent/${f}`), 'utf8')) as { pid: number };
          try { process.kill(-pid, 'SIGKILL'); } catch { /* gone */ }
        } catch { /* unreadable */ }
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
  return node;
}

export async function writeDropIn(node: Node, name: string, content: string): Promise<void> {
  const p = node.root(`/etc/rancher/rke2/config.yaml.d/${name}`);
  await mkdir(path.dirname(p), { recursive: true });
  await writeFile(p, content, { mode: 0o600 });
}

export const createConfig: HarvesterConfig = {
  schemeVersion: 1,
  token: 'cluster-token-xyz',
  os: { hostname: 'node-1', password: 'p' },
  install: { mode: 'create', vip: '127.0.0.1', vipMode: 'static', device: '/dev/vda' },
};

export const joinConfig: HarvesterConfig = {
  schemeVersion: 1,
  serverUrl: 'https://10.0.0.5:443',
  token: 'cluster-token-xyz',
  os: { hostname: 'node-2', password: 'p' },
  install: { mode: 'join', device: '/dev/vda' },
};
