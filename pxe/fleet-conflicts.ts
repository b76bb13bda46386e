/**
 * Conflicts between the machines of one profiles.yaml that each config alone cannot show, found on
 * the configs as the installer will see them (validated and normalised): two machines with the same
 * static address, a machine whose address is a cluster's VIP, a join node whose server_url is its own
 * address, one NIC (hardware address) configured on two machines. Each message names both machines.
 * hvpxe refuses to start (or to reload) on any of them: served, each is a cluster that never forms
 * or a node that takes another's address. Pure.
 */
import type { HarvesterConfig } from '../config/types.js';

/** What the checks read of one machine's config. */
export interface FleetFacts {
  machine: string;
  /** The static management address, when the method is static. */
  ip?: string;
  /** The VIP this machine creates (create mode). */
  vip?: string;
  mode?: string;
  /** The host of server_url (join mode). */
  serverHost?: string;
  hwAddrs: string[];
}

/** A URL's host as an address compares (an IPv6 host without its brackets). */
function hostOf(url: string | undefined): string | undefined {
  return url !== undefined && URL.canParse(url) ? new URL(url).hostname.replace(/[[\]]/g, '') : undefined;
}

/** The facts of one machine's config. Pure. */
export function fleetFacts(machine: string, cfg: HarvesterConfig): FleetFacts {
  const mi = cfg.install?.managementInterface;
  const ip = mi?.method === 'static' && mi.ip ? mi.ip.split('/')[0] : undefined;
  const hwAddrs = (mi?.interfaces ?? []).map((i) => i.hwAddr?.toLowerCase().replace(/-/g, ':')).filter((h): h is string => !!h);
  return { machine, ip, vip: cfg.install?.mode === 'create' ? cfg.install?.vip : undefined, mode: cfg.install?.mode, serverHost: hostOf(cfg.serverUrl), hwAddrs };
}

/** Every value claimed by two machines: `what` names the value in the message. */
function duplicates(facts: FleetFacts[], values: (f: FleetFacts) => string[], what: string): string[] {
  const owner = new Map<string, string>();
  const out: string[] = [];
  for (const f of facts) {
    // A value listed twice by one machine counts once.
    for (const v of new Set(values(f))) {
      const first = owner.get(v);
      if (first === undefined) owner.set(v, f.machine);
      else out.push(`machines ${first} and ${f.machine} both have ${what} ${v}`);
    }
  }
  return out;
}

/** Every conflict between the machines' configs, each naming both machines. Pure. */
export function fleetConflicts(facts: FleetFacts[]): string[] {
  const out = [...duplicates(facts, (f) => (f.ip ? [f.ip] : []), 'the static address'), ...duplicates(facts, (f) => f.hwAddrs, 'a management interface with hardware address')];
  for (const f of facts) {
    if (!f.ip) continue;
    for (const v of facts) {
      if (v.vip === f.ip) out.push(`machine ${f.machine}'s static address ${f.ip} is the VIP that machine ${v.machine} creates${v.machine === f.machine ? ' (a node cannot be its own cluster VIP)' : ''}`);
    }
    if (f.mode === 'join' && f.serverHost === f.ip) {
      out.push(`machine ${f.machine} joins the cluster at its own address ${f.ip} (server_url): a join node needs the VIP or a management node of an existing cluster`);
    }
  }
  return out;
}
