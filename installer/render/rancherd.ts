/**
 * rancherd's own config, /etc/rancher/rancherd/config.yaml, as Harvester's installer renders it
 * (harvester/harvester pkg/installer/config/templates/rancherd-config.yaml, the harvester-installer
 * template plus HEAD's install-cordoned label). Keys are rancherd's (rancher/rancherd
 * pkg/config/types.go Config, pkg/config/runtime.go RuntimeConfig): role, server, nodeName, token,
 * kubernetesVersion, rancherVersion, rancherInstallerImage, labels, extraConfig.
 */
import { Document, Scalar } from 'yaml';
import type { HarvesterConfig } from '../../config/types.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import type { BootstrapVersions } from './release.js';
import { DISABLED_CHARTS } from './rke2.js';

export const RANCHERD_CONFIG_PATH = '/etc/rancher/rancherd/config.yaml';
export const RANCHERD_CONFIG_DIR = '/etc/rancher/rancherd/config.yaml.d';
const RANCHER_INSTALLER_IMAGE = 'rancher/system-agent-installer-rancher';
const MANAGED_LABEL = 'harvesterhci.io/managed=true';
const INSTALL_CORDONED_LABEL = 'harvesterhci.io/install-cordoned=true';

/** The labels rancherd gives RKE2 (node-label): managed always, install-cordoned when asked (harvester/harvester HEAD). */
function rancherdLabels(config: HarvesterConfig): string[] {
  return [MANAGED_LABEL, ...(config.install?.cordoned ? [INSTALL_CORDONED_LABEL] : [])];
}

/**
 * The config document. Create nodes get `role: cluster-init`; joining nodes `role: agent` and the
 * cluster's server_url (promotion to control plane happens later, in the cluster). The token is
 * double-quoted, as Harvester's template quotes it (`printf "%q"`), so YAML-special characters
 * (`#`, `: `, quotes, backslashes) survive.
 */
export function renderRancherdConfig(config: HarvesterConfig, nodeName: string, versions: BootstrapVersions): string {
  const mode = String(config.install?.mode ?? '').toLowerCase();
  if (!config.token) throw new HvError('a token is required to render the rancherd config', { where: 'token', exitCode: ExitCode.checkFailed });
  const doc: Record<string, unknown> = {};
  if (mode === 'join') {
    if (!config.serverUrl) throw new HvError('server_url is required in join mode', { where: 'server_url', exitCode: ExitCode.checkFailed });
    doc.server = config.serverUrl;
    doc.role = 'agent';
  } else doc.role = 'cluster-init';
  doc.nodeName = nodeName;
  doc.token = config.token;
  doc.kubernetesVersion = versions.kubernetes;
  doc.rancherVersion = versions.rancher;
  doc.rancherInstallerImage = `${RANCHER_INSTALLER_IMAGE}:${versions.rancher}`;
  doc.labels = rancherdLabels(config);
  // RKE2 enables these charts by default since v1.25.7; Harvester ships its own (rancherd passes extraConfig to RKE2).
  doc.extraConfig = { disable: DISABLED_CHARTS };
  const yaml = new Document(doc, { aliasDuplicateObjects: false });
  (yaml.get('token', true) as Scalar).type = Scalar.QUOTE_DOUBLE;
  return yaml.toString({ lineWidth: 0 });
}
