/**
 * What rancherd and the cluster read from the rendered bootstrap: rancherd's config parsed back
 * (role, server, token, labels, versions) and checked against rancherd's Config fields; every
 * resource checked as Kubernetes (kubernetes-models) or against its CRD's fields; settings within
 * Harvester's allow-list; yip's templating undone the way Go templates would; and who bootstraps
 * (no static kube-vip, no stand-in RKE2 drop-ins beside rancherd).
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { renderNode } from '../../../installer/render/index.js';
import type { HarvesterConfig } from '../../../config/types.js';
import type { RenderedFile } from '../../../installer/render/types.js';
import { HvError } from '../../../lib/errors.js';
import { CASES, RANCHERD_IMAGE, RELEASE_SOURCE, SPECIAL_TOKEN, TEMPLATES, TOKEN } from './cases.js';
import { assertSchema, parseYamlStrict, ourRancherdConfigSchema, ourRancherdResourceSchema } from './format-schemas.js';

const text = (f: RenderedFile) => (typeof f.content === 'string' ? f.content : Buffer.from(f.content).toString('utf8'));
const caseOf = (name: string) => CASES.find((c) => c.name === name)!;
// Each case rendered once for the file (the tests only read the result): a create node's render
// derives the admin password hash, 210000 rounds of PBKDF2, about half a second.
const rendered = new Map<string, ReturnType<typeof renderNode>>();
const render = (name: string): ReturnType<typeof renderNode> => {
  const c = caseOf(name);
  if (!rendered.has(name)) rendered.set(name, renderNode(structuredClone(c.config), structuredClone(c.facts), c.seeds));
  return rendered.get(name)!;
};
const yipFile = (r: ReturnType<typeof render>, p: string) => r.yipFiles.find((f) => f.path === p);
const version2 = (r: ReturnType<typeof render>, p: string) => (parseYamlStrict(text(yipFile(r, p)!)) as { resources: Array<{ spec: { chart: string; version: string } }> }).resources.map((x) => [x.spec.chart, x.spec.version]);
const ALLOW_LIST = (JSON.parse(readFileSync(new URL('../../../schemas/harvester-config.v1.schema.json', import.meta.url), 'utf8')) as { properties: { systemSettings: { propertyNames: { enum: string[] } } } })
  .properties.systemSettings.propertyNames.enum;

/** What Go's text/template (as yip runs it over each file) makes of hvinstall's escaped content: `{{"{{"}}` prints `{{`; no other action may remain. */
function goTemplateOutput(s: string): string {
  const out = s.split('{{"{{"}}').join('\u0000');
  if (out.includes('{{')) throw new Error(`an unescaped Go template action remains: ${out.slice(out.indexOf('{{'), out.indexOf('{{') + 40)}`);
  return out.split('\u0000').join('{{');
}

async function assertKubernetesObject(doc: Record<string, unknown>): Promise<void> {
  const core: Record<string, () => Promise<{ validate(): void }>> = {
    'v1/Namespace': async () => new (await import('kubernetes-models/v1/Namespace')).Namespace(doc as never),
    'v1/ServiceAccount': async () => new (await import('kubernetes-models/v1/ServiceAccount')).ServiceAccount(doc as never),
    'v1/Secret': async () => new (await import('kubernetes-models/v1/Secret')).Secret(doc as never),
    'networking.k8s.io/v1/Ingress': async () => new (await import('kubernetes-models/networking.k8s.io/v1/Ingress')).Ingress(doc as never),
  };
  const make = core[`${doc.apiVersion}/${doc.kind}`];
  if (make) return (await make()).validate();
  // Custom resources: ObjectMeta as Kubernetes defines it, the rest against the CRD's Go fields.
  const { ObjectMeta } = await import('@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta');
  new ObjectMeta(doc.metadata as never).validate();
  assertSchema(ourRancherdResourceSchema, doc, `${doc.kind} ${(doc.metadata as { name: string }).name}`);
}

