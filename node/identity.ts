/**
 * The node's identity as the install fixed it (installer/render/identity.ts renders it), read by
 * hvagent at every boot to tell a changed address or a renamed NIC from the one the cluster knows.
 */

export const NODE_IDENTITY_PATH = '/oem/hvinstall/node-identity.json';

export interface NodeIdentityNic {
  name?: string;
  /** Lowercase, colon-separated. */
  mac?: string;
}

export interface NodeIdentity {
  version: 1;
  nodeName: string;
  /** mgmt-br, or mgmt-br.<vlan>: where the address lives. */
  interface: string;
  method: 'static' | 'dhcp';
  /** IPv4 with prefix length ("10.0.0.5/24"), when known at install time. */
  address?: string;
  /** config: the static address declared; install: what DHCP gave the installer's NIC. */
  addressSource?: 'config' | 'install';
  nics: NodeIdentityNic[];
}
