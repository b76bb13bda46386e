/**
 * Machine facts gathered by preflight and consumed by the planner and install engine.
 * Plain data: serialisable to JSON and capturable as fixtures.
 */
export type Transport = 'nvme' | 'sata' | 'sas' | 'scsi' | 'usb' | 'virtio' | 'mmc' | 'loop' | 'unknown';

export interface PartitionFacts {
  /** Machine path, e.g. /dev/nvme0n1p2. */
  path: string;
  number?: number;
  sizeBytes: number;
  label?: string;
  partLabel?: string;
  fsType?: string;
  uuid?: string;
  mountpoints: string[];
  /** /dev/disk/by-id and by-path links pointing at this partition (machine paths). Added by #3. */
  links?: string[];
  /** Holder devices (dm-*, md*) of this partition. Added by #3. */
  holders?: string[];
}

export interface DiskFacts {
  /** Kernel name, e.g. nvme0n1, sda, loop3. */
  name: string;
  /** Machine path, e.g. /dev/nvme0n1. */
  path: string;
  /** /dev/disk/by-id and by-path links pointing at this disk (machine paths). */
  links: string[];
  sizeBytes: number;
  logicalSectorSize: number;
  physicalSectorSize: number;
  transport: Transport;
  rotational: boolean;
  removable: boolean;
  readOnly: boolean;
  model?: string;
  /** As the kernel reports it (SATA disks behind libata say `ATA`); NVMe namespaces have none. */
  vendor?: string;
  serial?: string;
  wwn?: string;
  nvme?: { controller?: string; namespaceId?: number; firmware?: string };
  partitions: PartitionFacts[];
  /** Filesystem signature on the whole disk (a data disk formatted whole), if any. */
  wholeDiskFs?: { fsType?: string; label?: string; uuid?: string };
  inUse: {
    mountpoints: string[];
    swap: boolean;
    /** Holder devices (dm-*, md*) of the disk or its partitions. */
    holders: string[];
    /** This disk holds the running live medium (ISO/USB we booted from). */
    bootMedium: boolean;
  };
}

export interface NicFacts {
  name: string;
  mac?: string;
  /**
   * The NIC's own, permanent address, which names it at every boot (docs/render.md "NIC names pinned at install"):
   * a bond member's `bonding_slave/perm_hwaddr` (its `address` is the bond's, shared by every
   * member), else the driver's permanent address (`ip -j link` permaddr, printed only where it
   * differs), else `address` when the kernel says it is permanent (`addr_assign_type` 0, or not
   * readable). Absent when the address is random or assigned and no permanent one is known.
   */
  permMac?: string;
  driver?: string;
  operState?: string;
  carrier?: boolean;
  /** Mb/s; undefined when the driver reports none (virtio: -1). */
  speedMbps?: number;
  mtu?: number;
  virtual: boolean;
  loopback: boolean;
  /** Global IPv4 addresses with prefix ("10.0.0.5/24"), on the live machine only (`ip -j addr`). */
  ipv4?: string[];
}

export interface CpuFacts {
  model?: string;
  cores: number;
  threads: number;
  vmx: boolean;
  svm: boolean;
  devKvm: boolean;
}

export interface MachineFacts {
  sysroot: string;
  cpu: CpuFacts;
  memoryBytes: number;
  /**
   * Where memoryBytes came from: the installed RAM from SMBIOS type 19 (as `dmidecode -t 19`), or
   * /proc/meminfo MemTotal (a little below the installed RAM) when DMI is not readable. Added by #3.
   */
  memorySource?: 'dmi' | 'meminfo';
  firmware: { uefi: boolean; secureBoot?: boolean };
  virtualization: { isVm: boolean; hypervisor?: string };
  disks: DiskFacts[];
  nics: NicFacts[];
  /** Where partition labels and filesystem types came from (`blkid -p` on a live machine, the udev database on a sysroot). Added by #3. */
  signatureSource?: 'blkid' | 'udev' | 'none';
}
