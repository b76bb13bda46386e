/**
 * Keys that are not (or no longer) in Harvester's structs, and set keys that Harvester reads but
 * ignores. Harvester drops the first kind silently; we say what replaced them.
 */

export interface LegacyKey {
  severity: 'error' | 'warning';
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
      severity: 'error',
      message: 'cluster_networks was removed in Harvester v1.1',
      hint: 'configure the management network with install.management_interface; other cluster networks are created after install',
    },
    k3os: {
      severity: 'error',
      message: `${K3OS}: k3os: is not read any more`,
      hint: 'move its settings under os: (os.modules, os.sysctls, os.ntp_servers, os.dns_nameservers, os.password, os.labels, os.environment) and token/server_url to the top level',
    },
    sshauthorizedkeys: { severity: 'error', message: `${K3OS}: ssh_authorized_keys belongs under os:`, hint: 'move it to os.ssh_authorized_keys' },
    writefiles: { severity: 'error', message: `${K3OS}: write_files belongs under os:`, hint: 'move it to os.write_files' },
    hostname: { severity: 'error', message: `${K3OS}: hostname belongs under os:`, hint: 'move it to os.hostname' },
    runcmd: { severity: 'error', message: `${K3OS}: run_cmd is not supported`, hint: 'use os.after_install_chroot_commands, or a yip file written with os.write_files' },
    bootcmd: { severity: 'error', message: `${K3OS}: boot_cmd is not supported`, hint: 'use os.after_install_chroot_commands, or a yip file written with os.write_files' },
    initcmd: { severity: 'error', message: `${K3OS}: init_cmd is not supported`, hint: 'use os.after_install_chroot_commands, or a yip file written with os.write_files' },
    mgmtinterface: {
      severity: 'error',
      message: 'mgmtInterface is a legacy key; the management network is install.management_interface',
      hint: 'move it to install.management_interface',
    },
  },
  os: {
    wifi: { severity: 'error', message: 'os.wifi was removed from Harvester', hint: 'configure wired networking with install.management_interface' },
    datasources: { severity: 'error', message: `${K3OS}: os.data_sources is not supported`, hint: 'use install.config_url to fetch a remote config' },
    k3sargs: { severity: 'error', message: `${K3OS}: os.k3s_args is not supported`, hint: 'Harvester runs RKE2; its arguments are not configurable here' },
    taints: { severity: 'error', message: `${K3OS}: os.taints is not supported`, hint: 'taint the node after it joins, or use install.role: witness' },
    serverurl: { severity: 'error', message: `${K3OS}: os.server_url belongs at the top level`, hint: 'move it to server_url' },
    token: { severity: 'error', message: `${K3OS}: os.token belongs at the top level`, hint: 'move it to token' },
  },
  install: {
    networks: {
      severity: 'error',
      message: 'install.networks was replaced by install.management_interface in Harvester v1.1',
      hint: 'write install.management_interface: {interfaces: [{name: ens3}], method: dhcp} (see https://docs.harvesterhci.io/v1.1/install/harvester-configuration/#installmanagement_interface)',
    },
    mgmtinterface: {
      severity: 'error',
      message: 'install.mgmtInterface is a legacy key; it was replaced by install.management_interface',
      hint: 'rename it to management_interface',
    },
    nodatapartition: {
      severity: 'error',
      message: 'install.no_data_partition was removed; Harvester always lays out a Longhorn data partition',
      hint: 'use install.data_disk for a separate Longhorn disk, or install.persistent_partition_size to size the shared layout',
    },
    wipedisks: {
      severity: 'error',
      message: 'install.wipedisks was removed in Harvester v1.5.0',
      hint: 'use install.wipe_all_disks: true, or list the disks in install.wipe_disks_list',
    },
    bondoption: {
      severity: 'error',
      message: 'install.bond_option is a v1.0 key; bond options now live in install.management_interface.bond_options',
      hint: 'move it to install.management_interface.bond_options',
    },
  },
  'install.managementInterface': {
    defaultroute: {
      severity: 'warning',
      message: 'default_route is ignored by Harvester (it is not part of its config)',
      hint: 'remove it; the default route comes from DHCP or from gateway with the static method',
    },
    bondoption: {
      severity: 'error',
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
  '/install/noFormat': {
    severity: 'warning',
    message: 'no_format is unused by Harvester (a legacy cOS flag)',
    hint: 'remove it; every install formats the target partitions',
  },
};
