import { afterEach, describe, expect, it } from 'vitest';
import { readFile, access, mkdir, writeFile } from 'node:fs/promises';
import vip from '../../../agent/guards/vip.js';
import promotion from '../../../agent/guards/promotion.js';
import rke2 from '../../../agent/guards/rke2.js';
import { makeNode, writeDropIn, startKubeApiDouble, createConfig, joinConfig, TLS_DIR, type Node, type KubeApiDouble } from './harness.js';

let node: Node | undefined;
let api: KubeApiDouble | undefined;
afterEach(async () => {
  await node?.cleanup();
  await api?.close();
  node = undefined;
  api = undefined;
});

const KUBE_VIP = `apiVersion: v1
kind: Pod
metadata: {name: kube-vip, namespace: kube-system}
spec:
  containers:
  - name: kube-vip
    image: ghcr.io/kube-vip/kube-vip:v0.8.9
`;

async function writeManifest(n: Node): Promise<void> {
  const p = n.root('/var/lib/rancher/rke2/agent/pod-manifests/kube-vip.yaml');
  await mkdir(p.replace(/\/[^/]+$/, ''), { recursive: true });
  await writeFile(p, KUBE_VIP);
}

describe('vip guard', () => {
  it('reports the VIP answering and the node holding kube-vip\'s lease', async () => {
    node = await makeNode();
    api = await startKubeApiDouble(node.root(TLS_DIR));
    api.leases.set('plndr-cp-lock', 'node-1');
    await node.writeKubeconfig('/etc/rancher/rke2/rke2.yaml', api.url);
    await writeManifest(node);
    await node.behave({ server: { readyAfterMs: 0 } });
    expect((await rke2.reconcile(node.ctx(createConfig))).status).toBe('ok');
    const r = await vip.reconcile(node.ctx(createConfig, { vipUrl: `https://127.0.0.1:${node.serverPort}/readyz` }));
    expect(r).toEqual({ status: 'ok', detail: 'VIP 127.0.0.1 answers on 6443; held by node-1' });
  });

  it('fails with what to do when the kube-vip manifest is missing', async () => {
    node = await makeNode();
    const r = await vip.reconcile(node.ctx(createConfig));
    expect(r).toEqual({
      status: 'fail',
      diagnosis: 'no kube-vip manifest in /var/lib/rancher/rke2/agent/pod-manifests',
      hint: 'the installer renders it for create nodes (hvinstall render); restore it and run `hvagent once --guard vip`',
    });
  });

  it('keeps retrying while the VIP does not answer', async () => {
    node = await makeNode();
    await writeManifest(node);
    const r = await vip.reconcile(node.ctx(createConfig, { vipUrl: `https://127.0.0.1:${node.serverPort}/readyz` }));
    expect(r.status).toBe('retry');
    expect((r as { reason: string }).reason).toMatch(
      /^VIP 127\.0\.0\.1 does not answer on 6443 yet \(kube-vip from kube-vip\.yaml may not lead yet\): https:\/\/127\.0\.0\.1:\d+\/readyz: connection refused/,
    );
  });

  it('is skipped on a worker (join node not promoted)', async () => {
    node = await makeNode();
    expect(await vip.reconcile(node.ctx(joinConfig))).toEqual({
      status: 'skip',
      reason: 'not a control-plane node (kube-vip runs on control-plane nodes only)',
    });
  });
});

