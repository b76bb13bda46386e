/**
 * The management interface's IPv4 addresses as the agent saw them over time, per node root.
 * network-online looks at the interface every second while the node boots and node-identity then
 * judges the address over a window of samples: the looks network-online took count toward that
 * window, so the address is not sampled a second time, for seconds, after the network is up.
 */
import type { IpAddrEntry } from '../network/assess.js';

export interface AddressSample {
  at: number;
  addrs: string[];
}

/** Samples older than this are dropped whatever a reader asks (node-identity's history is 2 min). */
const KEEP_MS = 10 * 60_000;

const store = new Map<string, AddressSample[]>();

/** The interface's global, settled IPv4 addresses as `address/prefix`, from `ip -j addr` entries. Pure. */
export function globalIPv4(entries: IpAddrEntry[], iface: string): string[] {
  const e = entries.find((x) => x.ifname === iface);
  return (e?.addr_info ?? []).filter((a) => (a.family ?? 'inet') === 'inet' && a.local && a.scope === 'global' && !a.tentative).map((a) => `${a.local}/${a.prefixlen}`);
}

/** Records one look at `iface` on the node under `root`. */
export function recordAddressSample(root: string, iface: string, at: number, addrs: string[]): void {
  const key = `${root}\0${iface}`;
  const kept = (store.get(key) ?? []).filter((s) => at - s.at <= KEEP_MS);
  kept.push({ at, addrs });
  store.set(key, kept);
}

/** The samples of `iface` taken at `since` or later, oldest first. */
export function addressSamples(root: string, iface: string, since: number): AddressSample[] {
  return (store.get(`${root}\0${iface}`) ?? []).filter((s) => s.at >= since);
}

/**
 * When a judgement of the address may be made: `windowMs` after the first sample of the latest
 * unbroken run of samples that had an address (a look with none starts the run again), and never
 * before `now`. With no address seen yet, `windowMs` from now. Pure.
 */
export function addressWindowEnd(samples: AddressSample[], now: number, windowMs: number): number {
  let runStart: number | undefined;
  for (const s of samples) {
    if (s.addrs.length === 0) runStart = undefined;
    else runStart ??= s.at;
  }
  return runStart === undefined ? now + windowMs : Math.max(now, runStart + windowMs);
}
