/**
 * NIC names pinned at install: `ifname=<name>:<permanent MAC>` in the kernel arguments the image's
 * grub.cfg reads (`third_party_kernel_args` in /oem/grubenv) for every interface the management
 * network uses, so a kernel or driver that renames NICs (SL Micro 6: `enp6s0f0` → `enp6s0f0np0`,
 * harvester/harvester#9802, #9815) cannot take the node's management network away. Harvester pins
 * names by MAC only when it upgrades (harvester/harvester#9877, #10398); dracut and
 * systemd-network-generator read `ifname=` (dracut.cmdline(7)). A bond member is pinned by its own
 * permanent address, never the bond's shared one. Pure.
 */
import type { HarvesterConfig } from '../../config/types.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import { permanentMacOf, resolveSlaves } from './network.js';
import type { RenderFacts } from './types.js';

export interface NicPin {
  name: string;
  /** Lowercase permanent MAC. */
  mac: string;
}

export interface NicPinning {
  pins: NicPin[];
  warnings: string[];
}

const IFNAME_ARG = /^ifname=([^:\s]+):((?:[0-9a-f]{2}:){5}[0-9a-f]{2})$/i;
// The kernel's own names: dracut.cmdline(7) warns that pinning one can collide with the kernel's naming.
const KERNEL_NAME = /^eth[0-9]+$/;

/** The pins for the config's management interfaces on this machine; none when the machine's NICs are not known. */
export function nicPins(config: HarvesterConfig, facts: RenderFacts): NicPinning {
  const mi = config.install?.managementInterface;
  const nics = facts.nics ?? [];
  if (!mi || nics.length === 0) return { pins: [], warnings: [] };
  const pins: NicPin[] = [];
  const warnings: string[] = [];
  for (const slave of resolveSlaves(mi, facts)) {
    const nic = nics.find((n) => n.name === slave.name);
    const mac = nic ? permanentMacOf(nic) : undefined;
    if (!nic || !mac) {
      warnings.push(`the name of management interface ${slave.name ?? slave.mac} is not pinned: its permanent MAC is not known (a random or assigned address), so a kernel that renames it takes the management network away`);
      continue;
    }
    const twin = pins.find((p) => p.mac === mac);
    if (twin) {
      throw new HvError(`management interfaces ${twin.name} and ${nic.name} report the same permanent MAC ${mac}: pinning either name by it would name the other too`, {
        where: 'install.management_interface.interfaces',
        hint: 'a bond member reports the bond\'s address: read each NIC\'s own from /sys/class/net/<nic>/bonding_slave/perm_hwaddr, or install with the bond down',
        exitCode: ExitCode.checkFailed,
      });
    }
    pins.push({ name: nic.name, mac });
    if (KERNEL_NAME.test(nic.name) && nics.length > 1) {
      warnings.push(`management interface ${nic.name} is pinned by a name the kernel itself gives: on a machine with several NICs the kernel may give ${nic.name} to another NIC first and the rename then fails (dracut.cmdline(7)); a name of your own (mgmt0) avoids it`);
    }
  }
  return { pins, warnings };
}

/**
 * The kernel arguments with the pins added: an `ifname=` already there for the same name and MAC
 * stays once; one that gives a pinned name to another MAC, or a pinned MAC another name, is a
 * contradiction the node would boot without its management network with, so it is refused.
 */
export function withNicPins(kernelArgs: string, pins: NicPin[]): string {
  const args = kernelArgs.split(/\s+/).filter(Boolean);
  const given = args.map((a) => IFNAME_ARG.exec(a)).filter((m): m is RegExpExecArray => m !== null).map((m) => ({ name: m[1]!, mac: m[2]!.toLowerCase() }));
  for (const pin of pins) {
    const clash = given.find((g) => (g.name === pin.name) !== (g.mac === pin.mac));
    if (clash) {
      throw new HvError(`os.additional_kernel_arguments has ifname=${clash.name}:${clash.mac}, but management interface ${pin.name} has the permanent MAC ${pin.mac}`, {
        where: 'os.additional_kernel_arguments',
        hint: `remove that ifname= (hvinstall pins ${pin.name} itself) or make it name the same NIC`,
        exitCode: ExitCode.checkFailed,
      });
    }
    if (!given.some((g) => g.name === pin.name)) args.push(`ifname=${pin.name}:${pin.mac}`);
  }
  return args.join(' ');
}
