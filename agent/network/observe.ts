/**
 * Observes the management network through netlink (`ip -j`), /proc/net/route, resolv.conf and the
 * DHCP client's lease files. `netns` runs `ip -n NS` (tests put the node's interfaces in a network namespace).
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { parseDhcpLease, parseProcNetRoute, parseResolvConf, type DhcpLease, type IpAddrEntry, type IpLink, type IpRoute, type NetworkFacts } from './assess.js';

export interface ObserveOptions {
  root: (p: string) => string;
  iface: string;
  netns?: string;
  ipCommand?: string;
  /** Lease file patterns (one `*` in the file name), machine paths. */
  leaseFiles: string[];
  resolvConf: string;
  signal?: AbortSignal;
}

async function ipJson<T>(o: ObserveOptions, args: string[]): Promise<T> {
  const full = [...(o.netns ? ['-n', o.netns] : []), '-j', ...args];
  const r = await run(o.ipCommand ?? 'ip', full, { timeoutMs: 10_000 });
  const text = r.stdout.trim();
  return (text ? JSON.parse(text) : []) as T;
}

async function expand(root: (p: string) => string, pattern: string): Promise<string[]> {
  const dir = path.posix.dirname(pattern);
  const base = path.posix.basename(pattern);
  if (!base.includes('*')) return [pattern];
  const re = new RegExp(`^${base.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
  const names = await readdir(root(dir)).catch(() => [] as string[]);
  return names.filter((n) => re.test(n)).map((n) => path.posix.join(dir, n));
}

/** The newest lease (by file mtime) any known DHCP client recorded for the interface. */
export async function findDhcpLease(o: Pick<ObserveOptions, 'root' | 'leaseFiles' | 'iface'>): Promise<DhcpLease | undefined> {
  let best: { lease: DhcpLease; mtime: number } | undefined;
  for (const pattern of o.leaseFiles) {
    for (const file of await expand(o.root, pattern)) {
      const real = o.root(file);
      const [text, st] = await Promise.all([readFile(real, 'utf8').catch(() => undefined), stat(real).catch(() => undefined)]);
      if (text === undefined || !st) continue;
      const lease = parseDhcpLease(text, file, o.iface);
      if (lease && (!best || st.mtimeMs > best.mtime)) best = { lease, mtime: st.mtimeMs };
    }
  }
  return best?.lease;
}

export async function observeNetwork(o: ObserveOptions): Promise<NetworkFacts> {
  // `ip -d addr show` prints each link as `ip -d link show` does (iproute2's one print_linkinfo)
  // plus its addresses: one process a look for both, which the guard takes every second while
  // the node boots.
  // The default routes from /proc/net/route, the main table as the kernel prints it (what
  // `ip -4 route show default` asks over netlink): one process a look fewer. For another network
  // namespace (`netns`, tests) `ip -n NS` asks.
  const [interfaces, defaultRoutes, resolv, lease] = await Promise.all([
    ipJson<Array<IpLink & IpAddrEntry>>(o, ['-d', 'addr', 'show']),
    o.netns ? ipJson<IpRoute[]>(o, ['-4', 'route', 'show', 'default']) : readFile('/proc/net/route', 'utf8').then(parseProcNetRoute),
    readFile(o.root(o.resolvConf), 'utf8').catch(() => ''),
    findDhcpLease(o),
  ]);
  return { links: interfaces, addrs: interfaces, defaultRoutes, nameservers: parseResolvConf(resolv), lease };
}
