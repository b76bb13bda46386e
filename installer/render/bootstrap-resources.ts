/**
 * rancherd's bootstrap resources (/etc/rancher/rancherd/config.yaml.d/), which rancherd applies once
 * Rancher is up (rancher/rancherd pkg/plan/bootstrap.go), as Harvester's installer renders them for a
 * create node (harvester/harvester-installer pkg/config/cos.go genBootstrapResources,
 * pkg/config/templates/rancherd-*.yaml; 22-addons from harvester/addons pkg/templates):
 *   10-harvester.yaml   namespaces, the monitoring operator's ServiceAccount, the ingress
 *                       HelmChartConfig, Ingress rancher-expose, ManagedCharts harvester (carrying
 *                       the chart values) and harvester-crd
 *   11, 14, 15          ManagedCharts rancher-monitoring-crd, rancher-logging-crd, kubeovn-operator-crd
 *   12-monitoring-dashboard.yaml  Harvester's Grafana VM dashboards, as the release's installer carries them
 *   20-harvester-settings.yaml  system_settings as Harvester Setting CRs (plus ntp-servers)
 *   22-addons.yaml      every Harvester Addon CR, rendered from the release's template
 *   23-multus-config.yaml       arm64 only: multus's node selector
 */
import { Document, Scalar, isScalar, visit } from 'yaml';
import type { HarvesterConfig } from '../../config/types.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import { LONGHORN_DEFAULT_DISK } from '../../node/layout.js';
import { DEFAULT_CLUSTER_DNS, DEFAULT_CLUSTER_POD_CIDR, DEFAULT_CLUSTER_SERVICE_CIDR } from '../../config/defaults.js';
import { vipMode } from '../../node/kube-vip.js';
import type { BootstrapVersions } from './release.js';
import { renderAddons, type HarvesterTemplates } from './harvester-templates.js';

const NDM_LABEL_FILTER = ['COS_*', 'HARV_*'];
const NTP_SETTING = 'ntp-servers';
const REPO_NAME = 'harvester-charts';
const CLUSTER_REPO = 'http://harvester-cluster-repo.cattle-system.svc/charts';
const MONITORING_NS = 'cattle-monitoring-system';
const LOGGING_NS = 'cattle-logging-system';
/** fleet-local's one cluster, excluding downstream clusters that run their own system agent. */
const LOCAL_TARGETS = [{ clusterName: 'local', clusterSelector: { matchExpressions: [{ key: 'provisioning.cattle.io/unmanaged-system-agent', operator: 'DoesNotExist' }] } }];
const LONGHORN_CRDS_IGNORED_STATUS = ['engineimages', 'nodes', 'volumes', 'settings', 'replicas', 'instancemanagers', 'engines'];

/** One file of config.yaml.d: its name and the `resources:` it carries, or its text as Harvester's template renders it. */
export interface BootstrapFile {
  name: string;
  resources: Array<Record<string, unknown>>;
  /** The file as it is written (12 and 22, from the release's templates); `resources` is then unused. */
  text?: string;
}

function positiveInt(v: unknown): number | undefined {
  const n = typeof v === 'string' ? Number(v) : v;
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? Math.trunc(n) : undefined;
}

function definedInt(v: unknown): number | undefined {
  const n = typeof v === 'string' ? Number(v) : v;
  return typeof n === 'number' && Number.isFinite(n) && n >= 0 ? Math.trunc(n) : undefined;
}

/**
 * The harvester chart's values, in Harvester's order with its clamps (cos.go setConfigDefaultValues):
 * replicas at most 3 (0 leaves the chart's default), instance-manager CPU at most 12 when given
 * (0 as unset), reserved storage at most 30 (default 0, always passed as a string). The chart's own kube-vip
 * DaemonSet announces the VIP (services mode), so hvinstall's static pod is not rendered beside it.
 */