describe('promotion guard', () => {
  async function joinedWorker(): Promise<{ n: Node; a: KubeApiDouble }> {
    const n = await makeNode();
    const a = await startKubeApiDouble(n.root(TLS_DIR));
    a.nodes.set('node-2', { metadata: { name: 'node-2', labels: { 'harvesterhci.io/managed': 'true' }, annotations: {} } });
    await n.writeKubeconfig('/var/lib/rancher/rke2/agent/kubelet.kubeconfig', a.url);
    await n.writeKubeconfig('/etc/rancher/rke2/rke2.yaml', a.url);
    await writeDropIn(n, '90-harvester-agent.yaml', 'token: cluster-token-xyz\n');
    await writeDropIn(n, '92-harvester-kube-audit-policy.yaml', 'apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n');
    return { n, a };
  }

  it('watches a worker until asked, then switches RKE2 from agent to server and records complete', async () => {
    ({ n: node, a: api } = await joinedWorker());
    await node.behave({ agent: { readyAfterMs: 0 }, server: { readyAfterMs: 1000 } });
    expect((await rke2.reconcile(node.ctx(joinConfig))).status).toBe('ok');
    const agentPid = (JSON.parse(await readFile(node.root('/run/hvagent/rke2-agent.pid'), 'utf8')) as { pid: number }).pid;

    expect(await promotion.reconcile(node.ctx(joinConfig))).toEqual({ status: 'ok', detail: 'worker; watching Node node-2 for a promotion request' });

    // The watch picks up Harvester's promote controller marking this node.
    const ctx = node.ctx(joinConfig);
    const watching = promotion.watch!(ctx);
    api.nodes.get('node-2')!.metadata.annotations['harvesterhci.io/promote-status'] = 'running';
    const until = Date.now() + 30_000;
    while (Date.now() < until && api.patches.length === 0) await new Promise((r) => setTimeout(r, 100));
    ctx.abort();
    await watching;

    expect(api.patches).toEqual([{ node: 'node-2', body: { metadata: { annotations: { 'harvesterhci.io/promote-status': 'complete' } } } }]);
    const dropIn = await readFile(node.root('/etc/rancher/rke2/config.yaml.d/90-harvester-server.yaml'), 'utf8');
    expect(dropIn).toContain('cni: multus,canal\ncluster-cidr: 10.52.0.0/16\nservice-cidr: 10.53.0.0/16\ncluster-dns: 10.53.0.10\ntls-san:\n  - 10.0.0.5\n');
    expect(dropIn).toContain('audit-policy-file: /etc/rancher/rke2/config.yaml.d/92-harvester-kube-audit-policy.yaml');
    expect(() => process.kill(agentPid, 0)).toThrow(); // the agent was stopped
    await access(node.root('/var/lib/rancher/hvagent/promoted'));
    // It now runs kube-vip for the VIP from server_url, like the first control-plane node.
    const kv = await readFile(node.root('/var/lib/rancher/rke2/agent/pod-manifests/kube-vip.yaml'), 'utf8');
    expect(kv).toContain('kube-vip');
    expect(kv).toContain('10.0.0.5');
    // After promotion this node runs the server role; the vip guard now applies to it.
    expect(await promotion.reconcile(node.ctx(joinConfig))).toEqual({ status: 'ok', detail: 'already promoted to control-plane' });
  });

  it('rolls back to a working agent and records failed when the server cannot start', async () => {
    ({ n: node, a: api } = await joinedWorker());
    await node.behave({ agent: { readyAfterMs: 0 }, server: { crash: 'etcd cluster join failed: duplicate node name found' } });
    expect((await rke2.reconcile(node.ctx(joinConfig))).status).toBe('ok');
    api.nodes.get('node-2')!.metadata.annotations['harvesterhci.io/promote-status'] = 'running';
    const r = await promotion.reconcile(node.ctx(joinConfig, { probeWindowMs: 1_500, promotionTimeoutMs: 20_000 }));
    expect(r.status).toBe('fail');
    const d = (r as { diagnosis: string }).diagnosis;
    expect(d).toMatch(/^promotion of node-2 failed: rke2-server exited 3 times/);
    expect(d).toContain('etcd cluster join failed: duplicate node name found');
    expect(d).toContain('rolled back: rke2-agent is running again');
    expect(api.patches.at(-1)).toEqual({ node: 'node-2', body: { metadata: { annotations: { 'harvesterhci.io/promote-status': 'failed' } } } });
    await expect(access(node.root('/etc/rancher/rke2/config.yaml.d/90-harvester-server.yaml'))).rejects.toThrow();
    await expect(access(node.root('/var/lib/rancher/hvagent/promoted'))).rejects.toThrow();
  });

  it('says why it cannot watch when the API is unreachable', async () => {
    node = await makeNode();
    await node.writeKubeconfig('/var/lib/rancher/rke2/agent/kubelet.kubeconfig', 'https://127.0.0.1:1');
    const r = await promotion.reconcile(node.ctx(joinConfig));
    expect(r).toEqual({ status: 'retry', reason: 'cannot read Node node-2: GET https://127.0.0.1:1/api/v1/nodes/node-2: connection refused (nothing listening yet)' });
  });
});
