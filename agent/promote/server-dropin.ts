/**
 * The RKE2 server drop-in a join node gets when promoted, as Harvester's promote.sh writes it
 * (harvester/harvester deploy/charts/harvester/templates/configmap.yaml promote.sh): canal+multus, the cluster CIDRs and DNS, the VIP as a TLS SAN, the audit policy.
 * A witness becomes an etcd-only member.
 */
import { stringify } from 'yaml';
import type { HarvesterConfig } from '../../config/types.js';
import { serverUrlHost } from '../rke2/role.js';
import { DEFAULT_CLUSTER_DNS, DEFAULT_CLUSTER_POD_CIDR, DEFAULT_CLUSTER_SERVICE_CIDR } from '../../config/defaults.js';
import { AUDIT_POLICY_PATH } from '../../node/paths.js';


/** Pure. `auditPolicyPresent` says whether the renderer's audit policy file is on the node. */
export function renderPromotionServerDropIn(config: HarvesterConfig, opts: { witness: boolean; auditPolicyPresent: boolean }): string {
  const i = config.install ?? {};
  const doc: Record<string, unknown> = {
    cni: 'multus,canal',
    'cluster-cidr': i.clusterPodCidr || DEFAULT_CLUSTER_POD_CIDR,
    'service-cidr': i.clusterServiceCidr || DEFAULT_CLUSTER_SERVICE_CIDR,
    'cluster-dns': i.clusterDns || DEFAULT_CLUSTER_DNS,
  };
  const sans = [vipFromServerUrl(config.serverUrl), ...(config.sans ?? [])].filter((v): v is string => !!v);
  if (sans.length) doc['tls-san'] = [...new Set(sans)];
  if (opts.auditPolicyPresent) doc['audit-policy-file'] = AUDIT_POLICY_PATH;
  if (opts.witness) {
    doc['disable-apiserver'] = true;
    doc['disable-controller-manager'] = true;
    doc['disable-scheduler'] = true;
  }
  return `# Written by hvagent when this node was promoted to ${opts.witness ? 'etcd (witness)' : 'control-plane'}.\n${stringify(doc)}`;
}

/** The VIP of a join node's server_url (https://<vip>:443). */
export const vipFromServerUrl = serverUrlHost;

/** Harvester's promotion request: the controller sets this annotation to `running` on the chosen node. */
export const PROMOTE_STATUS = 'harvesterhci.io/promote-status';

export function promotionRequested(annotations: Record<string, string> | undefined): boolean {
  return annotations?.[PROMOTE_STATUS] === 'running';
}
