/** Small, pure address checks shared by the rules (IPv4 only: Harvester accepts no IPv6 here). */

const IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;
const DNS1123_LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const DNS1123_SUBDOMAIN = new RegExp(`^${DNS1123_LABEL}(\\.${DNS1123_LABEL})*$`);

export function isIPv4(s: string): boolean {
  return IPV4.test(s);
}

export function ipv4ToInt(s: string): number {
  return s.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
}

export function isDns1123Subdomain(s: string): boolean {
  return s.length > 0 && s.length <= 253 && DNS1123_SUBDOMAIN.test(s);
}

/** Go's net.ParseMask-style check; returns Harvester's (net.ParseError) message or undefined. */
export function subnetMaskError(mask: string): string | undefined {
  const parts = mask.split('.');
  if (parts.length !== 4) return `invalid mask format must be x.x.x.x, instead of: ${mask}`;
  let bits = 0;
  for (const [i, p] of parts.entries()) {
    if (!/^\d+$/.test(p)) return `invalid unknown number in position ${i}: ${p}: ${mask}`;
    const n = Number(p);
    if (n > 255) return `invalid number out of range in position ${i}: ${n}: ${mask}`;
    bits = bits * 256 + n;
  }
  // Contiguous: the inverted mask plus one is a power of two.
  const inv = ~bits >>> 0;
  if ((inv & (inv + 1)) !== 0) return `invalid invalid subnet mask: not continuous: ${mask}`;
  return undefined;
}

/** An IPv4 CIDR `a.b.c.d/n`; returns [network, prefix] or undefined. */
export function parseCidr(s: string): { base: number; prefix: number } | undefined {
  const m = /^([\d.]+)\/(\d{1,2})$/.exec(s);
  if (!m || !isIPv4(m[1]) || Number(m[2]) > 32) return undefined;
  return { base: ipv4ToInt(m[1]), prefix: Number(m[2]) };
}

export function cidrContains(cidr: { base: number; prefix: number }, ip: string): boolean {
  if (cidr.prefix === 0) return true;
  const mask = (~0 << (32 - cidr.prefix)) >>> 0;
  return ((cidr.base & mask) >>> 0) === ((ipv4ToInt(ip) & mask) >>> 0);
}

/** The network of an address at a prefix length, e.g. 10.0.0.7/24 -> 10.0.0.0/24. */
export function networkOf(ip: string, prefix: number): { base: number; prefix: number } {
  const mask = prefix === 0 ? 0 : (~0 << (32 - prefix)) >>> 0;
  return { base: (ipv4ToInt(ip) & mask) >>> 0, prefix };
}

export function formatCidr(c: { base: number; prefix: number }): string {
  const b = c.base >>> 0;
  return `${[b >>> 24, (b >>> 16) & 255, (b >>> 8) & 255, b & 255].join('.')}/${c.prefix}`;
}

export function cidrsOverlap(a: { base: number; prefix: number }, b: { base: number; prefix: number }): boolean {
  const p = Math.min(a.prefix, b.prefix);
  const mask = p === 0 ? 0 : (~0 << (32 - p)) >>> 0;
  return ((a.base & mask) >>> 0) === ((b.base & mask) >>> 0);
}
