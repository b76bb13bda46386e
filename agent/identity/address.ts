/**
 * Has the node's management address changed since the cluster learned it? A pure judgement over
 * samples of the interface's addresses taken over a short window, the install's record and the
 * address hvagent recorded at the first boot. A DHCP server handing out another address after a
 * reboot turns the node into a stranger to etcd ("not a member of the etcd cluster":
 * harvester/harvester#6941, #4290, #1683); naming it before RKE2 starts saves the operator the
 * etcd log. Until RKE2 has run once nothing knows the address yet, so a first boot that got another
 * lease than the installer adopts it.
 */
import type { SeenAddress } from './record.js';

export interface AddressFacts {
  iface: string;
  method: 'static' | 'dhcp';
  /** The interface's global IPv4 addresses with prefix, sampled over the window, oldest first. */
  samples: string[][];
  /** The interface's MAC, for the DHCP reservation hint. */
  mac?: string;
  /** The install's record: the static address declared, or what DHCP gave the installer. */
  install?: { address: string; source: 'config' | 'install' };
  /** The address hvagent recorded at an earlier boot. */
  seen?: SeenAddress;
  /** RKE2 has run on this node (etcd data or a kubelet kubeconfig exist): the cluster knows the address. */
  clusterKnows: boolean;
}

export type AddressJudgement =
  | { verdict: 'ok'; text: string; address: string; record?: Pick<SeenAddress, 'address' | 'why'> }
  | { verdict: 'waiting'; text: string }
  | { verdict: 'flapping'; text: string; addresses: string[] }
  | { verdict: 'changed'; text: string; hint: string; expected: string; current: string[] };

const ipOf = (cidr: string): string => cidr.split('/')[0]!;
const key = (addrs: string[]): string => [...addrs].sort().join(' ');

/** The address sets in the order seen, empty samples (a lease lost for a moment) left out, repeats collapsed. */
function changes(samples: string[][]): string[] {
  const out: string[] = [];
  for (const s of samples) {
    const k = key(s);
    if (k !== '' && out.at(-1) !== k) out.push(k);
  }
  return out;
}

export function judgeAddress(f: AddressFacts): AddressJudgement {
  const steps = changes(f.samples);
  // A→B→A (or A→B→C) within one window: two DHCP servers answering, or a lease that is renewed wrongly.
  if (steps.length >= 3) {
    const seen = [...new Set(steps.flatMap((k) => k.split(' ')))];
    return { verdict: 'flapping', text: `the address of ${f.iface} flaps between ${seen.join(', ')}: two DHCP servers answering, or leases that keep changing? The cluster needs one stable address`, addresses: seen };
  }
  const last = f.samples.at(-1) ?? [];
  if (last.length === 0) return { verdict: 'waiting', text: `${f.iface} has no IPv4 address yet` };
  const expected = f.seen?.address ?? f.install?.address;
  const now = last.join(', ');
  if (!expected) return { verdict: 'ok', text: `${f.iface} ${now}; recorded as this node's address (first boot)`, address: last[0]!, record: { address: last[0]!, why: 'first-boot' } };

  const match = last.find((a) => ipOf(a) === ipOf(expected));
  if (match) {
    const since = f.seen ? `recorded ${f.seen.recordedAt}` : f.install?.source === 'config' ? 'the static address installed' : 'as the installer saw it';
    return { verdict: 'ok', text: `${f.iface} ${now} (${since})`, address: match, ...(f.seen ? {} : { record: { address: match, why: 'install' as const } }) };
  }
  if (f.install?.source === 'config' && !f.seen) {
    return {
      verdict: 'changed',
      text: `${f.iface} has ${now}, not the static address ${expected} this node was installed with`,
      hint: `check /etc/NetworkManager/system-connections (bridge-mgmt or vlan-mgmt: address1=${expected}) and \`nmcli connection up\` it; the cluster knows this node as ${ipOf(expected)}`,
      expected,
      current: last,
    };
  }
  if (f.method === 'dhcp' && !f.seen && !f.clusterKnows) {
    return {
      verdict: 'ok',
      text: `${f.iface} ${now} from DHCP; the installer had ${expected} (another lease for the installer's DHCP client). Recorded ${last[0]} as this node's address: RKE2 has not run yet, so nothing knew the other`,
      address: last[0]!,
      record: { address: last[0]!, why: 'first-boot' },
    };
  }
  const when = f.seen ? `recorded at its first boot, ${f.seen.recordedAt}` : 'recorded by the install';
  const mac = f.mac ? ` to ${f.mac}` : '';
  return {
    verdict: 'changed',
    text: `management address changed: ${f.iface} has ${now}${f.method === 'dhcp' ? ' from DHCP' : ''}, but the cluster knows this node as ${ipOf(expected)} (${when}). etcd and kubelet would come up on an address the other members do not know ("not a member of the etcd cluster")`,
    hint: `make the DHCP server hand ${ipOf(expected)}${mac} again (a reservation) and renew the lease (\`nmcli connection up bridge-mgmt\`), or add the address back: \`ip addr add ${expected} dev ${f.iface}\``,
    expected,
    current: last,
  };
}
