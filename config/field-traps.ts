/**
 * The field's costliest configuration mistakes, caught before a disk is touched. Harvester accepts
 * every one of these files; where the install comes up broken the finding is an error, with the
 * reason (docs/config.md, "What is checked beyond Harvester"); where it only may, or breaks later, a
 * warning. Pure: the addresses the config states, nothing measured (NTP answers are preflight's).
 */
import type { FindingList } from './findings.js';
import type { HarvesterConfig } from './types.js';
import { DEFAULT_CLUSTER_POD_CIDR, DEFAULT_CLUSTER_SERVICE_CIDR } from './defaults.js';
import { cidrContains, cidrsOverlap, formatCidr as showCidr, ipv4ToInt, isIPv4, networkOf, parseCidr, subnetMaskError } from './net.js';
import { dns1123SubdomainErrors } from './k8s-names.js';

export interface Cidr {
  base: number;
  prefix: number;
}

/** An inclusive range of IPv4 addresses, e.g. a DHCP pool the operator names (validate --dhcp-range). */
export interface Ipv4Range {
  first: string;
  last: string;
}

export interface TrapContext {
  /** DHCP pools of the management network, when known: the VIP must lie outside them. */
  dhcpRanges?: Ipv4Range[];
}

/** KubeVirt's masquerade network inside each VM pod (its default vmNetworkCIDR; KubeVirt user guide, Interfaces and Networks, masquerade). */
export const KUBEVIRT_MASQUERADE_CIDR = '10.0.2.0/24';

/** Addresses that are not routed on the internet (RFC 1918, CGNAT, loopback, link-local). */
const INTERNAL = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16'].map((c) => parseCidr(c)!);

export function isInternalAddress(ip: string): boolean {
  return INTERNAL.some((c) => cidrContains(c, ip));
}

/** The management subnet when the config states it (the static method), else undefined. */
export function managementSubnet(cfg: HarvesterConfig): Cidr | undefined {
  const mi = cfg.install?.managementInterface;
  if (mi?.method !== 'static' || !mi.ip || !mi.subnetMask || !isIPv4(mi.ip) || !isIPv4(mi.subnetMask) || subnetMaskError(mi.subnetMask)) return undefined;
  const prefix = mi.subnetMask.split('.').reduce((n, o) => n + Number(o).toString(2).replace(/0/g, '').length, 0);
  return networkOf(mi.ip, prefix);
}

/** The host of server_url as written (with or without https://, a port, user info). */
export function serverUrlHost(url: string | undefined): string | undefined {
  return /^(?:https?:\/\/)?(?:[^@/]*@)?([^:/?]+)/i.exec(url?.trim() ?? '')?.[1]?.toLowerCase();
}

/** The IPv4 host of server_url, if it is an address. */
function serverUrlAddress(cfg: HarvesterConfig): string | undefined {
  const host = serverUrlHost(cfg.serverUrl);
  return host && isIPv4(host) ? host : undefined;
}

export function checkFieldTraps(cfg: HarvesterConfig, out: FindingList, ctx: TrapContext = {}): void {
  const mode = cfg.install?.mode ?? '';
  if (mode !== 'create' && mode !== 'join') return;
  checkResolvers(cfg, out);
  checkClusterCidrs(cfg, out);
  checkKubevirtRange(cfg, out);
  checkVipPlacement(cfg, out, ctx);
  checkHostname(cfg, out);
  checkNtp(cfg, out);
}

/**
 * CoreDNS forwards to the node's resolvers with the policy `random` (coredns/coredns
 * plugin/forward/README.md): one internal and one public resolver make internal names resolve on
 * some queries only. A warning: it works when no internal name is needed.
 */
function checkResolvers(cfg: HarvesterConfig, out: FindingList): void {
  const dns = (cfg.os?.dnsNameservers ?? []).filter(isIPv4);
  const internal = dns.filter(isInternalAddress);
  const pub = dns.filter((d) => !isInternalAddress(d));
  if (internal.length === 0 || pub.length === 0) return;
  out.warn(
    '/os/dnsNameservers',
    `dns_nameservers mixes internal (${internal.join(', ')}) and public (${pub.join(', ')}) resolvers: CoreDNS asks one of them at random, so internal names resolve only some of the time`,
    'list only the internal resolvers (let them forward to the internet), or only public ones when the cluster needs no internal name',
  );
}

