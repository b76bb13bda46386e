/** hvagent beside rancherd: who owns registries.yaml, what rke2/vip/promotion report when they only watch. */
import { describe, expect, it } from 'vitest';
import { explainClusterFile, registriesOwner } from '../../../agent/registries/ownership.js';
import { judgeUnderRancherd } from '../../../agent/rke2/under-rancherd.js';
import { judgeVipUnderRancherd } from '../../../agent/guards/vip.js';
import { judgePromotionUnderRancherd } from '../../../agent/guards/promotion.js';
import { desiredRegistries } from '../../../agent/registries/registries-file.js';

const connected = { remoteEnabled: true, connectionInfoFile: '/var/lib/rancher/agent/rancher2_connection_info.json', connectionInfoExists: true };

describe('registries.yaml owner', () => {
  it('is hvagent without rancherd, before rancher-system-agent exists, takes remote plans or is connected', () => {
    expect(registriesOwner({ bootstrapper: 'hvagent', systemAgent: connected }).owner).toBe('agent');
    expect(registriesOwner({ bootstrapper: 'rancherd' })).toMatchObject({ owner: 'agent', why: expect.stringContaining('no /etc/rancher/agent/config.yaml') });
    expect(registriesOwner({ bootstrapper: 'rancherd', systemAgent: { ...connected, remoteEnabled: false } })).toMatchObject({ owner: 'agent', why: expect.stringContaining('remoteEnabled is not true') });
    expect(registriesOwner({ bootstrapper: 'rancherd', systemAgent: { ...connected, connectionInfoExists: false } })).toMatchObject({ owner: 'agent', why: expect.stringContaining('not connected to Rancher yet') });
  });
  it('is the cluster once rancher-system-agent takes plans from Rancher', () => {
    expect(registriesOwner({ bootstrapper: 'rancherd', systemAgent: connected })).toMatchObject({ owner: 'cluster', why: expect.stringContaining('since Rancher 2.7.5') });
  });
  it('follows the owner setting over the judgement', () => {
    expect(registriesOwner({ bootstrapper: 'hvagent', setting: 'cluster' }).owner).toBe('cluster');
    expect(registriesOwner({ bootstrapper: 'rancherd', systemAgent: connected, setting: 'agent' }).owner).toBe('agent');
    expect(registriesOwner({ bootstrapper: 'rancherd', systemAgent: connected, setting: 'auto' }).owner).toBe('cluster');
    expect(registriesOwner({ bootstrapper: 'rancherd', systemAgent: connected, setting: 'agent' }).why).toBe('the registries owner setting says agent');
    expect(registriesOwner({ bootstrapper: 'hvagent' }).why).toBe('no rancherd on this image: nothing else writes registries.yaml, hvagent keeps it as installed');
  });
  it('names the connection info file it waits for, or says none is configured', () => {
    expect(registriesOwner({ bootstrapper: 'rancherd', systemAgent: { ...connected, connectionInfoExists: false } }).why).toContain('(/var/lib/rancher/agent/rancher2_connection_info.json missing)');
    expect(registriesOwner({ bootstrapper: 'rancherd', systemAgent: { remoteEnabled: true, connectionInfoExists: false } }).why).toContain('(/etc/rancher/agent/config.yaml names no connectionInfoFile)');
  });
});

describe('a cluster-owned registries.yaml explained', () => {
  const installTime = desiredRegistries(JSON.stringify({ Mirrors: { 'docker.io': { Endpoints: ['https://mirror.local:5000'] } } }));
  it('names the field symptom: a hand-written file recycled to 0 B by the cluster', () => {
    const r = explainClusterFile({ current: { content: '', mode: 0o600 }, previousSize: 167, shown: '/etc/rancher/rke2/registries.yaml' });
    expect(r.detail).toBe(
      "/etc/rancher/rke2/registries.yaml is 0 B (was 167 B): written by rancher-system-agent from the cluster's empty containerd-registry setting; set Harvester's containerd-registry setting to change it; a hand-written file is replaced on the next plan",
    );
    expect(r.drift).toContain('recycled by the cluster');
  });
  it('reports a file that differs from the install-time setting as drift, and leaves it', () => {
    const r = explainClusterFile({ current: { content: 'mirrors: {}\n', mode: 0o600 }, installTime, shown: '/f' });
    expect(r.detail).toContain('differs from the install-time setting (edited)');
    expect(r.detail).toContain('the cluster\'s containerd-registry setting wins');
    expect(r.drift).toBe('/f differs from the install-time setting (edited); left to the cluster');
  });
  it('is quiet when the cluster wrote what the install declared', () => {
    const r = explainClusterFile({ current: { content: installTime.content, mode: installTime.mode }, installTime, shown: '/f' });
    expect(r.drift).toBeUndefined();
    expect(r.detail).toContain('matches the install-time setting');
  });
  it('explains an absent file', () => {
    expect(explainClusterFile({ current: {}, installTime, shown: '/f' }).drift).toContain('the cluster\'s setting is empty');
    expect(explainClusterFile({ current: {}, shown: '/f', previousSize: 167 }).detail).toMatch(/^\/f is absent \(was 167 B\): owned by the cluster, whose containerd-registry setting is empty/);
  });
  it('names a size change only when the size changed', () => {
    expect(explainClusterFile({ current: { content: 'mirrors: {}\n' }, shown: '/f', previousSize: 12 }).detail).toMatch(/^\/f \(12 B\) follows/);
    expect(explainClusterFile({ current: { content: 'mirrors: {}\n' }, shown: '/f', previousSize: 40 }).detail).toMatch(/^\/f \(12 B \(was 40 B\)\) follows the cluster's containerd-registry setting; set Harvester's/);
    expect(explainClusterFile({ current: { content: 'mirrors: {}\n' }, shown: '/f' }).detail).toMatch(/^\/f \(12 B\) follows/);
  });
  it('a blank file is drift only when the install declared mirrors or the file just changed', () => {
    const blank = { content: '\n  \n', mode: 0o600 };
    expect(explainClusterFile({ current: blank, shown: '/f' })).toEqual({
      detail: "/f is 4 B: written by rancher-system-agent from the cluster's empty containerd-registry setting; set Harvester's containerd-registry setting to change it; a hand-written file is replaced on the next plan",
      drift: undefined,
    });
    expect(explainClusterFile({ current: blank, shown: '/f', previousSize: 4 }).drift).toBeUndefined();
    expect(explainClusterFile({ current: blank, shown: '/f', installTime }).drift).toBe("/f is 4 B: recycled by the cluster from its empty containerd-registry setting");
    expect(explainClusterFile({ current: blank, shown: '/f', previousSize: 167 }).drift).toBe("/f is 4 B (was 167 B): recycled by the cluster from its empty containerd-registry setting");
  });
});

