/**
 * The management-interface forms Harvester reads from the kernel command line
 * (harvester/harvester-installer pkg/util/cmdline.go parseIfDetails): `hwAddr: MAC`, `MAC`,
 * `name: ens3`, `ens3`, and comma-combined `hwAddr:MAC,name:ens3` (the last value of a field wins).
 * Each comma part is split on ':' (parts trimmed): 7 parts are `hwAddr` and a MAC, 6 a MAC, 2
 * `name` and a name, 1 a name; anything else is Harvester's "could not parse interface details".
 * Beyond Harvester: the keys are matched without case, a lone hyphenated MAC is a MAC (Harvester
 * takes it for an interface name that then does not exist), and empty parts are skipped.
 */
import type { NetworkInterface } from './types.js';

const HYPHEN_MAC = /^[0-9A-Fa-f]{2}(-[0-9A-Fa-f]{2}){5}$/;

export type InterfaceSpec = { spec: NetworkInterface } | { error: string };

export function parseInterfaceSpec(details: string): InterfaceSpec {
  if (details === '') return { error: 'empty interface details' };
  const out: NetworkInterface = {};
  const unparsable = { error: `could not parse interface details ${details}` };
  for (const field of details.split(',')) {
    const sub = field.split(':').map((s) => s.trim());
    if (sub.length === 1 && sub[0] === '') continue;
    if (sub.length === 7 || sub.length === 6) {
      if (sub.length === 7 && sub[0]!.toLowerCase() !== 'hwaddr') return unparsable;
      const octets = sub.slice(sub.length - 6);
      const mac = octets.join(':');
      // What Go's net.ParseMAC accepts of a colon-separated 6-octet address.
      if (!octets.every((o) => /^[0-9A-Fa-f]{2}$/.test(o))) return { error: `could not parse interface details: address ${mac}: invalid MAC address` };
      out.hwAddr = mac;
    } else if (sub.length === 2) {
      if (sub[0]!.toLowerCase() !== 'name') return unparsable;
      out.name = sub[1];
    } else if (sub.length === 1) {
      if (HYPHEN_MAC.test(sub[0]!)) out.hwAddr = sub[0];
      else out.name = sub[0];
    } else return unparsable;
  }
  return { spec: out };
}
