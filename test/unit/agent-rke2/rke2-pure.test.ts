import { describe, expect, it } from 'vitest';
import { desiredRole, supervisorUrl, nodeNameOf } from '../../../agent/rke2/role.js';
import { checkDropIns } from '../../../agent/rke2/dropins.js';
import { rke2Settings, RKE2_DEFAULTS } from '../../../agent/rke2/settings.js';
import { renderPromotionServerDropIn, promotionRequested, vipFromServerUrl } from '../../../agent/promote/server-dropin.js';
import { parseKubeconfig } from '../../../agent/kube/kubeconfig.js';
import { findKubeVipManifest } from '../../../agent/vip/holder.js';
import type { HarvesterConfig } from '../../../config/types.js';

const join: HarvesterConfig = { serverUrl: 'https://vip.example.com:443', token: 't0ken', install: { mode: 'join' } };

describe('RKE2 role decisions', () => {
  it('create is a server, join an agent until promoted, install runs no RKE2', () => {
    expect(desiredRole({ install: { mode: 'create' } }, false)).toBe('server');
    expect(desiredRole({ install: { mode: 'JOIN' } }, false)).toBe('agent');
    expect(desiredRole({ install: { mode: 'join' } }, true)).toBe('server');
    expect(desiredRole({ install: { mode: 'install' } }, false)).toBeUndefined();
  });

  it("derives RKE2's supervisor address from Harvester's server_url", () => {
    expect(supervisorUrl('https://10.0.0.5:443')).toBe('https://10.0.0.5:9345');
    expect(supervisorUrl('vip.example.com')).toBe('https://vip.example.com:9345');
    expect(supervisorUrl('https://[bad')).toBeUndefined();
  });

  it('names the node from the config hostname, else the host, unless overridden', () => {
    expect(nodeNameOf({ os: { hostname: 'n1' } }, 'live', undefined)).toBe('n1');
    expect(nodeNameOf({}, 'live', undefined)).toBe('live');
    expect(nodeNameOf({ os: { hostname: 'n1' } }, 'live', 'x')).toBe('x');
  });
});

describe('checkDropIns', () => {
  it('writes the VIP drop-in for a joining agent that lacks `server:`', () => {
    expect(checkDropIns('agent', { token: 'x' }, join, true)).toEqual({
      missing: [],
      toWrite: { '90-harvester-vip.yaml': 'server: https://vip.example.com:9345\n' },
    });
  });

  it('names a missing token and an underivable server', () => {
    const r = checkDropIns('agent', {}, { install: { mode: 'join' } }, true);
    expect(r.missing).toEqual([
      'no `server:` in any drop-in and no server_url in the config to derive it from',
      'no `token:` in any drop-in (the installer writes it, mode 0600)',
    ]);
  });

  it('a join node whose token is in `token-file:` has its token (RKE2 reads either)', () => {
    expect(checkDropIns('agent', { server: 'https://vip.example.com:9345', 'token-file': '/etc/rancher/rke2/token' }, join, true)).toEqual({ missing: [], toWrite: {} });
    expect(checkDropIns('agent', { server: 'https://vip.example.com:9345', token: 't' }, join, true)).toEqual({ missing: [], toWrite: {} });
    expect(checkDropIns('agent', { server: 'https://vip.example.com:9345' }, join, true).missing).toEqual(['no `token:` in any drop-in (the installer writes it, mode 0600)']);
    // The create-node refusal of `server:` is about servers.
    expect(checkDropIns('agent', { server: 'https://vip.example.com:9345' }, { install: { mode: 'join' } }, false)).toEqual({ missing: [], toWrite: {} });
    // A node that is not joining needs no token in a drop-in.
    expect(checkDropIns('server', {}, { install: { mode: 'create' } }, false)).toEqual({ missing: [], toWrite: {} });
  });

  it('refuses a create node configured to join somewhere', () => {
    expect(checkDropIns('server', { server: 'https://x:9345' }, { install: { mode: 'create' } }, false).missing).toEqual([
      'a create node must not have `server: https://x:9345` (it would try to join instead of cluster-init)',
    ]);
  });
});

describe('rke2Settings', () => {
  it('keeps defaults and ignores ill-typed overrides', () => {
    expect(rke2Settings(undefined)).toEqual(RKE2_DEFAULTS);
    const s = rke2Settings({ probeWindowMs: '5', binary: '/opt/rke2', supervisor: 'bogus' });
    expect(s.probeWindowMs).toBe(60_000);
    expect(s.binary).toBe('/opt/rke2');
    expect(s.supervisor).toBe('auto');
  });
});

