/**
 * The defaults Harvester applies to every install, made explicit in the normalised config so that
 * renderers read one value instead of re-deriving it (documented in docs/config.md):
 * - os.modules starts with kvm, vhost_net (user modules follow, duplicates dropped);
 * - install.management_interface.bond_options defaults to {mode: active-backup, miimon: "100"} when
 *   interfaces are given and no bond option is;
 * - install.cluster_pod_cidr / cluster_service_cidr / cluster_dns default to 10.52.0.0/16,
 *   10.53.0.0/16, 10.53.0.10;
 * - install.force_gpt = !install.force_mbr;
 * - install.data_disk is cleared when it names the installation device.
 * Not defaulted here (they need the machine): hostname, tty, persistent_partition_size, the DHCP VIP.
 */
import type { HarvesterConfig } from './types.js';

export const DEFAULT_MODULES = ['kvm', 'vhost_net'];
export const DEFAULT_BOND_OPTIONS: Readonly<Record<string, string>> = { mode: 'active-backup', miimon: '100' };
export const DEFAULT_CLUSTER_POD_CIDR = '10.52.0.0/16';
export const DEFAULT_CLUSTER_SERVICE_CIDR = '10.53.0.0/16';
export const DEFAULT_CLUSTER_DNS = '10.53.0.10';

/** Returns a copy with the defaults above applied; the input is not changed. */
export function applyDefaults(input: HarvesterConfig): HarvesterConfig {
  const cfg: HarvesterConfig = structuredClone(input);
  cfg.os = cfg.os ?? {};
  cfg.os.modules = [...new Set([...DEFAULT_MODULES, ...(cfg.os.modules ?? [])])];
  const install = (cfg.install = cfg.install ?? {});
  const mi = install.managementInterface;
  if (mi?.interfaces?.length && (!mi.bondOptions || Object.keys(mi.bondOptions).length === 0)) {
    mi.bondOptions = { ...DEFAULT_BOND_OPTIONS };
  }
  install.clusterPodCidr ??= DEFAULT_CLUSTER_POD_CIDR;
  install.clusterServiceCidr ??= DEFAULT_CLUSTER_SERVICE_CIDR;
  install.clusterDns ??= DEFAULT_CLUSTER_DNS;
  install.forceGpt = !install.forceMbr;
  if (install.dataDisk && install.dataDisk === install.device) delete install.dataDisk;
  return cfg;
}
