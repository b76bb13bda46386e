/**
 * Is the management network online? A pure judgement over observed facts (links, addresses, routes,
 * resolv.conf, the DHCP lease), naming the first missing condition the way a person would look:
 * bond slaves, carrier, address, default route, DNS.
 */

import { describeNicChanges, nicChanges, type DeclaredNic, type LinkIdentity } from '../identity/nics.js';

/** One link as `ip -j -d link show` (and `ip -j -d addr show`) reports it (the fields we read). */
export interface IpLink {
  ifname: string;
  /** The MAC in use (a bond slave shows the bond's). */
  address?: string;
  /** The NIC's own MAC, when it differs from `address` (newer iproute2). */
  permaddr?: string;
  flags?: string[];
  operstate?: string;
  master?: string;
  link?: string;
  linkinfo?: {
    info_kind?: string;
    info_slave_kind?: string;
    info_data?: Record<string, unknown>;
    info_slave_data?: { state?: string; mii_status?: string; link_failure_count?: number; perm_hwaddr?: string };
  };
}

/** One interface of `ip -j addr show`. */
export interface IpAddrEntry {
  ifname: string;
  addr_info?: Array<{ family?: string; local?: string; prefixlen?: number; scope?: string; dynamic?: boolean; tentative?: boolean }>;
}

/** One route of `ip -j -4 route show default`. */
export interface IpRoute {
  dst?: string;
  gateway?: string;
  dev?: string;
}

/** What the DHCP client recorded for the management interface. */
export interface DhcpLease {
  file: string;
  address?: string;
  routers: string[];
}

export interface NetworkFacts {
  links: IpLink[];
  addrs: IpAddrEntry[];
  defaultRoutes: IpRoute[];
  nameservers: string[];
  lease?: DhcpLease;
}

export interface NetworkWant {
  /** mgmt-br, or mgmt-br.<vlan>: the interface carrying the node's address. */
  iface: string;
  /** The bridge under a VLAN interface (mgmt-br), checked for carrier too. */
  bridge: string;
  /** mgmt-bo; undefined when there is no bond to check. */
  bond?: string;
  /** Slave count the config declares (0: unknown, use what the bond has). */
  expectedSlaves: number;
  /** The bond's NICs as the install recorded them: a missing slave is then named (renamed, gone). */
  declaredNics?: DeclaredNic[];
  method: 'dhcp' | 'static';
  staticIp?: string;
  gateway?: string;
  /** Nameservers the config declares; any nameserver is required when requireDns is set. */
  dnsServers: string[];
  requireDns: boolean;
}

export type NetworkAssessment = { online: true; detail: string } | { online: false; missing: string };

/** Links that borrow a MAC from a port (mgmt-br, mgmt-bo, mgmt-br.<vlan>): never a NIC of the bond. */
const MAC_BORROWERS = new Set(['bridge', 'bond', 'vlan', 'team', 'macvlan', 'ipvlan']);

/** Each NIC's name and own MAC (a bond slave's permanent address, not the bond's); bridges, bonds and VLANs left out. */
export function linkIdentities(links: readonly IpLink[]): LinkIdentity[] {
  return links
    .filter((l) => !MAC_BORROWERS.has(l.linkinfo?.info_kind ?? ''))
    .map((l) => ({ ifname: l.ifname, mac: l.linkinfo?.info_slave_data?.perm_hwaddr ?? l.permaddr ?? l.address }));
}

const hasCarrier = (l: IpLink): boolean => (l.flags ?? []).includes('LOWER_UP') && l.operstate !== 'DOWN' && l.operstate !== 'LOWERLAYERDOWN';

function slaveProblem(s: IpLink): string | undefined {
  if (!(s.flags ?? []).includes('UP')) return 'administratively down';
  if (!hasCarrier(s)) return 'no carrier';
  const d = s.linkinfo?.info_slave_data;
  if (d?.mii_status && d.mii_status !== 'UP') return `mii ${d.mii_status.toLowerCase()}`;
  if (d?.state && d.state !== 'ACTIVE') return d.state.toLowerCase();
  return undefined;
}

