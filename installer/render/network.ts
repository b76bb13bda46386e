/**
 * NetworkManager keyfiles for the management network, named as Harvester names them
 * (harvester/harvester-installer pkg/config/cos.go UpdateManagementInterfaceConfig, pkg/config/templates/nm-*.nmconnection): bond `mgmt-bo` (profile bond-mgmt) enslaved to bridge `mgmt-br` (bridge-mgmt,
 * VLAN filtering), one ethernet profile per NIC (bond-slave-<nic>), and for VLAN 2–4094 a VLAN
 * interface `mgmt-br.<id>` (vlan-mgmt) that carries the IP configuration.
 */
import { createHash } from 'node:crypto';
import type { HarvesterConfig, ManagementInterface } from '../../config/types.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import type { RenderFacts, RenderNic } from './types.js';
import { BRIDGE_INTERFACE, managementVlan } from '../../node/management-interface.js';

export { BRIDGE_INTERFACE, managementInterfaceName, managementVlan } from '../../node/management-interface.js';

export const NM_CONNECTIONS_DIR = '/etc/NetworkManager/system-connections';
export const BOND_INTERFACE = 'mgmt-bo';
export const DEFAULT_BOND_OPTIONS: Record<string, string> = { mode: 'active-backup', miimon: '100' };

type Section = [name: string, entries: Array<[string, string]>];

export interface NetworkProfile {
  /** File name under /etc/NetworkManager/system-connections. */
  fileName: string;
  id: string;
  content: string;
}

/** Renders sections as a keyfile: `[section]` then `key=value` lines, a blank line between sections. */
export function formatKeyfile(sections: Section[]): string {
  return sections
    .filter(([, entries]) => entries.length > 0)
    .map(([name, entries]) => `[${name}]\n${entries.map(([k, v]) => `${k}=${v}`).join('\n')}\n`)
    .join('\n');
}

