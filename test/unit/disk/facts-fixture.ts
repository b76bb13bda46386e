/** Builders of MachineFacts/DiskFacts for planner tests (plain data, as preflight gathers it). */
import type { DiskFacts, MachineFacts } from '../../../installer/preflight/types.js';

export const GiB = 1024 ** 3;

export function disk(name: string, sizeGiB: number, extra: Partial<DiskFacts> = {}): DiskFacts {
  return {
    name,
    path: `/dev/${name}`,
    links: [`/dev/disk/by-id/virtio-${name}`],
    sizeBytes: sizeGiB * GiB,
    logicalSectorSize: 512,
    physicalSectorSize: 512,
    transport: 'virtio',
    rotational: false,
    removable: false,
    readOnly: false,
    partitions: [],
    inUse: { mountpoints: [], swap: false, holders: [], bootMedium: false },
    ...extra,
  };
}

export function machine(disks: DiskFacts[], uefi = true): MachineFacts {
  return {
    sysroot: '/',
    cpu: { cores: 8, threads: 16, vmx: true, svm: false, devKvm: true },
    memoryBytes: 64 * GiB,
    firmware: { uefi },
    virtualization: { isVm: false },
    disks,
    nics: [],
  };
}
