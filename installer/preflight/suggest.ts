/** Which disk to install onto when no config names one. Pure. */
import type { DiskFacts, MachineFacts } from './types.js';

/** A disk that could take an install right now: a fixed, writable, unused local disk. */
export function isInstallCandidate(d: DiskFacts): boolean {
  return (
    !d.removable &&
    !d.readOnly &&
    d.transport !== 'usb' &&
    d.transport !== 'loop' &&
    !/^sr/.test(d.name) &&
    !d.inUse.bootMedium &&
    d.inUse.mountpoints.length === 0 &&
    !d.inUse.swap &&
    d.inUse.holders.length === 0 &&
    d.sizeBytes > 0
  );
}

/** NVMe first, then solid-state, then the largest (ties: kernel name, for a stable answer). */
export function suggestInstallDevice(facts: MachineFacts): DiskFacts | undefined {
  return facts.disks
    .filter(isInstallCandidate)
    .sort(
      (a, b) =>
        Number(b.transport === 'nvme') - Number(a.transport === 'nvme') ||
        Number(a.rotational) - Number(b.rotational) ||
        b.sizeBytes - a.sizeBytes ||
        a.name.localeCompare(b.name),
    )[0];
}