/** A stable UUID (RFC 4122 v5 layout, SHA-1 of the profile id) so re-rendering gives the same bytes. */
export function profileUuid(id: string): string {
  const h = createHash('sha1').update(`hvinstall/nm/${id}`).digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/** Dotted IPv4 netmask → prefix length; rejects non-contiguous masks. */
export function maskToPrefix(mask: string): number {
  const parts = mask.split('.');
  if (parts.length !== 4 || parts.some((p) => !/^\d{1,3}$/.test(p) || Number(p) > 255)) {
    throw new HvError(`${mask} is not a valid subnet mask`, { where: 'install.management_interface.subnet_mask', hint: 'write the mask dotted, e.g. 255.255.255.0', exitCode: ExitCode.checkFailed });
  }
  const n = parts.reduce((acc, p) => acc * 256 + Number(p), 0);
  const bits = n.toString(2).padStart(32, '0');
  if (!/^1*0*$/.test(bits)) {
    throw new HvError(`${mask} is not a contiguous subnet mask`, { where: 'install.management_interface.subnet_mask', hint: 'e.g. 255.255.255.0 (/24) or 255.255.252.0 (/22)', exitCode: ExitCode.checkFailed });
  }
  return bits.indexOf('0') === -1 ? 32 : bits.indexOf('0');
}

export interface ResolvedSlave {
  name?: string;
  mac?: string;
}

/** A NIC's permanent MAC, when known (RenderNic.permMac): what NetworkManager's mac-address and a pinned name match. */
export function permanentMacOf(nic: RenderNic): string | undefined {
  return (nic.permMac === undefined ? nic.mac : nic.permMac) || undefined;
}

/** A NIC has an address when either its current or its permanent one is it (a bond member's current one is the bond's). */
function hasAddress(nic: RenderNic, mac: string): boolean {
  return nic.mac.toLowerCase() === mac || permanentMacOf(nic) === mac;
}

/**
 * Fills in the name from the MAC (or the MAC from the name) using the machine's NICs, as Harvester
 * does; the MAC recorded is the permanent one where known, which is what NetworkManager's
 * mac-address matches (nm-settings(5)), so two bond members never share one.
 */
export function resolveSlaves(mi: ManagementInterface, facts: RenderFacts): ResolvedSlave[] {
  const nics = facts.nics ?? [];
  const out: ResolvedSlave[] = [];
  (mi.interfaces ?? []).forEach((iface, i) => {
    const where = `install.management_interface.interfaces[${i}]`;
    const mac = iface.hwAddr?.trim().toLowerCase() || undefined;
    const name = iface.name?.trim() || undefined;
    if (!mac && !name) throw new HvError('an interface needs a name or a hwAddr', { where, exitCode: ExitCode.checkFailed });
    if (nics.length === 0) {
      out.push({ name, mac });
      return;
    }
    if (name) {
      const nic = nics.find((n) => n.name === name);
      if (!nic) throw new HvError(`no interface matching name ${name} found`, { where, hint: `this machine has: ${nics.map((n) => n.name).join(', ')}`, exitCode: ExitCode.checkFailed });
      if (mac && nic.mac && !hasAddress(nic, mac)) {
        throw new HvError(`interface ${name} has hardware address ${permanentMacOf(nic) ?? nic.mac}, not ${mac}`, { where, hint: 'give the name or the hwAddr, or make them agree', exitCode: ExitCode.checkFailed });
      }
      out.push({ name, mac: permanentMacOf(nic) ?? mac });
      return;
    }
    const nic = nics.find((n) => permanentMacOf(n) === mac) ?? nics.find((n) => hasAddress(n, mac!));
    if (!nic) throw new HvError(`no interface matching hardware address ${mac} found`, { where, hint: `this machine has: ${nics.map((n) => `${n.name} ${permanentMacOf(n) ?? n.mac}`).join(', ')}`, exitCode: ExitCode.checkFailed });
    out.push({ name: nic.name, mac: permanentMacOf(nic) ?? mac });
  });
  if (out.length === 0) {
    throw new HvError('no interface specified for management network', { where: 'install.management_interface.interfaces', exitCode: ExitCode.checkFailed });
  }
  const seen = new Set<string>();
  for (const s of out) {
    const key = s.name ?? s.mac!;
    if (seen.has(key)) throw new HvError(`interface ${key} is listed twice`, { where: 'install.management_interface.interfaces', exitCode: ExitCode.checkFailed });
    seen.add(key);
  }
  return out;
}

function ipv4Section(config: HarvesterConfig): Array<[string, string]> {
  const mi = config.install?.managementInterface ?? {};
  const method = String(mi.method ?? 'dhcp').toLowerCase();
  const dns = (config.os?.dnsNameservers ?? []).filter(Boolean);
  const entries: Array<[string, string]> = [];
  if (method === 'static') {
    if (!mi.ip || !mi.subnetMask || !mi.gateway) {
      throw new HvError('a static management network needs ip, subnet_mask and gateway', { where: 'install.management_interface', exitCode: ExitCode.checkFailed });
    }
    entries.push(['address1', `${mi.ip}/${maskToPrefix(mi.subnetMask)},${mi.gateway}`]);
    if (dns.length) entries.push(['dns', `${dns.join(';')};`]);
    entries.push(['method', 'manual']);
  } else if (method === 'dhcp') {
    if (dns.length) {
      entries.push(['dns', `${dns.join(';')};`]);
      // The declared servers, not DHCP's beside them: NetworkManager otherwise merges the lease's
      // servers in (Harvester's keyfile lacks this, harvester/harvester-installer
      // pkg/config/templates/nm-bridge.nmconnection), and CoreDNS then asks either at random.
      entries.push(['ignore-auto-dns', 'true']);
    }
    entries.push(['method', 'auto']);
  } else {
    throw new HvError('management network must configure with either static or DHCP method', { where: 'install.management_interface.method', exitCode: ExitCode.checkFailed });
  }
  return entries;
}

function mtuSection(mtu: number | undefined): Array<[string, string]> {
  return mtu && mtu > 0 ? [['mtu', String(mtu)]] : [];
}

/** The keyfiles for the management network, in a stable order. */
export function renderNetworkManagerProfiles(config: HarvesterConfig, facts: RenderFacts): NetworkProfile[] {
  const mi = config.install?.managementInterface;
  if (!mi) throw new HvError('no management interface configured', { where: 'install.management_interface', exitCode: ExitCode.checkFailed });
  const slaves = resolveSlaves(mi, facts);
  const vlan = managementVlan(mi);
  const mtu = mi.mtu && mi.mtu > 0 ? mi.mtu : undefined;
  const bondOptions = mi.bondOptions && Object.keys(mi.bondOptions).length ? mi.bondOptions : DEFAULT_BOND_OPTIONS;
  const profiles: NetworkProfile[] = [];

  const bondPortVlans = vlan === undefined ? '1 pvid untagged' : `1 pvid untagged,${vlan}`;
  profiles.push({
    fileName: 'bond-mgmt.nmconnection',
    id: 'bond-mgmt',
    content: formatKeyfile([
      ['connection', [['id', 'bond-mgmt'], ['uuid', profileUuid('bond-mgmt')], ['type', 'bond'], ['interface-name', BOND_INTERFACE], ['master', BRIDGE_INTERFACE], ['slave-type', 'bridge']]],
      ['ethernet', mtuSection(mtu)],
      ['bond', Object.keys(bondOptions).sort().map((k) => [k, String(bondOptions[k])] as [string, string])],
      ['bridge-port', [['vlans', bondPortVlans]]],
    ]),
  });

  for (const s of slaves) {
    const label = s.name ?? s.mac!.replace(/:/g, '');
    const id = `bond-slave-${label}`;
    const conn: Array<[string, string]> = [['id', id], ['uuid', profileUuid(id)], ['type', 'ethernet']];
    if (s.name) conn.push(['interface-name', s.name]);
    conn.push(['master', BOND_INTERFACE], ['slave-type', 'bond']);
    const eth: Array<[string, string]> = [];
    // NetworkManager stores MACs in upper case; writing them so keeps the keyfile a fixed point of nmcli.
    if (s.mac) eth.push(['mac-address', s.mac.toUpperCase()]);
    eth.push(...mtuSection(mtu));
    profiles.push({ fileName: `${id}.nmconnection`, id, content: formatKeyfile([['connection', conn], ['ethernet', eth]]) });
  }

  const bridge: Array<[string, string]> = [['forward-delay', '0'], ['stp', 'false'], ['vlan-default-pvid', '1'], ['vlan-filtering', 'true']];
  // With VLAN filtering the bridge itself must be a member of the management VLAN for mgmt-br.<id> to see its frames.
  if (vlan !== undefined) bridge.push(['vlans', String(vlan)]);
  profiles.push({
    fileName: 'bridge-mgmt.nmconnection',
    id: 'bridge-mgmt',
    content: formatKeyfile([
      ['connection', [['id', 'bridge-mgmt'], ['uuid', profileUuid('bridge-mgmt')], ['type', 'bridge'], ['interface-name', BRIDGE_INTERFACE]]],
      ['ethernet', mtuSection(mtu)],
      ['bridge', bridge],
      ['ipv4', vlan === undefined ? ipv4Section(config) : [['method', 'disabled']]],
      ['ipv6', [['method', 'disabled']]],
    ]),
  });

  if (vlan !== undefined) {
    profiles.push({
      fileName: 'vlan-mgmt.nmconnection',
      id: 'vlan-mgmt',
      content: formatKeyfile([
        ['connection', [['id', 'vlan-mgmt'], ['uuid', profileUuid('vlan-mgmt')], ['type', 'vlan'], ['interface-name', `${BRIDGE_INTERFACE}.${vlan}`]]],
        ['ethernet', mtuSection(mtu)],
        ['vlan', [['flags', '1'], ['id', String(vlan)], ['parent', BRIDGE_INTERFACE]]],
        ['ipv4', ipv4Section(config)],
        ['ipv6', [['method', 'disabled']]],
      ]),
    });
  }
  return profiles;
}