export function harvesterChartValues(config: HarvesterConfig): Record<string, unknown> {
  const h = config.install?.harvester ?? {};
  const values: Record<string, unknown> = {};
  const vip = config.install?.vip?.trim();
  if (vip) values.service = { vip: { enabled: true, mode: vipMode(config), ip: vip, hwAddress: config.install?.vipHwAddr ?? '' } };
  const replicas = positiveInt(h.storageClass?.replicaCount);
  if (replicas !== undefined) values.storageClass = { replicaCount: Math.min(replicas, 3) };
  if (h.enableGoCoverDir) values.enableGoCoverDir = true;
  values.kubevirt = { spec: { monitorAccount: 'rancher-monitoring-operator', monitorNamespace: MONITORING_NS } };
  values.containers = { apiserver: { image: { imagePullPolicy: 'IfNotPresent' }, hciMode: true } };
  values.multus = { enabled: false };
  const ds = h.longhorn?.defaultSettings ?? {};
  const defaultSettings: Record<string, unknown> = { taintToleration: 'kubevirt.io/drain:NoSchedule', defaultDataPath: LONGHORN_DEFAULT_DISK };
  // 0 counts as unset: harvester.config stores every unset number as 0 (serialise.ts), and the node re-renders from it.
  const cpu = positiveInt(ds.guaranteedInstanceManagerCPU);
  if (cpu !== undefined) defaultSettings.guaranteedInstanceManagerCPU = Math.min(cpu, 12);
  defaultSettings.storageReservedPercentageForDefaultDisk = String(Math.min(definedInt(ds.storageReservedPercentageForDefaultDisk) ?? 0, 30));
  defaultSettings.detachManuallyAttachedVolumesWhenCordoned = true;
  defaultSettings.nodeDrainPolicy = 'allow-if-replica-is-stopped';
  values.longhorn = { enabled: true, defaultSettings };
  values['harvester-network-controller'] = { enabled: true, vipEnabled: true, image: { pullPolicy: 'IfNotPresent' } };
  values['harvester-networkfs-manager'] = { enabled: true, image: { pullPolicy: 'IfNotPresent' } };
  values['harvester-node-disk-manager'] = { enabled: true, image: { pullPolicy: 'IfNotPresent' }, labelFilter: NDM_LABEL_FILTER };
  values.rancherEmbedded = true;
  values.webhook = { image: { imagePullPolicy: 'IfNotPresent' } };
  values['harvester-load-balancer'] = { enabled: true };
  values['kube-vip'] = { enabled: true };
  values['kube-vip-cloud-provider'] = { enabled: true };
  values.promote = {
    clusterPodCIDR: config.install?.clusterPodCidr || DEFAULT_CLUSTER_POD_CIDR,
    clusterServiceCIDR: config.install?.clusterServiceCidr || DEFAULT_CLUSTER_SERVICE_CIDR,
    clusterDNS: config.install?.clusterDns || DEFAULT_CLUSTER_DNS,
  };
  return values;
}

/** A ManagedChart of fleet-local from the cluster's chart repo, keys in Harvester's order (rancher/rancher pkg/apis/management.cattle.io/v3 ManagedChartSpec). */
function managedChart(name: string, version: string, defaultNamespace: string, extra: { diff?: unknown; takeOwnership?: boolean; values?: unknown } = {}): Record<string, unknown> {
  const spec: Record<string, unknown> = { chart: name, releaseName: name, version, defaultNamespace, timeoutSeconds: 600, maxHistory: 10 };
  if (extra.diff) spec.diff = extra.diff;
  spec.repoName = REPO_NAME;
  if (extra.takeOwnership) spec.takeOwnership = true;
  spec.targets = LOCAL_TARGETS;
  if (extra.values !== undefined) spec.values = extra.values;
  return { apiVersion: 'management.cattle.io/v3', kind: 'ManagedChart', metadata: { name, namespace: 'fleet-local' }, spec };
}