/**
 * Pod and service CIDRs that overlap the addresses the node must reach by its own routes break the
 * cluster: packets for those addresses go into the overlay instead (RKE2 cluster-cidr/service-cidr).
 * An error when the CIDRs are the config's (or a create node's defaults); a warning on a join node
 * that leaves them unset, since only the cluster's first node decides them.
 */
function checkClusterCidrs(cfg: HarvesterConfig, out: FindingList): void {
  const install = cfg.install ?? {};
  const joinDefaults = install.mode === 'join';
  const cidrs: Array<{ name: string; ptr: string; cidr: Cidr; stated: boolean }> = [];
  for (const [name, ptr, given, dflt] of [
    ['cluster_pod_cidr', '/install/clusterPodCidr', install.clusterPodCidr, DEFAULT_CLUSTER_POD_CIDR],
    ['cluster_service_cidr', '/install/clusterServiceCidr', install.clusterServiceCidr, DEFAULT_CLUSTER_SERVICE_CIDR],
  ] as const) {
    const cidr = parseCidr(given ?? dflt);
    if (cidr) cidrs.push({ name, ptr, cidr, stated: given !== undefined });
  }
  const [pod, svc] = cidrs;
  if (pod && svc && cidrsOverlap(pod.cidr, svc.cidr)) {
    const at = svc.stated || !pod.stated ? svc : pod;
    const other = at === svc ? pod : svc;
    const show = (c: typeof pod) => `${c.name} ${c.stated ? '' : '(default) '}${showCidr(c.cidr)}`;
    out.error(at.ptr, `${show(at)} overlaps ${show(other)}: services and pods would share addresses`, 'give them separate ranges, e.g. 10.52.0.0/16 and 10.53.0.0/16');
  }
  const mi = install.managementInterface;
  const subnet = managementSubnet(cfg);
  const things: Array<{ what: string; ptr: string; ip?: string; net?: Cidr }> = [];
  if (subnet) things.push({ what: `the management subnet ${showCidr(subnet)}`, ptr: '/install/managementInterface/ip', net: subnet });
  else if (mi?.ip && isIPv4(mi.ip)) things.push({ what: `the management address ${mi.ip}`, ptr: '/install/managementInterface/ip', ip: mi.ip });
  if (mi?.gateway && isIPv4(mi.gateway)) things.push({ what: `the gateway ${mi.gateway}`, ptr: '/install/managementInterface/gateway', ip: mi.gateway });
  if (install.vip && isIPv4(install.vip) && install.mode === 'create') things.push({ what: `the VIP ${install.vip}`, ptr: '/install/vip', ip: install.vip });
  const server = serverUrlAddress(cfg);
  if (server) things.push({ what: `the server_url address ${server}`, ptr: '/serverUrl', ip: server });
  (cfg.os?.dnsNameservers ?? []).forEach((d, i) => {
    if (isIPv4(d)) things.push({ what: `the DNS server ${d}`, ptr: `/os/dnsNameservers/${i}`, ip: d });
  });
  for (const c of cidrs) {
    const hits = things.filter((t) => (t.net ? cidrsOverlap(c.cidr, t.net) : cidrContains(c.cidr, t.ip!)));
    if (hits.length === 0) continue;
    const whose = c.stated ? `${c.name} ${showCidr(c.cidr)}` : `${c.name} (default ${showCidr(c.cidr)})`;
    const message = `${whose} overlaps ${hits.map((t) => t.what).join(', ')}: the node would send that traffic into the cluster network instead of the LAN`;
    const hint = `choose ${c.name} outside the site's networks (e.g. 172.30.0.0/16), the same in every node's config`;
    if (joinDefaults && !c.stated) out.warn(hits[0]!.ptr, `${message}, if the cluster uses the default`, hint);
    else out.error(c.stated ? c.ptr : hits[0]!.ptr, message, hint);
  }
}

