/**
 * RKE2 configuration drop-ins (/etc/rancher/rke2/config.yaml.d/), as Harvester writes them
 * (harvester/harvester-installer pkg/config/cos.go initRancherdStage, pkg/config/templates). On an
 * image without rancherd, hvagent starts RKE2 itself, so these also carry what rancherd would
 * otherwise supply (rancher/rancherd pkg/runtime, its 40-rancherd.yaml): the token, cluster-init,
 * the join server, the disabled charts and the managed and install-cordoned labels. With rancherd
 * those stand-ins are left out, and only what Harvester's installer writes remains.
 * Create nodes are servers with cluster-init; join nodes start as agents.
 */
import { stringify } from 'yaml';
import type { HarvesterConfig } from '../../config/types.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import { DEFAULT_CLUSTER_DNS, DEFAULT_CLUSTER_POD_CIDR, DEFAULT_CLUSTER_SERVICE_CIDR } from '../../config/defaults.js';
import { AUDIT_POLICY_PATH, RKE2_CONFIG_DIR, SERVER_DROPIN_PATH } from '../../node/paths.js';

export const MAX_PODS = 200;
export const WITNESS_TAINT = 'node-role.kubernetes.io/etcd=true:NoExecute';
export const SUPERVISOR_PORT = 9345;
/** Harvester writes every RKE2 drop-in 0600 (they sit next to the token and may carry cluster details). */
export const DROPIN_MODE = 0o600;
export const DISABLED_CHARTS = ['rke2-snapshot-controller', 'rke2-snapshot-controller-crd', 'rke2-snapshot-validation-webhook'];

export interface Rke2DropIn {
  path: string;
  content: string;
  mode: number;
  secret: boolean;
}

function yamlDoc(value: unknown): string {
  return stringify(value, { lineWidth: 0 });
}

/**
 * Harvester's reserved CPU in milli-CPU (calculateCPUReservedInMilliCPU, after GKE): 6% of the first
 * core, 1% of the second, 0.5% of the next two, 0.25% of each core above four, plus 400m because
 * max-pods (200) exceeds 110. Summed in floating point in Harvester's order and truncated, as Go's
 * int64() does, so the result matches Harvester's to the milli-CPU.
 */
export function reservedMilliCpu(cores: number, maxPods = MAX_PODS): number {
  if (cores <= 0 || maxPods <= 0) return 0;
  let reserved = 0;
  reserved += 6 / 100;
  if (cores > 1) reserved += 1 / 100;
  if (cores > 2) reserved += (2 * 0.5) / 100;
  if (cores > 4) reserved += ((cores - 4) * 0.25) / 100;
  if (maxPods > 110) reserved += 0.4;
  return Math.trunc(reserved * 1000);
}

/** kubelet args for the reserved resources, split system:kube = 2:3 of 2R with Go's integer division. */
export function reservedResourcesArgs(cores: number): string[] {
  const r = reservedMilliCpu(cores);
  return [`system-reserved=cpu=${Math.trunc((r * 2 * 2) / 5)}m`, `kube-reserved=cpu=${Math.trunc((r * 2 * 3) / 5)}m`];
}

/** `https://<host>:9345` from server_url (`https://<vip>:443`), the RKE2 supervisor a join node registers with. */
export function supervisorUrl(serverUrl: string): string {
  let u: URL;
  try {
    u = new URL(serverUrl);
  } catch {
    throw new HvError(`server_url ${serverUrl} is not a URL`, { where: 'server_url', hint: 'e.g. https://192.168.1.100:443', exitCode: ExitCode.checkFailed });
  }
  if (!u.hostname) throw new HvError(`server_url ${serverUrl} has no host`, { where: 'server_url', exitCode: ExitCode.checkFailed });
  return `https://${u.hostname}:${SUPERVISOR_PORT}`;
}

/**
 * The node labels kubelet registers with: the role label and the user's labels (Harvester's
 * roleSetup adds the role to os.labels), sorted; without rancherd also the labels rancherd would
 * pass (managed, install-cordoned).
 */
export function nodeLabels(config: HarvesterConfig, opts: { rancherd?: boolean } = {}): string[] {
  const labels: Record<string, string> = opts.rancherd ? {} : { 'harvesterhci.io/managed': 'true' };
  const role = String(config.install?.role ?? 'default').toLowerCase();
  if (role && role !== 'default') labels[`node-role.harvesterhci.io/${role}`] = 'true';
  if (config.install?.cordoned && !opts.rancherd) labels['harvesterhci.io/install-cordoned'] = 'true';
  for (const [k, v] of Object.entries(config.os?.labels ?? {})) labels[k] = v;
  return Object.keys(labels).sort().map((k) => `${k}=${labels[k]}`);
}

function isCreate(config: HarvesterConfig): boolean {
  return String(config.install?.mode ?? '').toLowerCase() === 'create';
}

/** The audit policy Harvester ships: create/delete/patch at Metadata level, response stages omitted. */
export function auditPolicy(): string {
  return yamlDoc({
    apiVersion: 'audit.k8s.io/v1',
    kind: 'Policy',
    omitStages: ['ResponseStarted', 'ResponseComplete'],
    rules: [{ level: 'Metadata', verbs: ['create', 'delete', 'patch'], omitStages: ['ResponseStarted', 'ResponseComplete'] }],
  });
}

/** hvinstall's drop-in pinning who the node is (no Harvester file carries these). */
export const NODE_DROPIN_PATH = `${RKE2_CONFIG_DIR}/90-hvinstall-node.yaml`;