function harvesterFile(config: HarvesterConfig, versions: BootstrapVersions): BootstrapFile {
  const monitoringOperatorLabels = {
    app: 'rancher-monitoring-operator',
    'app.kubernetes.io/component': 'prometheus-operator',
    'app.kubernetes.io/instance': 'rancher-monitoring',
    'app.kubernetes.io/managed-by': 'Helm',
    'app.kubernetes.io/name': 'rancher-monitoring-prometheus-operator',
    heritage: 'Helm',
    release: 'rancher-monitoring',
  };
  const ingressValues = [
    'controller:',
    '  config:',
    '    proxy-body-size: "0"',
    '    proxy-request-buffering: "off"',
    '  admissionWebhooks:',
    '    port: 8444',
    '  publishService:',
    '    pathOverride: kube-system/ingress-expose',
    '  extraArgs:',
    '    default-ssl-certificate: cattle-system/tls-rancher-internal',
  ].join('\n');
  const harvester = managedChart('harvester', versions.harvesterChart, 'harvester-system', {
    diff: {
      comparePatches: [
        { apiVersion: 'storage.k8s.io/v1', kind: 'StorageClass', name: 'harvester-longhorn', jsonPointers: ['/metadata/annotations'] },
        ...LONGHORN_CRDS_IGNORED_STATUS.map((crd) => ({
          apiVersion: 'apiextensions.k8s.io/v1',
          kind: 'CustomResourceDefinition',
          name: `${crd}.longhorn.io`,
          jsonPointers: ['/status/acceptedNames', '/status/conditions', '/status/storedVersions'],
        })),
      ],
    },
    values: harvesterChartValues(config),
  });
  // takeOwnership: the CRDs may exist before the chart (fleet's helm deployer adopts them).
  const crd = managedChart('harvester-crd', versions.harvesterChart, 'harvester-system', { takeOwnership: true, values: {} });
  return {
    name: '10-harvester.yaml',
    resources: [
      // kubevirt's monitoring integration looks for the monitoring operator's namespace and account up front.
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: MONITORING_NS } },
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: LOGGING_NS } },
      {
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: { name: 'rancher-monitoring-operator', namespace: MONITORING_NS, annotations: { 'meta.helm.sh/release-name': 'rancher-monitoring', 'meta.helm.sh/release-namespace': MONITORING_NS }, labels: monitoringOperatorLabels },
      },
      { apiVersion: 'helm.cattle.io/v1', kind: 'HelmChartConfig', metadata: { name: 'rke2-ingress-nginx', namespace: 'kube-system' }, spec: { valuesContent: ingressValues } },
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'tls-ingress', namespace: 'cattle-system' }, type: 'Opaque', data: { 'tls.crt': 'Cg==', 'tls.key': 'Cg==' } },
      {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'Ingress',
        metadata: { name: 'rancher-expose', namespace: 'cattle-system' },
        spec: { rules: [{ http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: 'rancher', port: { number: 80 } } } }] } }] },
      },
      harvester,
      crd,
    ],
  };
}

/**
 * system_settings as Harvester Setting CRs, sorted by name (Go ranges maps in key order), each value
 * a quoted string. When os.ntp_servers is set, ntp-servers is `{"ntpServers":[...]}` built from it,
 * replacing any given value (harvester/harvester-installer pkg/console/util.go updateSystemSettings).
 */
function harvesterSettings(config: HarvesterConfig): Array<{ name: string; value: string }> {
  const settings: Record<string, string> = { ...(config.systemSettings ?? {}) };
  const ntp = (config.os?.ntpServers ?? []).filter(Boolean);
  if (ntp.length) settings[NTP_SETTING] = JSON.stringify({ ntpServers: ntp });
  return Object.keys(settings)
    .sort()
    .map((name) => ({ name, value: settings[name]! }));
}

