/**
 * A proxy without the cluster's own addresses in no_proxy: the nodes then send their traffic to
 * each other, to the VIP and to the server_url through the proxy, which cannot reach them, and the
 * cluster breaks (Harvester's docs, http-proxy setting: "you must also put Harvester node's CIDR
 * into noProxy"; harvester/harvester pkg/webhook refuses such a setting once the cluster runs).
 * So what is missing is added to what the node gets, and a warning says what was added: to
 * os.environment's no_proxy (the OS, containerd and RKE2, installer/render/yip.ts) and, in create
 * mode, to the http-proxy setting's noProxy. Entries are matched the way Go's http.ProxyFromEnvironment
 * does (golang.org/x/net/http/httpproxy): an address, a CIDR that contains it, a domain and its
 * subdomains (`example.com`, `.example.com`).
 */
import type { FindingList } from './findings.js';
import type { HarvesterConfig } from './types.js';
import { managementSubnet, serverUrlHost, type Cidr } from './field-traps.js';
import { cidrContains, formatCidr as showCidr, isIPv4, parseCidr } from './net.js';
import { ownValue, setOwn } from '../lib/own-keys.js';

interface Needed {
  /** What to add to no_proxy. */
  entry: string;
  /** For the warning: what it is. */
  what: string;
  ip?: string;
  net?: Cidr;
  host?: string;
}

/** The addresses a node must reach without the proxy, as far as the config says them. */
export function addressesBesideProxy(cfg: HarvesterConfig): Needed[] {
  const out: Needed[] = [];
  const subnet = managementSubnet(cfg);
  if (subnet) out.push({ entry: showCidr(subnet), what: `the management subnet ${showCidr(subnet)}`, net: subnet });
  const vip = cfg.install?.mode === 'create' ? cfg.install?.vip : undefined;
  if (vip && isIPv4(vip)) out.push({ entry: vip, what: `the VIP ${vip}`, ip: vip });
  const host = cfg.install?.mode === 'join' ? serverUrlHost(cfg.serverUrl) : undefined;
  if (host) out.push({ entry: host, what: `the server_url host ${host}`, ...(isIPv4(host) ? { ip: host } : { host }) });
  return out;
}

function covered(list: string[], n: Needed): boolean {
  return list.some((raw) => {
    const e = raw.trim().toLowerCase();
    if (e === '*') return true;
    const cidr = parseCidr(e);
    if (n.net) return !!cidr && cidr.prefix <= n.net.prefix && cidrContains(cidr, showCidr(n.net).split('/')[0]!);
    if (n.ip) return e === n.ip || (!!cidr && cidrContains(cidr, n.ip));
    const host = n.host!;
    const domain = e.replace(/^\*?\./, '');
    return host === domain || host.endsWith(`.${domain}`);
  });
}

const splitList = (v: string | undefined) => (v ?? '').split(',').map((s) => s.trim()).filter(Boolean);

/** Completes no_proxy in a config that sets a proxy; mutates `cfg` and says what it added. */
export function completeNoProxy(cfg: HarvesterConfig, out: FindingList): void {
  const mode = cfg.install?.mode;
  if (mode !== 'create' && mode !== 'join') return;
  const needed = addressesBesideProxy(cfg);
  const dhcp = cfg.install?.managementInterface?.method === 'dhcp';

  const env = cfg.os?.environment;
  const keys = Object.keys(env ?? {});
  const proxyKeys = keys.filter((k) => /^https?_proxy$/i.test(k) && (env![k] ?? '').trim() !== '');
  if (env && proxyKeys.length > 0) {
    const noProxyKeys = keys.filter((k) => /^no_proxy$/i.test(k));
    const present = noProxyKeys.flatMap((k) => splitList(ownValue(env, k) as string | undefined));
    const missing = needed.filter((n) => !covered(present, n));
    if (missing.length > 0) {
      // Go reads NO_PROXY before no_proxy, curl the other way round: complete every spelling given.
      const targets = noProxyKeys.length > 0 ? noProxyKeys : [proxyKeys.every((k) => k === k.toLowerCase()) ? 'no_proxy' : 'NO_PROXY'];
      for (const k of targets) setOwn(env, k, [...splitList(ownValue(env, k) as string | undefined), ...missing.map((m) => m.entry)].join(','));
      out.warn(
        noProxyKeys.length > 0 ? `/os/environment/${noProxyKeys[0]}` : '/os/environment',
        `${noProxyKeys.length > 0 ? noProxyKeys[0] : 'no_proxy'} lacks ${missing.map((m) => m.what).join(', ')}: added to what the node gets, so it reaches ${missing.length === 1 ? 'it' : 'them'} directly and not through the proxy`,
        `add ${missing.map((m) => m.entry).join(',')} to ${targets.join(' and ')} in os.environment yourself to keep the file and the node the same`,
      );
    }
    if (dhcp) {
      out.warn('/os/environment', 'with the DHCP method the management subnet is not known before the install, so it cannot be added to no_proxy', "add the management network's CIDR to no_proxy in os.environment");
    }
  }

  const setting = mode === 'create' ? cfg.systemSettings?.['http-proxy'] : undefined;
  if (setting !== undefined) {
    let value: Record<string, unknown>;
    try {
      value = JSON.parse(setting) as Record<string, unknown>;
    } catch {
      return; // not JSON: Harvester's setting webhook says so; nothing to complete
    }
    if (!value || typeof value !== 'object' || Array.isArray(value)) return;
    const proxied = ['httpProxy', 'httpsProxy'].some((k) => typeof value[k] === 'string' && (value[k] as string).trim() !== '');
    if (!proxied) return;
    const present = splitList(typeof value.noProxy === 'string' ? value.noProxy : undefined);
    const missing = needed.filter((n) => !covered(present, n));
    if (missing.length === 0) return;
    value.noProxy = [...present, ...missing.map((m) => m.entry)].join(',');
    cfg.systemSettings!['http-proxy'] = JSON.stringify(value);
    out.warn(
      '/systemSettings/http-proxy',
      `the http-proxy setting's noProxy lacks ${missing.map((m) => m.what).join(', ')}: added, so the cluster reaches its nodes directly and not through the proxy`,
      `add ${missing.map((m) => m.entry).join(',')} to noProxy yourself to keep the file and the cluster the same`,
    );
  }
}