function ipv4Of(addrs: IpAddrEntry[], iface: string): string[] {
  const e = addrs.find((a) => a.ifname === iface);
  return (e?.addr_info ?? [])
    .filter((a) => a.family === 'inet' && a.local && !a.local.startsWith('169.254.') && a.scope !== 'host')
    .map((a) => `${a.local}/${a.prefixlen}`);
}

export function assessNetwork(f: NetworkFacts, w: NetworkWant): NetworkAssessment {
  const byName = new Map(f.links.map((l) => [l.ifname, l]));
  let bondDetail = '';

  if (w.bond) {
    const bond = byName.get(w.bond);
    if (!bond) return { online: false, missing: `bond ${w.bond} does not exist (NetworkManager has not brought up bond-mgmt)` };
    const slaves = f.links.filter((l) => l.master === w.bond);
    const total = Math.max(slaves.length, w.expectedSlaves);
    const active = slaves.filter((s) => slaveProblem(s) === undefined);
    const problems = slaves.filter((s) => slaveProblem(s) !== undefined).map((s) => `${s.ifname}: ${slaveProblem(s)}`);
    if (slaves.length < w.expectedSlaves) {
      const named = describeNicChanges(nicChanges(w.declaredNics ?? [], linkIdentities(f.links)), w.bond);
      problems.push(named.length ? named.join('; ') : `${w.expectedSlaves - slaves.length} declared slave(s) not enslaved`);
    }
    if (active.length === 0) {
      return { online: false, missing: `bond ${w.bond}: 0 of ${total} slaves active${problems.length ? ` (${problems.join(', ')})` : ''}` };
    }
    if (!hasCarrier(bond)) return { online: false, missing: `bond ${w.bond} has no carrier yet (${active.length} of ${total} slaves up; LACP negotiating?)` };
    bondDetail = `, bond ${w.bond} ${active.length}/${total} slaves active`;
  }

  for (const name of w.iface === w.bridge ? [w.bridge] : [w.bridge, w.iface]) {
    const l = byName.get(name);
    if (!l) return { online: false, missing: `interface ${name} does not exist` };
    if (!(l.flags ?? []).includes('UP')) return { online: false, missing: `${name} is administratively down` };
    if (!hasCarrier(l)) return { online: false, missing: `${name} has no carrier` };
  }

  const v4 = ipv4Of(f.addrs, w.iface);
  if (v4.length === 0) {
    const why = w.method === 'static' ? `the static address ${w.staticIp ?? '(none declared)'} is not applied` : 'no DHCP lease yet';
    return { online: false, missing: `${w.iface} has no IPv4 address: ${why}` };
  }

  const route = f.defaultRoutes.find((r) => r.dst === 'default') ?? f.defaultRoutes[0];
  if (!route) {
    if (w.method === 'dhcp' && f.lease && f.lease.routers.length === 0) {
      return { online: false, missing: `no default route: the DHCP server sent no routers option (lease ${f.lease.file}, ${w.iface} ${v4[0]})` };
    }
    if (w.method === 'dhcp' && f.lease) {
      return { online: false, missing: `no default route although the DHCP lease names router ${f.lease.routers[0]} (not installed yet)` };
    }
    if (w.method === 'static') {
      return { online: false, missing: `no default route: the static gateway ${w.gateway ?? '(none declared)'} is not applied on ${w.iface}` };
    }
    return { online: false, missing: `no default route (${w.iface} has ${v4[0]}; no DHCP lease found to say whether the server sent a routers option)` };
  }

  if (w.requireDns || w.dnsServers.length > 0) {
    if (f.nameservers.length === 0) {
      const declared = w.dnsServers.length ? ` (declared: ${w.dnsServers.join(', ')})` : '';
      return { online: false, missing: `DNS: no nameserver in /etc/resolv.conf${declared}` };
    }
    if (w.dnsServers.length > 0 && !w.dnsServers.some((d) => f.nameservers.includes(d))) {
      return { online: false, missing: `DNS: /etc/resolv.conf lists ${f.nameservers.join(', ')}, none of the declared ${w.dnsServers.join(', ')}` };
    }
  }

  const via = route.gateway ? `default via ${route.gateway}${route.dev && route.dev !== w.iface ? ` dev ${route.dev}` : ''}` : `default dev ${route.dev}`;
  const dns = f.nameservers.length ? `, dns ${f.nameservers.join(' ')}` : '';
  return { online: true, detail: `${w.iface} ${v4.join(' ')}, ${via}${bondDetail}${dns}` };
}

