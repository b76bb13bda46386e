/**
 * Where the node's management address lives (harvester/harvester-installer pkg/config/cos.go): the
 * bridge `mgmt-br`, or `mgmt-br.<vlan>` for a tagged VLAN. The installer's NetworkManager profiles
 * create it; kube-vip's manifest (rendered at install, and again by hvagent at promotion) binds to it.
 */
import type { HarvesterConfig, ManagementInterface } from '../config/types.js';

export const BRIDGE_INTERFACE = 'mgmt-br';

/** The VLAN carrying the management IP, or undefined for untagged (0 and 1 behave as untagged in Harvester). */
export function managementVlan(mi: ManagementInterface | undefined): number | undefined {
  const v = mi?.vlanId ?? 0;
  return v >= 2 && v <= 4094 ? v : undefined;
}

/** The interface holding the management IP: `mgmt-br` or `mgmt-br.<vlan>`. kube-vip binds the VIP here. */
export function managementInterfaceName(config: HarvesterConfig): string {
  const vlan = managementVlan(config.install?.managementInterface);
  return vlan === undefined ? BRIDGE_INTERFACE : `${BRIDGE_INTERFACE}.${vlan}`;
}
