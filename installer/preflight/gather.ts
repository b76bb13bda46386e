/** gatherMachineFacts: everything preflight and the installer need to know about this machine. */
import { Host } from '../../lib/host.js';
import type { MachineFacts } from './types.js';
import { gatherDisks } from './disks.js';
import { gatherCpu, gatherFirmware, gatherNics, gatherVirtualization, parseMemTotal, readDmiMemory } from './machine.js';

export interface GatherOptions {
  /**
   * How partition labels and filesystem types are read. `blkid` runs `blkid -p` on the devices (only
   * meaningful on the live machine); `udev` reads `/run/udev/data` under the sysroot. Default: blkid
   * when the sysroot is `/`, udev otherwise.
   */
  signatures?: 'blkid' | 'udev';
}

export async function gatherMachineFacts(host: Host, opts: GatherOptions = {}): Promise<MachineFacts> {
  const signatures = opts.signatures ?? (host.sysroot === '/' ? 'blkid' : 'udev');
  const [{ cpu, hypervisorFlag }, meminfo, dmiMemory, firmware, disks, nics] = await Promise.all([
    gatherCpu(host),
    host.readText('/proc/meminfo'),
    readDmiMemory(host),
    gatherFirmware(host),
    gatherDisks(host, { signatures }),
    gatherNics(host),
  ]);
  return {
    sysroot: host.sysroot,
    cpu,
    // As Harvester: the installed RAM from DMI, MemTotal only when DMI is not readable (VMs, non-root).
    memoryBytes: dmiMemory ?? parseMemTotal(meminfo ?? ''),
    memorySource: dmiMemory !== undefined ? 'dmi' : 'meminfo',
    firmware,
    virtualization: await gatherVirtualization(host, hypervisorFlag),
    disks: disks.disks,
    nics,
    signatureSource: disks.signatureSource,
  };
}
