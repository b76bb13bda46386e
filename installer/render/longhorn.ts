/**
 * The Harvester chart values a create node is bootstrapped with (what rancherd's ManagedChart carries
 * in Harvester, harvester/harvester-installer pkg/config/templates/rancherd-10-harvester.yaml): storage class replicas, Longhorn default settings with
 * Harvester's clamps, node-disk-manager's label filter, the VIP and the promote CIDRs.
 */
import { stringify } from 'yaml';
import type { HarvesterConfig } from '../config/types.js';
import { LONGHORN_DEFAULT_DISK } from './layout.js';
import { DEFAULT_CLUSTER_DNS, DEFAULT_POD_CIDR, DEFAULT_SERVICE_CIDR } from './rke2.js';
import { vipMode } from './kube-vip.js';

export const HARVESTER_VALUES_PATH = '/oem/hvinstall/harvester-values.yaml';
export const NDM_LABEL_FILTER = ['COS_*', 'HARV_*'];

function positiveInt(v: unknown): number | undefined {
  const n = typeof v === 'string' ? Number(v) : v;
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? Math.trunc(n) : undefined;
}

export function harvesterChartValues(config: HarvesterConfig): Record<string, unknown> {
  const h = config.install?.harvester ?? {};
  const values: Record<string, unknown> = {};
  const replicas = positiveInt(h.storageClass?.replicaCount);
  if (replicas !== undefined) values.storageClass = { replicaCount: Math.min(replicas, 3) };

  const ds = h.longhorn?.defaultSettings ?? {};
  const defaultSettings: Record<string, unknown> = { taintToleration: 'kubevirt.io/drain:NoSchedule', defaultDataPath: LONGHORN_DEFAULT_DISK };
  const cpu = positiveInt(ds.guaranteedInstanceManagerCPU);
  if (cpu !== undefined) defaultSettings.guaranteedInstanceManagerCPU = Math.min(cpu, 12);
  const reserved = positiveInt(ds.storageReservedPercentageForDefaultDisk);
  // Longhorn settings are strings; Harvester quotes this one and leaves it out at the default 0.
  if (reserved !== undefined) defaultSettings.storageReservedPercentageForDefaultDisk = String(Math.min(reserved, 30));
  defaultSettings.detachManuallyAttachedVolumesWhenCordoned = true;
  defaultSettings.nodeDrainPolicy = 'allow-if-replica-is-stopped';
  values.longhorn = { enabled: true, defaultSettings };
  values['harvester-node-disk-manager'] = { enabled: true, labelFilter: NDM_LABEL_FILTER };

  const mode = vipMode(config);
  const vip = config.install?.vip?.trim();
  if (vip) values.service = { vip: { enabled: true, mode, ip: vip, hwAddress: (config.install?.vipHwAddr ?? '').toLowerCase() } };
  // The static pod from kube-vip.ts announces the VIP and services; a second kube-vip from the chart would fight it over ARP.
  values['kube-vip'] = { enabled: false };
  values['kube-vip-cloud-provider'] = { enabled: true };
  values.promote = {
    clusterPodCIDR: config.install?.clusterPodCidr || DEFAULT_POD_CIDR,
    clusterServiceCIDR: config.install?.clusterServiceCidr || DEFAULT_SERVICE_CIDR,
    clusterDNS: config.install?.clusterDns || DEFAULT_CLUSTER_DNS,
  };
  if (h.enableGoCoverDir) values.enableGoCoverDir = true;
  return values;
}

export function renderHarvesterValues(config: HarvesterConfig): string {
  return stringify(harvesterChartValues(config), { lineWidth: 0 });
}
