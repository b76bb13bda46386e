import { describe, expect, it } from 'vitest';
import { resolveDevice, resolveLocated } from '../../../installer/preflight/index.js';
import { fixtureFacts, fixtureHost } from './helpers.js';

const GB = 1e9;

describe('gatherMachineFacts on fixture sysroots', () => {
  it('production NVMe server: CPUs, memory, UEFI + Secure Boot, bare metal', async () => {
    const f = await fixtureFacts('prod-nvme');
    expect(f.cpu).toMatchObject({ threads: 128, cores: 64, vmx: true, svm: false, devKvm: true });
    expect(f.cpu.model).toContain('Xeon');
    // Installed RAM from the two SMBIOS type-19 ranges, not MemTotal.
    expect(f.memoryBytes).toBe(512 * 2 ** 30);
    expect(f.memorySource).toBe('dmi');
    expect(f.firmware).toEqual({ uefi: true, secureBoot: true });
    expect(f.virtualization).toEqual({ isVm: false, hypervisor: undefined });
    expect(f.signatureSource).toBe('udev');
  });

  it('production NVMe server: NVMe disks with size, sectors, identity, links and the live CD as boot medium', async () => {
    const f = await fixtureFacts('prod-nvme');
    expect(f.disks.map((d) => d.name)).toEqual(['nvme0n1', 'nvme1n1', 'sr0']);
    const n0 = f.disks[0];
    expect(n0).toMatchObject({
      path: '/dev/nvme0n1',
      sizeBytes: Math.floor(1.6e12 / 512) * 512,
      logicalSectorSize: 512,
      physicalSectorSize: 512,
      transport: 'nvme',
      rotational: false,
      removable: false,
      readOnly: false,
      model: 'Dell Ent NVMe P5600 MU U.2 1.6TB',
      serial: 'PHAB012300000',
      wwn: 'eui.3634473052b00000',
      nvme: { controller: 'nvme0', namespaceId: 1, firmware: 'GDC5302Q' },
      partitions: [],
      inUse: { mountpoints: [], swap: false, holders: [], bootMedium: false },
    });
    expect(n0.links).toEqual([
      '/dev/disk/by-id/nvme-Dell_Ent_NVMe_P5600_MU_U.2_1.6TB_PHAB012300000',
      '/dev/disk/by-id/nvme-eui.3634473052b00000',
      '/dev/disk/by-path/pci-0000:30:00.0-nvme-1',
    ]);
    const sr0 = f.disks[2];
    expect(sr0).toMatchObject({ transport: 'usb', removable: true, readOnly: true, wholeDiskFs: { fsType: 'iso9660', label: 'COS_LIVE' } });
    expect(sr0.inUse).toMatchObject({ mountpoints: ['/run/initramfs/live'], bootMedium: true });
  });

  it('production NVMe server: NICs with MAC, driver, state, speed; loopback marked', async () => {
    const f = await fixtureFacts('prod-nvme');
    expect(f.nics).toEqual([
      { name: 'ens1f0np0', mac: 'b8:ce:f6:10:00:01', permMac: 'b8:ce:f6:10:00:01', driver: 'mlx5_core', operState: 'up', carrier: true, speedMbps: 25000, mtu: 1500, virtual: false, loopback: false },
      { name: 'ens1f1np1', mac: 'b8:ce:f6:10:00:02', permMac: 'b8:ce:f6:10:00:02', driver: 'mlx5_core', operState: 'up', carrier: true, speedMbps: 25000, mtu: 1500, virtual: false, loopback: false },
      { name: 'lo', mac: '00:00:00:00:00:00', driver: undefined, operState: 'unknown', carrier: true, speedMbps: undefined, mtu: 65536, virtual: true, loopback: true },
    ]);
  });

  it('lab VM: hypervisor flag and QEMU DMI give kvm; no vmx/svm, no /dev/kvm; virtio disk and NIC without speed', async () => {
    const f = await fixtureFacts('lab-vm');
    expect(f.cpu).toMatchObject({ threads: 4, cores: 4, vmx: false, svm: false, devKvm: false });
    expect(f.virtualization).toEqual({ isVm: true, hypervisor: 'kvm' });
    expect(f.firmware).toEqual({ uefi: true, secureBoot: false });
    expect(f).toMatchObject({ memoryBytes: Math.floor((16 * 2 ** 30 * 0.97) / 1024) * 1024, memorySource: 'meminfo' });
    expect(f.disks.map((d) => d.name)).toEqual(['sr0', 'vda']);
    expect(f.disks[1]).toMatchObject({ name: 'vda', transport: 'virtio', rotational: true, serial: 'lab-disk-0', sizeBytes: 300 * 2 ** 30 });
    expect(f.disks[0]).toMatchObject({ name: 'sr0', transport: 'sata', inUse: { bootMedium: true } });
    expect(f.nics[0]).toMatchObject({ name: 'enp1s0', driver: 'virtio_net', speedMbps: undefined });
  });

  it('legacy BIOS box: no /sys/firmware/efi, SATA disks, rotational HDD', async () => {
    const f = await fixtureFacts('legacy-bios');
    expect(f.firmware).toEqual({ uefi: false });
    expect(f.disks.map((d) => [d.name, d.transport, d.rotational])).toEqual([
      ['sda', 'sata', false],
      ['sdb', 'sata', true],
    ]);
    expect(f.disks[0]).toMatchObject({ model: 'Samsung SSD 860 PRO 512GB', serial: 'SSDA000', wwn: 'naa.5000c5001000000' });
    expect(f.disks.every((d) => !d.inUse.bootMedium)).toBe(true);
  });

  it('USB boot: the stick is usb, removable and the boot medium (mounted live + COS_LIVE); the small disk is free', async () => {
    const f = await fixtureFacts('usb-boot');
    const [sda, sdb] = f.disks;
    expect(sda).toMatchObject({ name: 'sda', sizeBytes: Math.floor(120e9 / 512) * 512, inUse: { bootMedium: false, mountpoints: [] } });
    expect(sdb).toMatchObject({ name: 'sdb', transport: 'usb', removable: true, model: 'DataTraveler 3.0', serial: '408D5C1EA1B2' });
    expect(sdb.inUse).toEqual({ mountpoints: ['/run/initramfs/live'], swap: false, holders: [], bootMedium: true });
    expect(f.nics.find((n) => n.name === 'enp6s0')).toMatchObject({ operState: 'down', carrier: false, speedMbps: undefined });
  });

  it('4Kn: logical and physical sector size 4096, SAS transport, WWN', async () => {
    const f = await fixtureFacts('4kn');
    expect(f.disks[0]).toMatchObject({ name: 'sda', transport: 'sas', logicalSectorSize: 4096, physicalSectorSize: 4096, wwn: 'naa.5002538b00000001' });
    expect(f.disks[0].sizeBytes).toBe(Math.floor(1.6e12 / 512) * 512);
    // SMBIOS 2.7 extended (64-bit) range.
    expect(f).toMatchObject({ memoryBytes: 128 * 2 ** 30, memorySource: 'dmi' });
  });

  it('old install: partitions with labels, whole-disk fs label, LVM holders, mounts and swap', async () => {
    const f = await fixtureFacts('old-install');
    const by = (n: string) => f.disks.find((d) => d.name === n)!;
    expect(by('sda').partitions.map((p) => [p.path, p.number, p.label, p.partLabel, p.fsType])).toEqual([
      ['/dev/sda1', 1, 'COS_GRUB', 'efi', 'vfat'],
      ['/dev/sda2', 2, 'COS_OEM', 'oem', 'ext4'],
      ['/dev/sda3', 3, 'COS_RECOVERY', 'recovery', 'ext4'],
      ['/dev/sda4', 4, 'COS_STATE', 'state', 'ext4'],
      ['/dev/sda5', 5, 'COS_PERSISTENT', 'persistent', 'ext4'],
      ['/dev/sda6', 6, 'HARV_LH_DEFAULT', 'longhorn', 'ext4'],
    ]);
    expect(by('sda').partitions[1].sizeBytes).toBe(50 * 2 ** 20);
    expect(by('sda').partitions[0].links).toEqual(['/dev/disk/by-id/ata-MTFDDAK480TDS_SSDA000-part1']);
    expect(by('sdb').wholeDiskFs).toEqual({ fsType: 'ext4', label: 'HARV_LH_DEFAULT', uuid: undefined });
    expect(by('sdc').inUse.holders).toEqual(['dm-0']);
    expect(by('sdc').partitions[0].holders).toEqual(['dm-0']);
    expect(by('sdd').inUse).toEqual({ mountpoints: ['/mnt/scratch'], swap: true, holders: [], bootMedium: false });
    expect(by('sdd').partitions[0].mountpoints).toEqual(['/mnt/scratch']);
    expect(by('nvme0n1').inUse).toEqual({ mountpoints: [], swap: false, holders: [], bootMedium: false });
  });

  it('an empty sysroot gives empty facts instead of throwing', async () => {
    const { mkdtemp, rm } = await import('node:fs/promises');
    const os = await import('node:os');
    const dir = await mkdtemp(`${os.tmpdir()}/hv-empty-sysroot-`);
    try {
      const { gatherMachineFacts } = await import('../../../installer/preflight/index.js');
      const { Host } = await import('../../../lib/host.js');
      const f = await gatherMachineFacts(new Host(dir));
      expect(f).toMatchObject({ cpu: { threads: 0, cores: 0, vmx: false, svm: false, devKvm: false }, memoryBytes: 0, disks: [], nics: [], firmware: { uefi: false } });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('resolveDevice', () => {
  it('resolves /dev paths, by-id and by-path links to the whole disk', async () => {
    const f = await fixtureFacts('prod-nvme');
    const host = fixtureHost('prod-nvme');
    for (const name of ['/dev/nvme1n1', '/dev/disk/by-id/nvme-eui.3634473052b00001', '/dev/disk/by-path/pci-0000:31:00.0-nvme-1']) {
      expect((await resolveDevice(f, name, host))?.path).toBe('/dev/nvme1n1');
    }
  });

  it('follows a link the facts do not list, under the sysroot (not the real /dev)', async () => {
    const { cp, mkdtemp, mkdir, rm, symlink } = await import('node:fs/promises');
    const os = await import('node:os');
    const { Host } = await import('../../../lib/host.js');
    const { gatherMachineFacts } = await import('../../../installer/preflight/index.js');
    // A copy of the fixture, so the committed tree is never written.
    const root = await mkdtemp(`${os.tmpdir()}/hv-preflight-links-`);
    try {
      await cp(fixtureHost('old-install').sysroot, root, { recursive: true, verbatimSymlinks: true });
      const host = new Host(root);
      await mkdir(host.path('/dev/disk/by-label'), { recursive: true });
      await symlink('../../sdb', host.path('/dev/disk/by-label/longhorn-old'));
      const f = await gatherMachineFacts(host);
      expect((await resolveDevice(f, '/dev/disk/by-label/longhorn-old', host))?.path).toBe('/dev/sdb');
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it('a partition is not a disk; resolveLocated tells which disk it belongs to', async () => {
    const f = await fixtureFacts('old-install');
    const host = fixtureHost('old-install');
    expect(await resolveDevice(f, '/dev/sda2', host)).toBeUndefined();
    const loc = await resolveLocated(f, '/dev/disk/by-id/ata-MTFDDAK480TDS_SSDA000-part2', host);
    expect(loc?.disk.path).toBe('/dev/sda');
    expect(loc?.partition?.path).toBe('/dev/sda2');
  });

  it('unknown names resolve to nothing', async () => {
    const f = await fixtureFacts('prod-nvme');
    const host = fixtureHost('prod-nvme');
    expect(await resolveDevice(f, '/dev/sdz', host)).toBeUndefined();
    expect(await resolveDevice(f, '/dev/disk/by-id/does-not-exist', host)).toBeUndefined();
    expect(await resolveDevice(f, 'nvme0n1', host)).toBeUndefined();
  });
});

// Sizes in the fixtures are decimal GB as sold; the facts keep bytes.
void GB;