/**
 * Total link failures the bond has counted on its slaves: it grows with every slave carrier loss,
 * so a flap between two observations is still seen.
 */
export function bondLinkFailures(f: NetworkFacts, bond: string | undefined): number {
  if (!bond) return 0;
  return f.links.filter((l) => l.master === bond).reduce((n, l) => n + (l.linkinfo?.info_slave_data?.link_failure_count ?? 0), 0);
}

/**
 * The IPv4 default routes of the main table from /proc/net/route (what `ip -4 route show default`
 * lists): destination and mask 0, the route up; addresses are hexadecimal in the kernel's byte
 * order (little-endian here). Pure.
 */
export function parseProcNetRoute(text: string): IpRoute[] {
  const out: IpRoute[] = [];
  const ip = (hex: string): string => [6, 4, 2, 0].map((k) => parseInt(hex.slice(k, k + 2), 16)).join('.');
  for (const line of text.split('\n').slice(1)) {
    const [dev, dst, gateway, flags, , , , mask] = line.trim().split(/\s+/);
    if (!dev || dst !== '00000000' || mask !== '00000000' || !gateway || !/^[0-9A-Fa-f]{8}$/.test(gateway)) continue;
    if ((parseInt(flags ?? '0', 16) & 0x1) === 0) continue;
    out.push(gateway === '00000000' ? { dst: 'default', dev } : { dst: 'default', gateway: ip(gateway), dev });
  }
  return out;
}

/** Parses resolv.conf nameserver lines. */
export function parseResolvConf(text: string): string[] {
  return text.split('\n').map((l) => /^\s*nameserver\s+(\S+)/.exec(l)?.[1]).filter((s): s is string => !!s);
}

/**
 * Finds the newest lease for an interface in a lease file's text: NetworkManager's internal client
 * format (KEY=VALUE with ADDRESS/ROUTER, one lease per file named …-<iface>.lease) or dhclient's
 * (`lease { interface "x"; fixed-address …; option routers …; }`).
 */
export function parseDhcpLease(text: string, file: string, iface: string): DhcpLease | undefined {
  if (/^\s*lease\s*\{/m.test(text)) {
    const blocks = [...text.matchAll(/lease\s*\{([\s\S]*?)\n\}/g)].map((m) => m[1]!);
    const mine = blocks.filter((b) => new RegExp(`interface\\s+"${iface.replace(/\./g, '\\.')}"`).test(b));
    const last = mine[mine.length - 1];
    if (!last) return undefined;
    const address = /fixed-address\s+([\d.]+)/.exec(last)?.[1];
    const routers = /option\s+routers\s+([^;]+);/.exec(last)?.[1]?.split(/[\s,]+/).filter(Boolean) ?? [];
    return { file, address, routers };
  }
  if (!file.endsWith(`-${iface}.lease`)) return undefined;
  const kv = Object.fromEntries(text.split('\n').map((l) => /^([A-Z_0-9]+)=(.*)$/.exec(l.trim())).filter((m): m is RegExpExecArray => !!m).map((m) => [m[1], m[2]]));
  if (!kv.ADDRESS) return undefined;
  return { file, address: kv.ADDRESS, routers: (kv.ROUTER ?? '').split(/\s+/).filter(Boolean) };
}