/**
 * The node's name and, for a static management address, its IP, pinned: kubelet then refuses to
 * come up under another name or address rather than register a second node (harvester/harvester
 * #7312: short name vs FQDN) or move etcd's member to an address the others do not know (#6941,
 * #4290). A DHCP address is not pinned: the live installer's DHCP client may get another lease than
 * the node's NetworkManager (another client id), so the node's first boot fixes it and hvagent's
 * node-identity guard watches it from then on.
 */
export function nodeDropIn(config: HarvesterConfig, nodeName: string): Rke2DropIn {
  const mi = config.install?.managementInterface;
  const pinned: Record<string, unknown> = { 'node-name': nodeName };
  if (String(mi?.method ?? '').toLowerCase() === 'static' && mi?.ip) pinned['node-ip'] = mi.ip;
  return { path: NODE_DROPIN_PATH, content: yamlDoc(pinned), mode: DROPIN_MODE, secret: false };
}

/**
 * `rancherd`: the image's rancherd supplies the token, server, cluster-init, disabled charts and its labels.
 * `nodeName`: the hostname the install decided, pinned as node-name.
 */
export function renderRke2DropIns(config: HarvesterConfig, cpuCount: number, opts: { rancherd?: boolean; nodeName?: string } = {}): Rke2DropIn[] {
  const mode = String(config.install?.mode ?? '').toLowerCase();
  if (mode !== 'create' && mode !== 'join') {
    throw new HvError(`RKE2 configuration is rendered for create and join nodes, not mode "${mode}"`, { where: 'install.mode', exitCode: ExitCode.checkFailed });
  }
  if (!config.token) throw new HvError('a token is required to render the RKE2 configuration', { where: 'token', exitCode: ExitCode.checkFailed });
  if (!Number.isInteger(cpuCount) || cpuCount < 1) throw new HvError(`CPU count ${cpuCount} is not a positive integer`, { where: 'facts.cpuCount', exitCode: ExitCode.usage });
  const role = String(config.install?.role ?? 'default').toLowerCase();
  const witness = role === 'witness';
  const files: Rke2DropIn[] = [];

  const standIns = !opts.rancherd;
  if (standIns) files.push({ path: `${RKE2_CONFIG_DIR}/10-hvinstall-token.yaml`, content: yamlDoc({ token: config.token }), mode: 0o600, secret: true });

  if (isCreate(config)) {
    const vip = config.install?.vip?.trim();
    const tlsSan = [...(vip ? [vip] : []), ...(config.sans ?? []).filter((s) => s && s !== vip)];
    const server: Record<string, unknown> = {
      ...(standIns ? { 'cluster-init': true } : {}),
      cni: 'multus,canal',
      'cluster-cidr': config.install?.clusterPodCidr || DEFAULT_CLUSTER_POD_CIDR,
      'service-cidr': config.install?.clusterServiceCidr || DEFAULT_CLUSTER_SERVICE_CIDR,
      'cluster-dns': config.install?.clusterDns || DEFAULT_CLUSTER_DNS,
    };
    if (tlsSan.length) server['tls-san'] = tlsSan;
    server['audit-policy-file'] = AUDIT_POLICY_PATH;
    // What rancherd's extraConfig passes to RKE2 on Harvester (harvester/harvester-installer pkg/config/templates/rancherd-config.yaml); promote.sh disables the same charts.
    if (standIns) server.disable = DISABLED_CHARTS;
    files.push({ path: SERVER_DROPIN_PATH, content: yamlDoc(server), mode: DROPIN_MODE, secret: false });
  } else if (standIns) {
    // With rancherd, the join server reaches RKE2 through rancherd (and Harvester's image rewrites 90-harvester-vip.yaml at every start).
    if (!config.serverUrl) throw new HvError('server_url is required in join mode', { where: 'server_url', exitCode: ExitCode.checkFailed });
    files.push({ path: `${RKE2_CONFIG_DIR}/90-harvester-vip.yaml`, content: yamlDoc({ server: supervisorUrl(config.serverUrl) }), mode: DROPIN_MODE, secret: false });
  }

  const labels = nodeLabels(config, opts);
  const kubeletArgs = [`max-pods=${MAX_PODS}`, ...(labels.length ? [`node-labels=${labels.join(',')}`] : [])];
  if (witness) kubeletArgs.push(`register-with-taints=${WITNESS_TAINT}`);
  files.push({ path: `${RKE2_CONFIG_DIR}/90-harvester-agent.yaml`, content: yamlDoc({ 'kubelet-arg': kubeletArgs }), mode: DROPIN_MODE, secret: false });
  if (opts.nodeName) files.push(nodeDropIn(config, opts.nodeName));
  files.push({ path: `${RKE2_CONFIG_DIR}/91-harvester-cdi.yaml`, content: yamlDoc({ 'nonroot-devices': true }), mode: DROPIN_MODE, secret: false });
  files.push({ path: AUDIT_POLICY_PATH, content: auditPolicy(), mode: DROPIN_MODE, secret: false });
  if (witness) files.push({ path: `${RKE2_CONFIG_DIR}/99-harvester-witness.yaml`, content: yamlDoc({ 'node-taint': [WITNESS_TAINT] }), mode: DROPIN_MODE, secret: false });
  files.push({ path: `${RKE2_CONFIG_DIR}/99-z00-harvester-reserved-resources.yaml`, content: yamlDoc({ 'kubelet-arg+': reservedResourcesArgs(cpuCount) }), mode: DROPIN_MODE, secret: false });
  return files;
}
