import { describe, expect, it } from 'vitest';
import { parseMountinfo, parseProcMounts, parseSwaps } from '../../../installer/preflight/mounts.js';
import { parseBlkidExport, parseUdevDb } from '../../../installer/preflight/signatures.js';
import { hypervisorFromDmi, parseCpuinfo, parseDmiMappedRange, parseMemTotal } from '../../../installer/preflight/machine.js';
import { transportOf } from '../../../installer/preflight/disks.js';

describe('mount and swap parsers', () => {
  it('mountinfo: device numbers, octal-escaped paths, optional fields before the separator', () => {
    const text = [
      '27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw',
      '88 27 8:33 / /mnt/my\\040disk rw,relatime shared:5 master:1 - ext4 /dev/sdc1 rw',
      'garbage line',
    ].join('\n');
    expect(parseMountinfo(text)).toEqual([
      { devno: '254:0', mountpoint: '/', fsType: 'ext4', source: '/dev/vda' },
      { devno: '8:33', mountpoint: '/mnt/my disk', fsType: 'ext4', source: '/dev/sdc1' },
    ]);
  });

  it('/proc/mounts fallback and /proc/swaps', () => {
    expect(parseProcMounts('/dev/sda1 /boot ext4 rw 0 0\n')).toEqual([{ devno: '', source: '/dev/sda1', mountpoint: '/boot', fsType: 'ext4' }]);
    expect(parseSwaps('Filename Type Size Used Priority\n/dev/sdd2 partition 16 0 -2\n/swap\\040file file 8 0 -3\n')).toEqual(['/dev/sdd2', '/swap file']);
    expect(parseSwaps('Filename Type Size Used Priority\n')).toEqual([]);
  });
});

describe('signature parsers', () => {
  it('blkid -p -o export for several devices', () => {
    const text = 'DEVNAME=/dev/loop0\nPTUUID=a7\nPTTYPE=gpt\n\nDEVNAME=/dev/loop0p1\nLABEL=COS_OEM\nUUID=fd18\nTYPE=ext4\nPART_ENTRY_NAME=oem\n\nDEVNAME=/dev/loop0p2\nPART_ENTRY_NAME=\n';
    const m = parseBlkidExport(text);
    expect(m.get('/dev/loop0')).toEqual({ ptType: 'gpt' });
    expect(m.get('/dev/loop0p1')).toEqual({ fsType: 'ext4', label: 'COS_OEM', uuid: 'fd18', partLabel: 'oem' });
    expect(m.get('/dev/loop0p2')).toEqual({});
  });

  it('udev database properties', () => {
    const text = 'S:disk/by-id/ata-X\nE:ID_FS_TYPE=ext4\nE:ID_FS_LABEL=COS_STATE\nE:ID_PART_ENTRY_NAME=state\nE:ID_BUS=ata\nE:ID_SERIAL_SHORT=S1\nG:systemd\n';
    expect(parseUdevDb(text)).toEqual({ fsType: 'ext4', label: 'COS_STATE', partLabel: 'state', bus: 'ata', serial: 'S1' });
  });
});

describe('machine parsers', () => {
  it('cpuinfo: threads, cores across sockets, flags from the first CPU', () => {
    const cpu = (n: number, phys: number, core: number, flags: string) =>
      `processor\t: ${n}\nmodel name\t: X\nphysical id\t: ${phys}\ncore id\t\t: ${core}\nflags\t\t: ${flags}\n`;
    const text = [cpu(0, 0, 0, 'fpu vmx hypervisor'), cpu(1, 0, 0, 'fpu vmx'), cpu(2, 1, 0, 'fpu'), cpu(3, 1, 1, 'fpu')].join('\n');
    expect(parseCpuinfo(text)).toEqual({ model: 'X', threads: 4, cores: 3, vmx: true, svm: false, hypervisorFlag: true });
    // No topology lines (some VMs, arm): every processor counts as a core.
    expect(parseCpuinfo('processor : 0\nflags : svm\n\nprocessor : 1\nflags : svm\n')).toMatchObject({ threads: 2, cores: 2, svm: true });
    expect(parseCpuinfo('')).toMatchObject({ threads: 0, cores: 0, vmx: false, svm: false });
  });

  it('SMBIOS type-19 ranges: KiB form, 64-bit extended form, and malformed entries', () => {
    const t19 = (start: number, end: number, xs?: bigint, xe?: bigint) => {
      const b = Buffer.alloc(31);
      b[0] = 19;
      b[1] = 31;
      b.writeUInt32LE(start, 4);
      b.writeUInt32LE(end, 8);
      if (xs !== undefined && xe !== undefined) {
        b.writeBigUInt64LE(xs, 15);
        b.writeBigUInt64LE(xe, 23);
      }
      return b;
    };
    expect(parseDmiMappedRange(t19(0, 32 * 1024 * 1024 - 1))).toBe(32 * 2 ** 30);
    expect(parseDmiMappedRange(t19(0xffffffff, 0xffffffff, 0n, 6n * 2n ** 40n - 1n))).toBe(6 * 2 ** 40);
    expect(parseDmiMappedRange(Buffer.from([17, 4, 0, 0]))).toBe(0);
    expect(parseDmiMappedRange(t19(100, 10))).toBe(0);
  });

  it('MemTotal and DMI hypervisor names', () => {
    expect(parseMemTotal('MemTotal:       24684084 kB\n')).toBe(24684084 * 1024);
    expect(parseMemTotal('')).toBe(0);
    expect(hypervisorFromDmi('QEMU', 'Standard PC (Q35 + ICH9, 2009)')).toBe('kvm');
    expect(hypervisorFromDmi('VMware, Inc.', 'VMware7,1')).toBe('vmware');
    expect(hypervisorFromDmi('Microsoft Corporation', 'Virtual Machine')).toBe('microsoft');
    expect(hypervisorFromDmi('innotek GmbH', 'VirtualBox')).toBe('oracle');
    expect(hypervisorFromDmi('Dell Inc.', 'PowerEdge R750')).toBeUndefined();
  });

  it('transport from the kernel name and the sysfs device path', () => {
    expect(transportOf('nvme0n1', '')).toBe('nvme');
    expect(transportOf('vda', '')).toBe('virtio');
    expect(transportOf('loop3', '')).toBe('loop');
    expect(transportOf('mmcblk0', '')).toBe('mmc');
    expect(transportOf('sdb', '../devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sdb')).toBe('usb');
    expect(transportOf('sda', '../devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda')).toBe('sata');
    expect(transportOf('sda', '../devices/pci0000:00/0000:41:00.0/host0/port-0:0/end_device-0:0/target0:0:0/0:0:0:0/block/sda')).toBe('sas');
    expect(transportOf('sda', '../devices/pci0000:00/0000:00:05.0/virtio3/host2/target2:0:0/2:0:0:0/block/sda')).toBe('scsi');
    expect(transportOf('xvda', '')).toBe('unknown');
  });
});