describe('promotion drop-in', () => {
  it('renders what promote.sh writes, with the VIP and sans as TLS SANs', () => {
    const text = renderPromotionServerDropIn({ ...join, sans: ['rancher.example.com'], install: { mode: 'join', clusterPodCidr: '10.60.0.0/16' } }, { witness: false, auditPolicyPresent: false });
    expect(text).toBe(
      '# Written by hvagent when this node was promoted to control-plane.\n' +
        'cni: multus,canal\ncluster-cidr: 10.60.0.0/16\nservice-cidr: 10.53.0.0/16\ncluster-dns: 10.53.0.10\n' +
        'tls-san:\n  - vip.example.com\n  - rancher.example.com\n',
    );
  });

  it("takes Harvester's default CIDRs and DNS, and writes no tls-san without a VIP or SANs", () => {
    const text = renderPromotionServerDropIn({ install: { mode: 'join' } }, { witness: false, auditPolicyPresent: false });
    expect(text).toBe(
      '# Written by hvagent when this node was promoted to control-plane.\n' +
        'cni: multus,canal\ncluster-cidr: 10.52.0.0/16\nservice-cidr: 10.53.0.0/16\ncluster-dns: 10.53.0.10\n',
    );
    expect(renderPromotionServerDropIn({ sans: ['a.example.com', 'a.example.com'], install: { mode: 'join' } }, { witness: false, auditPolicyPresent: false })).toContain('tls-san:\n  - a.example.com\n');
    expect(renderPromotionServerDropIn({ sans: ['a.example.com', 'a.example.com'], install: { mode: 'join' } }, { witness: false, auditPolicyPresent: false })).not.toContain('null');
  });

  it('makes a witness an etcd-only member', () => {
    const text = renderPromotionServerDropIn(join, { witness: true, auditPolicyPresent: true });
    expect(text.split('\n')[0]).toBe('# Written by hvagent when this node was promoted to etcd (witness).');
    expect(text).toContain('disable-apiserver: true\ndisable-controller-manager: true\ndisable-scheduler: true\n');
    expect(text).toContain('audit-policy-file: /etc/rancher/rke2/config.yaml.d/92-harvester-kube-audit-policy.yaml');
  });

  it("recognises Harvester's promotion request only while it is running", () => {
    expect(promotionRequested({ 'harvesterhci.io/promote-status': 'running' })).toBe(true);
    expect(promotionRequested({ 'harvesterhci.io/promote-status': 'complete' })).toBe(false);
    expect(promotionRequested(undefined)).toBe(false);
    expect(vipFromServerUrl('10.1.1.1')).toBe('10.1.1.1');
  });
});

describe('kubeconfig and manifests', () => {
  it('picks the current context and reports a kubeconfig without a server', () => {
    const kc = parseKubeconfig(
      'current-context: b\nclusters: [{name: a, cluster: {server: "https://a"}}, {name: bb, cluster: {server: "https://b"}}]\ncontexts: [{name: a, context: {cluster: a, user: u}}, {name: b, context: {cluster: bb, user: u}}]\nusers: [{name: u, user: {token: x}}]\n',
      'kc',
    );
    expect(kc.cluster.server).toBe('https://b');
    expect(() => parseKubeconfig('clusters: []\n', '/x/kubelet.kubeconfig')).toThrow('kubeconfig names no cluster server');
    expect(() => parseKubeconfig('a: [\n', 'kc')).toThrow(/kubeconfig is not valid YAML/);
  });

  it('finds the kube-vip static pod among other manifests', () => {
    expect(findKubeVipManifest({ 'etcd.yaml': 'image: rancher/hardened-etcd', 'vip.yaml': 'image: "ghcr.io/kube-vip/kube-vip:v0.8"' })).toBe('vip.yaml');
    expect(findKubeVipManifest({ 'etcd.yaml': 'image: rancher/hardened-etcd' })).toBeUndefined();
  });
});

describe('rke2 binary setting', () => {
  it("takes the agent's common rke2Binary unless the guard names its own", () => {
    expect(rke2Settings({ rke2Binary: '/opt/x/rke2' }).binary).toBe('/opt/x/rke2');
    expect(rke2Settings({ rke2Binary: '/opt/x/rke2', binary: '/b' }).binary).toBe('/b');
    expect(rke2Settings({}).binary).toBe('/opt/rke2/bin/rke2');
  });
});