/**
 * Every bootstrap file of a create node, in Harvester's file order. 12 (the Grafana dashboards) and
 * 22 (every addon, enabled or not) come from the release's own templates (harvester-templates.ts);
 * kubeovn-operator-crd's version is the config's kubeovn_chart_version, else the kubeovn-operator
 * addon's (both are KUBEOVN_OPERATOR_CHART_VERSION in Harvester's build).
 */
export function bootstrapFiles(config: HarvesterConfig, versions: BootstrapVersions, arch: 'amd64' | 'arm64', templates: HarvesterTemplates, warnings: string[]): BootstrapFile[] {
  const addons = renderAddons(config, templates);
  const files: BootstrapFile[] = [
    harvesterFile(config, versions),
    { name: '11-monitoring-crd.yaml', resources: [managedChart('rancher-monitoring-crd', versions.monitoringChart, MONITORING_NS)] },
    { name: '12-monitoring-dashboard.yaml', resources: [], text: templates.dashboards },
    { name: '14-logging-crd.yaml', resources: [managedChart('rancher-logging-crd', versions.loggingChart, LOGGING_NS)] },
  ];
  for (const [addon, chart] of [['rancher-monitoring', versions.monitoringChart], ['rancher-logging', versions.loggingChart]] as const) {
    const own = addons.versions.get(addon);
    if (own !== undefined && own !== chart) warnings.push(`the ${addon} addon of ${templates.source} is chart ${own}, its CRD chart ${chart} (from ${versions.from[addon === 'rancher-monitoring' ? 'monitoringChart' : 'loggingChart']}): one release's media agree on both`);
  }
  const kubeovn = versions.kubeovnChart ?? addons.versions.get('kubeovn-operator');
  if (kubeovn) files.push({ name: '15-kubeovn-operator-crd.yaml', resources: [managedChart('kubeovn-operator-crd', kubeovn, 'kube-system')] });
  else warnings.push(`15-kubeovn-operator-crd.yaml is not rendered: no kubeovn_chart_version in the config, and ${templates.source} has no kubeovn-operator addon (a release before it)`);
  files.push({
    name: '20-harvester-settings.yaml',
    resources: harvesterSettings(config).map((s) => ({ apiVersion: 'harvesterhci.io/v1beta1', kind: 'Setting', metadata: { name: s.name }, value: s.value })),
  });
  files.push({ name: '22-addons.yaml', resources: [], text: addons.text });
  if (arch === 'arm64') {
    files.push({
      name: '23-multus-config.yaml',
      resources: [{ apiVersion: 'helm.cattle.io/v1', kind: 'HelmChartConfig', metadata: { name: 'rke2-multus', namespace: 'kube-system' }, spec: { valuesContent: 'labels:\n  nodeSelector:\n    kubernetes.io/os: linux\n    kubernetes.io/arch: arm64' } }],
    });
  }
  return files;
}

/**
 * The YAML of one file: `resources:` as rancherd reads it. Setting names and values are
 * double-quoted (Harvester's template prints them with %q); valuesContent is a literal block.
 */
export function renderBootstrapFile(file: BootstrapFile): string {
  if (file.text !== undefined) return file.text;
  // No anchors and aliases for shared values (the targets): every resource spelled out, as Harvester writes them.
  const doc = new Document({ resources: file.resources }, { aliasDuplicateObjects: false });
  file.resources.forEach((r, i) => {
    if (r.kind === 'Setting') {
      for (const at of [['metadata', 'name'], ['value']]) {
        const node = doc.getIn(['resources', i, ...at], true);
        if (isScalar(node)) node.type = Scalar.QUOTE_DOUBLE;
      }
    }
  });
  visit(doc, {
    Pair(_, pair) {
      if (isScalar(pair.key) && pair.key.value === 'valuesContent' && isScalar(pair.value) && String(pair.value.value).includes('\n')) pair.value.type = Scalar.BLOCK_LITERAL;
    },
  });
  return doc.toString({ lineWidth: 0 });
}