describe('rke2 under rancherd: watched, never started', () => {
  const base = { role: 'server' as const, rke2: { active: false }, rancherd: { active: 'activating' as const } };
  it('waits while rancherd bootstraps', () => {
    expect(judgeUnderRancherd(base)).toEqual({ status: 'retry', reason: 'rancherd is bootstrapping; rke2-server is not running yet' });
  });
  it('fails with rancherd\'s log lines when rancherd failed', () => {
    const r = judgeUnderRancherd({ ...base, rancherd: { active: 'failed', result: 'exit-code', tail: 'level=fatal msg="x509: certificate has expired"' } });
    expect(r.status).toBe('fail');
    expect(r.status === 'fail' && r.diagnosis).toContain('rancherd.service failed (exit-code)');
    expect(r.status === 'fail' && r.diagnosis).toContain('  level=fatal msg="x509: certificate has expired"');
  });
  it('is ok once the unit rancherd started answers, and says who started it', () => {
    expect(judgeUnderRancherd({ ...base, rke2: { active: true }, probe: { done: true, value: 'ok' } })).toEqual({ status: 'ok', detail: 'rke2-server ready (started by rancherd; hvagent watches only)' });
    expect(judgeUnderRancherd({ ...base, rke2: { active: true }, probe: { done: false, reason: 'HTTP 500' } })).toMatchObject({ status: 'retry', reason: expect.stringContaining('HTTP 500') });
  });
});

describe('vip and promotion under rancherd', () => {
  it('never announces the VIP and refuses a second announcer', () => {
    expect(judgeVipUnderRancherd({ vip: '10.0.0.10', probe: { done: false, reason: 'ECONNREFUSED' } })).toEqual({
      status: 'ok',
      detail: "VIP 10.0.0.10 does not answer on 6443 yet (announced by the harvester chart's kube-vip, not by hvagent, once Harvester is deployed): ECONNREFUSED",
    });
    const r = judgeVipUnderRancherd({ vip: '10.0.0.10', staticPod: '/var/lib/rancher/rke2/agent/pod-manifests/kube-vip.yaml', probe: { done: true, value: 'ok' } });
    expect(r.status).toBe('fail');
    expect(r.status === 'fail' && r.diagnosis).toContain('two leader elections for one address');
  });
  it('reports Harvester\'s promotion instead of promoting', () => {
    expect(judgePromotionUnderRancherd('n2', { 'harvesterhci.io/promote-status': 'running' })).toMatchObject({ status: 'ok', detail: expect.stringContaining('is being promoted') });
    expect(judgePromotionUnderRancherd('n2', { 'harvesterhci.io/promote-status': 'failed' }).status).toBe('fail');
    expect(judgePromotionUnderRancherd('n2', undefined)).toMatchObject({ status: 'ok', detail: expect.stringContaining('hvagent watches only') });
  });
  it('names the Node and the annotation in each state of the promotion', () => {
    expect(judgePromotionUnderRancherd('n2', { 'harvesterhci.io/promote-status': 'running' })).toEqual({ status: 'ok', detail: "Node n2 is being promoted (harvesterhci.io/promote-status=running; Harvester's promote controller promotes through rancher-system-agent; hvagent watches only)" });
    expect(judgePromotionUnderRancherd('n2', { 'harvesterhci.io/promote-status': 'complete' })).toEqual({ status: 'ok', detail: 'Node n2 was promoted to control-plane (harvesterhci.io/promote-status=complete)' });
    const failed = judgePromotionUnderRancherd('n2', { 'harvesterhci.io/promote-status': 'failed' });
    expect(failed).toMatchObject({ status: 'fail', diagnosis: "Harvester's promotion of Node n2 failed (harvesterhci.io/promote-status=failed)" });
    expect((failed as { hint: string }).hint).toMatch(/kubectl -n harvester-system get jobs/);
    expect(judgePromotionUnderRancherd('n2', {})).toEqual({ status: 'ok', detail: "worker; Harvester's promote controller promotes through rancher-system-agent; hvagent watches only" });
    expect(judgePromotionUnderRancherd('n2', { 'harvesterhci.io/promote-status': 'unknown' })).toMatchObject({ status: 'ok', detail: expect.stringMatching(/^worker; /) });
  });
});
