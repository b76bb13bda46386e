/**
 * The node's identity as the install fixed it: its name, the management interface and address,
 * and the NICs (name and MAC) of the management bond. Written to /oem/hvinstall/node-identity.json
 * for hvagent, which compares it at every boot: a DHCP server that hands out another address after
 * a reboot leaves etcd with a member it cannot reach ("not a member of the etcd cluster":
 * harvester/harvester#6941, #4290, #1683), and a NIC renamed after a reboot leaves the bond without
 * its slave (#4591, #6808). Pure.
 */
import type { HarvesterConfig } from '../../config/types.js';
import type { NodeIdentity } from '../../node/identity.js';
import { managementInterfaceName, maskToPrefix, resolveSlaves } from './network.js';
import type { RenderFacts } from './types.js';

export function nodeIdentity(config: HarvesterConfig, facts: RenderFacts, nodeName: string): NodeIdentity {
  const mi = config.install?.managementInterface;
  const method = String(mi?.method ?? 'dhcp').toLowerCase() === 'static' ? 'static' : 'dhcp';
  const nics = mi ? resolveSlaves(mi, facts).map((s) => ({ ...(s.name ? { name: s.name } : {}), ...(s.mac ? { mac: s.mac } : {}) })) : [];
  const id: NodeIdentity = { version: 1, nodeName, interface: managementInterfaceName(config), method, nics };
  if (method === 'static' && mi?.ip && mi.subnetMask) {
    id.address = `${mi.ip}/${maskToPrefix(mi.subnetMask)}`;
    id.addressSource = 'config';
  } else if (method === 'dhcp' && facts.managementAddress) {
    id.address = facts.managementAddress;
    id.addressSource = 'install';
  }
  return id;
}

export function renderNodeIdentity(config: HarvesterConfig, facts: RenderFacts, nodeName: string): string {
  return JSON.stringify(nodeIdentity(config, facts, nodeName), null, 2) + '\n';
}