describe('rancherd config.yaml', () => {
  it('create: role cluster-init, no server, the node name, quoted token, the versions and the managed label', () => {
    const r = render('rancherd-create');
    const f = yipFile(r, '/etc/rancher/rancherd/config.yaml')!;
    expect({ mode: f.mode, secret: f.secret }).toEqual({ mode: 0o600, secret: true });
    const doc = parseYamlStrict(text(f)) as Record<string, unknown>;
    assertSchema(ourRancherdConfigSchema, doc, 'config.yaml');
    expect(doc).toEqual({
      role: 'cluster-init',
      nodeName: r.hostname.name,
      token: TOKEN,
      kubernetesVersion: 'v1.35.6+rke2r1',
      rancherVersion: 'v2.14.2',
      rancherInstallerImage: 'rancher/system-agent-installer-rancher:v2.14.2',
      labels: ['harvesterhci.io/managed=true'],
      extraConfig: { disable: ['rke2-snapshot-controller', 'rke2-snapshot-controller-crd', 'rke2-snapshot-validation-webhook'] },
    });
    expect(text(f)).toMatch(/^token: "/m);
  });

  it('join: role agent with the server, the install-cordoned label, and a token full of YAML-special characters intact', () => {
    const r = render('rancherd-join');
    const doc = parseYamlStrict(text(yipFile(r, '/etc/rancher/rancherd/config.yaml')!)) as Record<string, unknown>;
    assertSchema(ourRancherdConfigSchema, doc, 'config.yaml');
    expect(doc).toMatchObject({ role: 'agent', server: 'https://192.168.122.100:443', token: SPECIAL_TOKEN, labels: ['harvesterhci.io/managed=true', 'harvesterhci.io/install-cordoned=true'] });
    // A join node gets no bootstrap resources: the cluster already has them.
    expect(r.yipFiles.map((f) => f.path)).toEqual(['/etc/rancher/rancherd/config.yaml']);
  });

  it('witness: an agent like any join node; its taint stays in the RKE2 drop-ins', () => {
    const r = render('rancherd-join-witness');
    expect(parseYamlStrict(text(yipFile(r, '/etc/rancher/rancherd/config.yaml')!))).toMatchObject({ role: 'agent' });
    expect(r.files.map((f) => f.path)).toContain('/etc/rancher/rke2/config.yaml.d/99-harvester-witness.yaml');
  });

  it('install-only mode renders nothing for rancherd, even on an image with rancherd', () => {
    for (const name of ['rancherd-install-only', 'install-only']) {
      const r = render(name);
      expect(r.yipFiles, name).toEqual([]);
      expect(r.files.some((f) => f.path.startsWith('/etc/rancher/')), name).toBe(false);
      expect(r.bootstrap.versions, name).toBeUndefined();
    }
  });

  it('the config-given versions win over the media', () => {
    const r = render('rancherd-create-arm64');
    expect(parseYamlStrict(text(yipFile(r, '/etc/rancher/rancherd/config.yaml')!))).toMatchObject({
      kubernetesVersion: 'v1.34.9+rke2r1',
      rancherVersion: 'v2.13.4',
      rancherInstallerImage: 'rancher/system-agent-installer-rancher:v2.13.4',
    });
    expect(r.bootstrap.versions!.from).toEqual({
      kubernetes: 'config runtime_version',
      rancher: 'config rancher_version',
      harvesterChart: `${RELEASE_SOURCE} harvesterChart`,
      monitoringChart: `${RELEASE_SOURCE} monitoringChart`,
      loggingChart: `${RELEASE_SOURCE} loggingChart`,
    });
  });
});

describe('bootstrap resources', () => {
  it('every file is rancherd config (resources:) and every resource is a valid Kubernetes object or CR', async () => {
    for (const name of ['rancherd-create', 'rancherd-create-arm64']) {
      const r = render(name);
      for (const f of r.yipFiles) {
        expect(f.mode, f.path).toBe(0o600);
        const doc = parseYamlStrict(text(f)) as { resources?: Array<Record<string, unknown>> };
        assertSchema(ourRancherdConfigSchema, doc, f.path);
        for (const res of doc.resources ?? []) await assertKubernetesObject(res);
      }
    }
  });

  it("10-harvester.yaml carries the chart values (VIP, storage, Longhorn, promote CIDRs) and the harvester chart's own kube-vip", () => {
    const doc = parseYamlStrict(text(yipFile(render('rancherd-create'), '/etc/rancher/rancherd/config.yaml.d/10-harvester.yaml')!)) as { resources: Array<{ kind: string; metadata: { name: string }; spec: Record<string, unknown> }> };
    const charts = doc.resources.filter((x) => x.kind === 'ManagedChart');
    expect(charts.map((x) => [x.metadata.name, x.spec.version])).toEqual([
      ['harvester', '1.8.1'],
      ['harvester-crd', '1.8.1'],
    ]);
    const values = charts[0]!.spec.values as Record<string, any>;
    expect(values.service.vip).toEqual({ enabled: true, mode: 'static', ip: '192.168.122.100', hwAddress: '' });
    expect(values.storageClass).toEqual({ replicaCount: 2 });
    expect(values.longhorn.defaultSettings).toMatchObject({ guaranteedInstanceManagerCPU: 10, storageReservedPercentageForDefaultDisk: '0' });
    expect(values['kube-vip']).toEqual({ enabled: true });
    expect(values.promote).toEqual({ clusterPodCIDR: '10.52.0.0/16', clusterServiceCIDR: '10.53.0.0/16', clusterDNS: '10.53.0.10' });
    expect(doc.resources.map((x) => `${x.kind}/${x.metadata.name}`)).toEqual([
      'Namespace/cattle-monitoring-system',
      'Namespace/cattle-logging-system',
      'ServiceAccount/rancher-monitoring-operator',
      'HelmChartConfig/rke2-ingress-nginx',
      'Secret/tls-ingress',
      'Ingress/rancher-expose',
      'ManagedChart/harvester',
      'ManagedChart/harvester-crd',
    ]);
  });

  it('the monitoring, logging and kube-ovn CRD charts use the media and config versions', () => {
    const r = render('rancherd-create');
    const version = (p: string) => (parseYamlStrict(text(yipFile(r, p)!)) as { resources: Array<{ spec: { chart: string; version: string } }> }).resources.map((x) => [x.spec.chart, x.spec.version]);
    expect(version('/etc/rancher/rancherd/config.yaml.d/11-monitoring-crd.yaml')).toEqual([['rancher-monitoring-crd', '108.0.0+up77.9.1-rancher.11']]);
    expect(version('/etc/rancher/rancherd/config.yaml.d/14-logging-crd.yaml')).toEqual([['rancher-logging-crd', '108.0.0+up4.10.0-rancher.14']]);
    expect(version('/etc/rancher/rancherd/config.yaml.d/15-kubeovn-operator-crd.yaml')).toEqual([['kubeovn-operator-crd', '1.16.2']]);
    // Without kubeovn_chart_version: the kubeovn-operator addon's version, as Harvester's build gives both.
    const arm = render('rancherd-create-arm64');
    expect(version2(arm, '/etc/rancher/rancherd/config.yaml.d/15-kubeovn-operator-crd.yaml')).toEqual([['kubeovn-operator-crd', '1.16.2-dev.0']]);
  });

  it('settings: every name in the allow-list, values quoted strings, ntp-servers built from os.ntp_servers', () => {
    const f = yipFile(render('rancherd-create'), '/etc/rancher/rancherd/config.yaml.d/20-harvester-settings.yaml')!;
    expect(f.secret).toBe(true);
    const doc = parseYamlStrict(text(f)) as { resources: Array<{ apiVersion: string; kind: string; metadata: { name: string }; value: unknown }> };
    for (const s of doc.resources) {
      expect(ALLOW_LIST).toContain(s.metadata.name);
      expect(typeof s.value).toBe('string');
      expect(text(f)).toContain(`name: ${JSON.stringify(s.metadata.name)}`);
    }
    const byName = Object.fromEntries(doc.resources.map((s) => [s.metadata.name, s.value as string]));
    expect(Object.keys(byName)).toEqual(['containerd-registry', 'log-level', 'ntp-servers', 'ui-index']);
    expect(JSON.parse(byName['ntp-servers']!)).toEqual({ ntpServers: ['0.pool.ntp.org', '1.pool.ntp.org'] });
    expect(byName['ui-index']).toBe('https://ui.example.com/{{index}}/index.html');
    expect(JSON.parse(byName['containerd-registry']!)).toEqual(JSON.parse(caseOf('rancherd-create').config.systemSettings!['containerd-registry']!));
    // No settings at all is an empty list, as Harvester writes it.
    expect(parseYamlStrict(text(yipFile(render('rancherd-create-arm64'), '/etc/rancher/rancherd/config.yaml.d/20-harvester-settings.yaml')!))).toEqual({ resources: [] });
  });

  it('22-addons.yaml: every addon of the release template, enabled as the config says, with the template versions and tuned values', () => {
    const r = render('rancherd-create');
    const f = yipFile(r, '/etc/rancher/rancherd/config.yaml.d/22-addons.yaml')!;
    expect({ mode: f.mode, secret: f.secret }).toEqual({ mode: 0o600, secret: false });
    type Addon = { kind: string; metadata: { name: string; namespace: string }; spec: { chart: string; version: string; enabled: boolean; valuesContent: string } };
    const doc = parseYamlStrict(text(f)) as { resources: Addon[] };
    // The config enables rancher_monitoring only; every other addon is there, disabled, so it can be enabled later.
    expect(doc.resources.map((a) => [a.metadata.name, a.spec.chart, a.spec.version, a.spec.enabled])).toEqual([
      ['vm-import-controller', 'harvester-vm-import-controller', '1.9.0-dev.0', false],
      ['pcidevices-controller', 'harvester-pcidevices-controller', '1.9.0-dev.0', false],
      ['rancher-logging', 'rancher-logging', '109.0.0+up4.10.0-rancher.23', false],
      ['rancher-monitoring', 'rancher-monitoring', '109.0.3+up80.9.1-rancher.14', true],
      ['harvester-seeder', 'harvester-seeder', '1.9.0-dev.0', false],
      ['nvidia-driver-toolkit', 'nvidia-driver-runtime', '1.9.0-dev.0', false],
      ['kubeovn-operator', 'kubeovn-operator', '1.16.2-dev.0', false],
      ['descheduler', 'descheduler', '0.36.0', false],
    ]);
    expect(doc.resources.every((a) => a.kind === 'Addon')).toBe(true);
    expect(doc.resources.find((a) => a.metadata.name === 'descheduler')!.metadata).toEqual({
      name: 'descheduler',
      namespace: 'kube-system',
      labels: { 'addon.harvesterhci.io/displayName': 'virtual-machine-auto-balance', 'addon.harvesterhci.io/experimental': 'true' },
    });
    // The monitoring values reach the VIP through the template's {{ if .Vip }}.
    const monitoring = parseYamlStrict(doc.resources[3]!.spec.valuesContent) as { prometheus: { prometheusSpec: { externalUrl: string } } };
    expect(monitoring.prometheus.prometheusSpec.externalUrl).toBe('https://192.168.122.100/api/v1/namespaces/cattle-monitoring-system/services/http:rancher-monitoring-prometheus:9090/proxy/');
    expect(text(f)).not.toMatch(/\{\{|<no value>/);
    // The template's versions differ from this test release's CRD charts, and the render says so.
    expect(r.warnings).toContain('the rancher-monitoring addon of /src/usr/bin/harvester-installer is chart 109.0.3+up80.9.1-rancher.14, its CRD chart 108.0.0+up77.9.1-rancher.11 (from /src/etc/harvester-release.yaml monitoringChart): one release\'s media agree on both');
  });

  it('12-monitoring-dashboard.yaml: the release template as it is, escaped for yip so the node gets it byte for byte', () => {
    const r = render('rancherd-create');
    const f = yipFile(r, '/etc/rancher/rancherd/config.yaml.d/12-monitoring-dashboard.yaml')!;
    expect(text(f)).toBe(TEMPLATES.dashboards);
    expect(text(f)).toContain('{{'); // Grafana's own mustaches
    const yip = parseYamlStrict(text(r.files.find((x) => x.path === '/oem/90_custom.yaml')!)) as { stages: { initramfs: Array<{ files?: Array<{ path: string; content: string }> }> } };
    const written = yip.stages.initramfs.flatMap((s) => s.files ?? []).find((x) => x.path === f.path)!;
    expect(goTemplateOutput(written.content)).toBe(TEMPLATES.dashboards);
  });

  it('a release image with rancherd but no harvester-installer templates stops the render with what is missing', () => {
    const c = caseOf('rancherd-create');
    const image = { ...c.facts.image!, templates: undefined };
    let err: unknown;
    try {
      renderNode(structuredClone(c.config), { ...c.facts, image }, { seed: 'x' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(HvError);
    expect((err as HvError).message).toBe("the OS image carries rancherd, but not Harvester's installer with its addon and dashboard templates (the OS image's /usr/bin/harvester-installer)");
    expect((err as HvError).hint).toContain('templates/rancherd-22-addons.yaml');
    // A join node has no bootstrap resources: it needs none.
    expect(() => renderNode(structuredClone(caseOf('rancherd-join').config), { ...caseOf('rancherd-join').facts, image }, { seed: 'x' })).not.toThrow();
  });

  it('multus 23-multus-config.yaml is rendered on arm64 only', () => {
    const arm = render('rancherd-create-arm64');
    const doc = parseYamlStrict(text(yipFile(arm, '/etc/rancher/rancherd/config.yaml.d/23-multus-config.yaml')!)) as { resources: Array<{ spec: { valuesContent: string } }> };
    expect(parseYamlStrict(doc.resources[0]!.spec.valuesContent)).toEqual({ labels: { nodeSelector: { 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'arm64' } } });
    expect(render('rancherd-create').yipFiles.some((f) => f.path.endsWith('23-multus-config.yaml'))).toBe(false);
  });
});

describe('delivery through the initramfs stage of 90_custom.yaml', () => {
  it('yip writes each file, 0600, with the content it will have on the node once Go-template rendering is done', () => {
    for (const name of ['rancherd-create', 'rancherd-join', 'rancherd-create-arm64']) {
      const r = render(name);
      const yip = parseYamlStrict(text(r.files.find((f) => f.path === '/oem/90_custom.yaml')!)) as { stages: { initramfs: Array<{ files: Array<{ path: string; permissions: number; content: string }> }> } };
      const written = yip.stages.initramfs[0]!.files;
      for (const f of r.yipFiles) {
        const w = written.find((x) => x.path === f.path);
        expect(w, f.path).toBeDefined();
        expect(w!.permissions, f.path).toBe(0o600);
        expect(goTemplateOutput(w!.content), f.path).toBe(text(f));
      }
    }
  });

  it('the settings value with braces is escaped inside 90_custom.yaml and comes out whole', () => {
    const r = render('rancherd-create');
    const custom = text(r.files.find((f) => f.path === '/oem/90_custom.yaml')!);
    expect(custom).toContain('https://ui.example.com/{{"{{"}}index}}/index.html');
    expect(custom).not.toMatch(/\/\{\{index\}\}/);
  });
});

describe('who bootstraps', () => {
  it('with rancherd: no static kube-vip, no stand-in token, server, cluster-init or disabled charts, no rancherd labels on kubelet', () => {
    const create = render('rancherd-create');
    const paths = create.files.map((f) => f.path);
    expect(paths).not.toContain('/var/lib/rancher/rke2/agent/pod-manifests/kube-vip.yaml');
    expect(paths).not.toContain('/etc/rancher/rke2/config.yaml.d/10-hvinstall-token.yaml');
    expect(paths).not.toContain('/oem/hvinstall/harvester-values.yaml');
    const server = parseYamlStrict(text(create.files.find((f) => f.path.endsWith('90-harvester-server.yaml'))!)) as Record<string, unknown>;
    expect(server).not.toHaveProperty('cluster-init');
    expect(server).not.toHaveProperty('disable');
    expect(server).toMatchObject({ cni: 'multus,canal', 'tls-san': ['192.168.122.100', 'harvester.example.com'] });
    const join = render('rancherd-join');
    expect(join.files.map((f) => f.path)).not.toContain('/etc/rancher/rke2/config.yaml.d/90-harvester-vip.yaml');
    const agent = parseYamlStrict(text(join.files.find((f) => f.path.endsWith('90-harvester-agent.yaml'))!)) as { 'kubelet-arg': string[] };
    expect(agent['kubelet-arg']).toEqual(['max-pods=200', 'node-labels=node-role.harvesterhci.io/management=true,topology.kubernetes.io/zone=zone-b']);
    // The token reaches RKE2 only through rancherd: in no file the install writes but 90_custom.yaml and the saved configs (in whatever quoting).
    expect(join.files.filter((f) => text(f).includes('K10-sp3cial')).map((f) => f.path)).toEqual(['/oem/90_custom.yaml', '/oem/harvester.config', '/oem/hvinstall/config.json']);
  });

  it('without rancherd: the static kube-vip, the token drop-in and no rancherd files, as before', () => {
    const r = render('create-dhcp');
    expect(r.yipFiles).toEqual([]);
    expect(r.bootstrap.bootstrapper).toBe('hvagent');
    const paths = r.files.map((f) => f.path);
    expect(paths).toContain('/var/lib/rancher/rke2/agent/pod-manifests/kube-vip.yaml');
    expect(paths).toContain('/etc/rancher/rke2/config.yaml.d/10-hvinstall-token.yaml');
    expect(paths).not.toContain('/oem/hvinstall/harvester-values.yaml');
  });
});

describe('versions from the media', () => {
  const base = (): HarvesterConfig => structuredClone(caseOf('rancherd-create').config);
  const errorOf = (config: HarvesterConfig, image = RANCHERD_IMAGE): HvError => {
    try {
      renderNode(config, { ...caseOf('rancherd-create').facts, image }, { seed: 'x' });
    } catch (e) {
      expect(e).toBeInstanceOf(HvError);
      return e as HvError;
    }
    throw new Error('no error');
  };

  it('an image with rancherd but no release metadata and no config versions is refused, naming what to add', () => {
    const e = errorOf(base(), { bootstrapper: 'rancherd', why: 'test' });
    expect(e.message).toBe(
      'the OS image carries rancherd, but no version is known for kubernetes (config: runtime_version), rancher (config: rancher_version), harvesterChart (config: harvester_chart_version), monitoringChart (config: monitoring_chart_version), loggingChart (config: logging_chart_version)',
    );
    expect(e.hint).toMatch(/looked for \/etc\/harvester-release\.yaml in the OS image and \/harvester-release\.yaml on the ISO/);
  });

  it('a release missing one version names that one and the file', () => {
    const image = structuredClone(RANCHERD_IMAGE);
    delete image.release!.metadata.loggingChart;
    const e = errorOf(base(), image);
    expect(e.message).toMatch(/no version is known for loggingChart \(config: logging_chart_version\)$/);
    expect(e.hint).toBe(`add the keys to ${RELEASE_SOURCE} or set them in the config`);
    // The config may fill the gap.
    const c = base();
    c.loggingChartVersion = '1.2.3';
    expect(renderNode(c, { ...caseOf('rancherd-create').facts, image }, { seed: 'x' }).bootstrap.versions!.loggingChart).toBe('1.2.3');
  });

  it('a kubernetes version without rke2 is refused: rancherd would install k3s', () => {
    const c = base();
    c.runtimeVersion = 'v1.35.6+k3s1';
    expect(errorOf(c).message).toBe('kubernetes version v1.35.6+k3s1 is not an RKE2 version: rancherd would install k3s instead');
  });
});
