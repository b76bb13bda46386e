/**
 * Keys that are not (or no longer) in Harvester's structs, and set keys that Harvester reads but
 * ignores. Harvester drops both silently (its mapper keeps only the struct's fields,
 * harvester/harvester-installer pkg/config/schemas.go LoadHarvesterConfig); we warn and say what
 * replaced them. Warnings, not errors: a file Harvester accepts is accepted (docs/config.md), and
 * what the missing replacement breaks (no management_interface, no hostname) is reported by the rule
 * that needs it.
 */

export interface LegacyKey {
  severity: 'warning' | 'warning';
  message: string;
  hint?: string;
}

/** Where a struct sits, by canonical names: '' (top), 'os', 'install', 'install.managementInterface', ... */
export type StructLocation = string;

/** Key spelling folded for lookup: lower case, no `_` or `-`. */
export function foldKey(key: string): string {
  return key.toLowerCase().replace(/[_-]/g, '');
}

const K3OS = 'k3os-era key (Harvester <= v0.2)';

const REMOVED: Record<StructLocation, Record<string, LegacyKey>> = {
  '': {
    clusternetworks: {
      severity: 'warning',
      message: 'cluster_networks was removed in Harvester v1.1',
      hint: 'configure the management network with install.management_interface; other cluster networks are created after install',
    },
    k3os: {
      severity: 'warning',
      message: `${K3OS}: k3os: is not read any more`,
      hint: 'move its settings under os: (os.modules, os.sysctls, os.ntp_servers, os.dns_nameservers, os.password, os.labels, os.environment) and token/server_url to the top level',
    },
    sshauthorizedkeys: { severity: 'warning', message: `${K3OS}: ssh_authorized_keys belongs under os:`, hint: 'move it to os.ssh_authorized_keys' },
    writefiles: { severity: 'warning', message: `${K3OS}: write_files belongs under os:`, hint: 'move it to os.write_files' },
    hostname: { severity: 'warning', message: `${K3OS}: hostname belongs under os:`, hint: 'move it to os.hostname' },
    runcmd: { severity: 'warning', message: `${K3OS}: run_cmd is not supported`, hint: 'use os.after_install_chroot_commands, or a yip file written with os.write_files' },
    bootcmd: { severity: 'warning', message: `${K3OS}: boot_cmd is not supported`, hint: 'use os.after_install_chroot_commands, or a yip file written with os.write_files' },
    initcmd: { severity: 'warning', message: `${K3OS}: init_cmd is not supported`, hint: 'use os.after_install_chroot_commands, or a yip file written with os.write_files' },
    mgmtinterface: {
      severity: 'warning',
      message: 'mgmtInterface is a legacy key; the management network is install.management_interface',
      hint: 'move it to install.management_interface',
    },
  },
  os: {
    wifi: { severity: 'warning', message: 'os.wifi was removed from Harvester', hint: 'configure wired networking with install.management_interface' },
    datasources: { severity: 'warning', message: `${K3OS}: os.data_sources is not supported`, hint: 'use install.config_url to fetch a remote config' },
    k3sargs: { severity: 'warning', message: `${K3OS}: os.k3s_args is not supported`, hint: 'Harvester runs RKE2; its arguments are not configurable here' },
    taints: { severity: 'warning', message: `${K3OS}: os.taints is not supported`, hint: 'taint the node after it joins, or use install.role: witness' },
    serverurl: { severity: 'warning', message: `${K3OS}: os.server_url belongs at the top level`, hint: 'move it to server_url' },
    token: { severity: 'warning', message: `${K3OS}: os.token belongs at the top level`, hint: 'move it to token' },
  },
  install: {
    networks: {
      severity: 'warning',
      message: 'install.networks was replaced by install.management_interface in Harvester v1.1',
      hint: 'write install.management_interface: {interfaces: [{name: ens3}], method: dhcp} (see https://docs.harvesterhci.io/v1.1/install/harvester-configuration/#installmanagement_interface)',
    },
    mgmtinterface: {
      severity: 'warning',
      message: 'install.mgmtInterface is a legacy key; it was replaced by install.management_interface',
      hint: 'rename it to management_interface',
    },
    nodatapartition: {
      severity: 'warning',
      message: 'install.no_data_partition was removed; Harvester always lays out a Longhorn data partition',
      hint: 'use install.data_disk for a separate Longhorn disk, or install.persistent_partition_size to size the shared layout',
    },
    wipedisks: {
      severity: 'warning',
      message: 'install.wipedisks was removed in Harvester v1.5.0',
      hint: 'use install.wipe_all_disks: true, or list the disks in install.wipe_disks_list',
    },
    bondoption: {
      severity: 'warning',
      message: 'install.bond_option is a v1.0 key; bond options now live in install.management_interface.bond_options',
      hint: 'move it to install.management_interface.bond_options',
    },
  },
  'install.managementInterface': {
    bondoption: {
      severity: 'warning',
      message: 'bond_option is a v1.0 key; it was replaced by bond_options (a map of option: value)',
      hint: 'write bond_options: {mode: active-backup, miimon: "100"}',
    },
  },
};

export function removedKey(location: StructLocation, key: string): LegacyKey | undefined {
  const table = Object.hasOwn(REMOVED, location) ? REMOVED[location] : undefined;
  const folded = foldKey(key);
  return table && Object.hasOwn(table, folded) ? table[folded] : undefined;
}

/** Fields that exist in the struct but that Harvester never acts on: a warning when set. */
export const IGNORED_WHEN_SET: Record<string, LegacyKey> = {
  // Harvester's Network struct has it with json:"-", so yaml.v3 writes `defaultroute: false` to
  // /oem/harvester.config and the json reader drops it: only a true is worth a word.
  '/install/managementInterface/defaultRoute': {
    severity: 'warning',
    message: 'default_route is ignored by Harvester (its config reader drops it)',
    hint: 'remove it; the default route comes from DHCP or from gateway with the static method',
  },
  '/install/noFormat': {
    severity: 'warning',
    message: 'no_format is unused by Harvester (a legacy cOS flag)',
    hint: 'remove it; every install formats the target partitions',
  },
};
