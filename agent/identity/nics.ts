/**
 * NICs of the management bond as the install recorded them (name and MAC) against the links the
 * kernel has now. A NIC renamed after a reboot (another PCI slot order, a firmware update:
 * harvester/harvester#4591, #6808) no longer matches NetworkManager's bond-slave-<name> profile,
 * which binds both the name and the MAC, so the bond comes up without it; saying "ens3 is now ens5
 * (52:54:00:12:34:56)" beats "slave not enslaved". Pure.
 */

export interface DeclaredNic {
  name?: string;
  mac?: string;
}

/** A link's name and its own (permanent) MAC: a bond slave shows the bond's MAC as its address. */
export interface LinkIdentity {
  ifname: string;
  mac?: string;
}

export type NicChange =
  | { kind: 'renamed'; was: string; now: string; mac: string }
  | { kind: 'gone'; was?: string; mac?: string }
  | { kind: 'unchanged'; name: string; mac?: string };

const lower = (m: string | undefined): string | undefined => m?.trim().toLowerCase() || undefined;

export function nicChanges(declared: readonly DeclaredNic[], links: readonly LinkIdentity[]): NicChange[] {
  return declared.map((d) => {
    const mac = lower(d.mac);
    if (mac) {
      // The MAC decides: after a swap the declared name may belong to another NIC now.
      const same = links.filter((l) => lower(l.mac) === mac);
      const byMac = same.find((l) => l.ifname === d.name) ?? same[0];
      if (!byMac) return { kind: 'gone', was: d.name, mac };
      if (!d.name || byMac.ifname === d.name) return { kind: 'unchanged', name: byMac.ifname, mac };
      return { kind: 'renamed', was: d.name, now: byMac.ifname, mac };
    }
    return d.name && links.some((l) => l.ifname === d.name) ? { kind: 'unchanged', name: d.name } : { kind: 'gone', was: d.name };
  });
}

/** One sentence per renamed or missing NIC, for a diagnosis. */
export function describeNicChanges(changes: readonly NicChange[], bond = 'mgmt-bo'): string[] {
  const out: string[] = [];
  for (const c of changes) {
    if (c.kind === 'renamed') {
      out.push(`NIC ${c.was} (${c.mac}) is now named ${c.now}: NetworkManager's profile bond-slave-${c.was} binds the name ${c.was}, so ${c.now} is not enslaved to ${bond}`);
    } else if (c.kind === 'gone') {
      out.push(`NIC ${c.was ?? c.mac} ${c.was && c.mac ? `(${c.mac}) ` : ''}is not on this machine any more (no link with ${c.mac ? 'that MAC' : 'that name'})`);
    }
  }
  return out;
}

/** The hint for renamed NICs: pin the names, or point the profiles at the new ones. */
export function nicRenameHint(changes: readonly NicChange[]): string | undefined {
  const renamed = changes.filter((c): c is Extract<NicChange, { kind: 'renamed' }> => c.kind === 'renamed');
  if (renamed.length === 0) return undefined;
  const r = renamed[0]!;
  return `pin the name with a systemd .link file (MACAddress=${r.mac}, Name=${r.was}) in /etc/systemd/network and reboot, or set interface-name=${r.now} in /etc/NetworkManager/system-connections/bond-slave-${r.was}.nmconnection and run \`nmcli connection reload\``;
}
