/**
 * The node contract: what the installer writes onto the disk and hvagent reads back at every boot.
 * The paths of the node's files, the node identity, the cOS persistent layout, the renderers that
 * both the installer and hvagent run (registries.yaml, kube-vip's manifest), and the layout and
 * manifest of the self-contained agent payload. installer/ and agent/ import it; it imports only
 * config/ and lib/.
 */
export { CANONICAL_CONFIG_PATH, HARVESTER_CONFIG_PATH, SEEDS_PATH, REGISTRIES_PATH } from './paths.js';
export { NODE_IDENTITY_PATH, type NodeIdentity, type NodeIdentityNic } from './identity.js';
export { BRIDGE_INTERFACE, managementInterfaceName, managementVlan } from './management-interface.js';
export { renderKubeVipManifest, KUBE_VIP_MANIFEST_PATH } from './kube-vip.js';
export { renderRegistriesYaml, renderRegistriesFile, registriesHoldCredentials, registryCredentials, type RegistriesDocument } from './registries.js';
export { placeNodePath, persistentStatePaths, persistentLocation, bindStateDir, bindDirName, defaultHasDataPartition, LONGHORN_DEFAULT_DISK, LONGHORN_LABEL } from './layout.js';