/** KubeVirt gives each VM pod 10.0.2.0/24 internally; a management network there breaks upgrades (the upgrade repository VM cannot be reached). */
function checkKubevirtRange(cfg: HarvesterConfig, out: FindingList): void {
  const kv = parseCidr(KUBEVIRT_MASQUERADE_CIDR)!;
  const subnet = managementSubnet(cfg);
  const ip = cfg.install?.managementInterface?.ip;
  const hit = subnet ? cidrsOverlap(subnet, kv) : ip && isIPv4(ip) ? cidrContains(kv, ip) : false;
  if (!hit) return;
  out.warn(
    '/install/managementInterface/ip',
    `the management network overlaps ${KUBEVIRT_MASQUERADE_CIDR}, KubeVirt's masquerade network inside every VM pod: the install works, upgrades stall (the upgrade repository VM is unreachable)`,
    'use another management subnet if you can',
  );
}

function inRange(ip: string, r: Ipv4Range): boolean {
  if (!isIPv4(r.first) || !isIPv4(r.last)) return false;
  const n = ipv4ToInt(ip);
  return n >= ipv4ToInt(r.first) && n <= ipv4ToInt(r.last);
}

/** Where the VIP sits: on the gateway or a resolver (an address conflict), outside the subnet kube-vip announces on, in a DHCP pool. */
function checkVipPlacement(cfg: HarvesterConfig, out: FindingList, ctx: TrapContext): void {
  const install = cfg.install ?? {};
  const vip = install.vip;
  if (install.mode !== 'create' || !vip || !isIPv4(vip)) return;
  const mi = install.managementInterface;
  if (mi?.gateway === vip) out.error('/install/vip', `the VIP ${vip} is the gateway's address: two hosts would answer ARP for it`, 'choose a free address in the management subnet');
  if ((cfg.os?.dnsNameservers ?? []).includes(vip)) out.error('/install/vip', `the VIP ${vip} is also a DNS server: two hosts would answer ARP for it`, 'choose a free address in the management subnet');
  const subnet = managementSubnet(cfg);
  if (subnet && !cidrContains(subnet, vip)) {
    out.warn('/install/vip', `the VIP ${vip} is outside the management subnet ${showCidr(subnet)}: kube-vip announces it by ARP there, so nothing off-link reaches it`, 'choose a free address in the management subnet');
  }
  for (const r of ctx.dhcpRanges ?? []) {
    if (inRange(vip, r) && install.vipMode !== 'dhcp') {
      out.error('/install/vip', `the VIP ${vip} is inside the DHCP pool ${r.first}-${r.last}: the DHCP server will lease it to another machine`, 'choose an address outside the pool, or exclude it from the pool (a reservation)');
    }
  }
}

/** A dotted hostname: Harvester releases before v1.6 registered such a node twice (its short name and the FQDN) and never finished setting it up. */
function checkHostname(cfg: HarvesterConfig, out: FindingList): void {
  const h = cfg.os?.hostname;
  // An invalid name already has its error; a short name cut from it would be no better advice.
  if (!h || !h.includes('.') || dns1123SubdomainErrors(h).length > 0) return;
  out.warn('/os/hostname', `${h} is a fully qualified name: Harvester releases before v1.6 register such a node twice (as ${h.split('.')[0]} and as ${h}) and never finish setting it up`, `use the short name ${h.split('.')[0]} unless the image is v1.6 or later; the domain belongs in DNS`);
}

/**
 * No NTP servers: Harvester writes no timesyncd config, so systemd-timesyncd uses its compiled-in
 * FallbackNTP (a public pool, unreachable on an isolated network) and a wrong clock breaks a join
 * (x509 "certificate is not yet valid"). Said once, since Harvester does it silently.
 */
function checkNtp(cfg: HarvesterConfig, out: FindingList): void {
  if (cfg.os?.ntpServers?.length) return;
  out.warn(
    '/os/ntpServers',
    'no ntp_servers: the node uses systemd-timesyncd\'s built-in public pool, which an isolated network cannot reach; a wrong clock makes joins fail ("certificate is not yet valid")',
    'set os.ntp_servers to the site\'s NTP servers (hvinstall preflight --config checks that they answer)',
  );
}
