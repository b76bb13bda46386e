/**
 * The node identity the install recorded (/oem/hvinstall/node-identity.json, installer/render
 * identity.ts) and the address hvagent itself recorded at the first boot that had one
 * (/var/lib/rancher/hvagent/node-address.json: /var/lib/rancher persists across reboots and A/B
 * upgrades). Reading never throws: a missing or broken record is a fact to report.
 */
import { readFile } from 'node:fs/promises';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import { NODE_IDENTITY_PATH, type NodeIdentity } from '../../node/index.js';

export const SEEN_ADDRESS_PATH = '/var/lib/rancher/hvagent/node-address.json';

export interface SeenAddress {
  version: 1;
  /** The IPv4 with prefix the node had when it was recorded. */
  address: string;
  interface: string;
  recordedAt: string;
  /** first-boot: adopted before RKE2 had ever run here; install: the install's record confirmed. */
  why: 'first-boot' | 'install';
}

export type Loaded<T> = { value?: T; problem?: string };

const IPV4_CIDR = /^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/;

/** Checks the install's record by hand (a small format; each mistake names its field). Pure. */
export function parseNodeIdentity(text: string, where: string): Loaded<NodeIdentity> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return { problem: `${where} is not JSON: ${(err as Error).message}` };
  }
  const o = raw as Partial<NodeIdentity> | null;
  if (!o || typeof o !== 'object' || o.version !== 1) return { problem: `${where}: not a version 1 node identity` };
  if (typeof o.nodeName !== 'string' || typeof o.interface !== 'string' || (o.method !== 'static' && o.method !== 'dhcp')) return { problem: `${where}: nodeName, interface and method are required` };
  if (o.address !== undefined && (typeof o.address !== 'string' || !IPV4_CIDR.test(o.address))) return { problem: `${where}: address ${JSON.stringify(o.address)} is not an IPv4 address with prefix` };
  const nics = Array.isArray(o.nics) ? o.nics.filter((n) => n && typeof n === 'object').map((n) => ({ ...(typeof n.name === 'string' ? { name: n.name } : {}), ...(typeof n.mac === 'string' ? { mac: n.mac.toLowerCase() } : {}) })) : [];
  return { value: { version: 1, nodeName: o.nodeName, interface: o.interface, method: o.method, ...(o.address ? { address: o.address, addressSource: o.addressSource === 'config' ? 'config' : 'install' } : {}), nics } };
}

export function parseSeenAddress(text: string, where: string): Loaded<SeenAddress> {
  try {
    const o = JSON.parse(text) as Partial<SeenAddress>;
    if (o.version !== 1 || typeof o.address !== 'string' || !IPV4_CIDR.test(o.address) || typeof o.interface !== 'string') return { problem: `${where}: not a version 1 address record` };
    return { value: { version: 1, address: o.address, interface: o.interface, recordedAt: String(o.recordedAt ?? ''), why: o.why === 'install' ? 'install' : 'first-boot' } };
  } catch (err) {
    return { problem: `${where} is not JSON: ${(err as Error).message}` };
  }
}

async function readOptional(file: string): Promise<string | undefined> {
  return readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
}

/** A record file: absent is no value and no problem; unreadable or malformed is a problem, never a throw. */
async function loadRecord<T>(root: (p: string) => string, file: string, parse: (text: string, where: string) => Loaded<T>): Promise<Loaded<T>> {
  try {
    const text = await readOptional(root(file));
    return text === undefined ? {} : parse(text, file);
  } catch (err) {
    return { problem: `cannot read ${file}: ${(err as Error).message}` };
  }
}

export function loadNodeIdentity(root: (p: string) => string, file = NODE_IDENTITY_PATH): Promise<Loaded<NodeIdentity>> {
  return loadRecord(root, file, parseNodeIdentity);
}

export function loadSeenAddress(root: (p: string) => string, file = SEEN_ADDRESS_PATH): Promise<Loaded<SeenAddress>> {
  return loadRecord(root, file, parseSeenAddress);
}

export async function saveSeenAddress(root: (p: string) => string, seen: SeenAddress, file = SEEN_ADDRESS_PATH): Promise<void> {
  await writeFileAtomic(root(file), JSON.stringify(seen, null, 2) + '\n', { mode: 0o644 });
}
