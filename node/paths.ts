/**
 * Node paths the installer writes and hvagent reads. Each is the path as the booted node sees it;
 * the install places it on COS_OEM or COS_PERSISTENT (node/layout.ts).
 */

/** The config as Harvester stores it (harvester/harvester-installer pkg/config/constants.go). */
export const HARVESTER_CONFIG_PATH = '/oem/harvester.config';
/** The validated config as JSON, what hvagent reads first. */
export const CANONICAL_CONFIG_PATH = '/oem/hvinstall/config.json';
/** The seeds the render used, so a re-render gives the same files. */
export const SEEDS_PATH = '/oem/hvinstall/render-seeds.json';
/** RKE2's registries file, rendered from the containerd-registry setting. */
export const REGISTRIES_PATH = '/etc/rancher/rke2/registries.yaml';
/** RKE2's drop-in directory. */
export const RKE2_CONFIG_DIR = '/etc/rancher/rke2/config.yaml.d';
/** The server drop-in: rendered for a create node, written by a promotion (Harvester's promote.sh). */
export const SERVER_DROPIN_PATH = `${RKE2_CONFIG_DIR}/90-harvester-server.yaml`;
export const AUDIT_POLICY_PATH = `${RKE2_CONFIG_DIR}/92-harvester-kube-audit-policy.yaml`;
/** hvpxe's node-events URL and this node's report token (root-only: config/hvpxe-protocol.ts NodeReportGrant). */
export const NODE_REPORT_PATH = '/oem/hvinstall/hvpxe-report.json';
