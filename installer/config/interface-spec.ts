/**
 * The management-interface forms Harvester reads from the kernel command line (harvester/harvester-installer pkg/util/cmdline.go):
 * `hwAddr:MAC`, `MAC`, `name:ens3`, `ens3`, and comma-combined `hwAddr:MAC,name:ens3`.
 */
import type { NetworkInterface } from './types.js';

const MAC = /^[0-9A-Fa-f]{2}([:-][0-9A-Fa-f]{2}){5}$/;

export function parseInterfaceSpec(spec: string): NetworkInterface {
  const out: NetworkInterface = {};
  for (const rawPart of spec.split(',')) {
    const part = rawPart.trim();
    if (!part) continue;
    const m = /^(hwaddr|name)\s*:\s*(.*)$/i.exec(part);
    if (m) {
      if (m[1].toLowerCase() === 'hwaddr') out.hwAddr = m[2].trim();
      else out.name = m[2].trim();
    } else if (MAC.test(part)) out.hwAddr = part;
    else out.name = part;
  }
  return out;
}
