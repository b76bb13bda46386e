// Device, data disk and NIC checks driven by a config (HarvesterConfig objects built here).
import { describe, expect, it } from 'vitest';
import type { HarvesterConfig } from '../../../config/types.js';
import { runPreflightChecks } from '../../../installer/preflight/index.js';
import { check, fixtureFacts, outcomes, preflightOf } from './helpers.js';
import { disk, machine } from '../disk/facts-fixture.js';

function cfg(install: HarvesterConfig['install']): HarvesterConfig {
  return { schemeVersion: 1, install: { mode: 'create', ...install } };
}

describe('install device from the config', () => {
  it('by-id link to the NVMe passes every device check; no suggestion is made', async () => {
    const r = await preflightOf('prod-nvme', 'production', cfg({ device: '/dev/disk/by-id/nvme-eui.3634473052b00000' }));
    expect(outcomes(r).filter((o) => o.startsWith('device.'))).toEqual([
      'device.exists /dev/disk/by-id/nvme-eui.3634473052b00000: pass',
      'device.boot-medium /dev/nvme0n1: pass',
      'device.writable /dev/nvme0n1: pass',
      'device.not-mounted /dev/nvme0n1: pass',
      'device.holders /dev/nvme0n1: pass',
      'device.size /dev/nvme0n1: pass',
      'device.media /dev/nvme0n1: pass',
      'device.sector-size /dev/nvme0n1: pass',
    ]);
    expect(r.installDevice).toBe('/dev/nvme0n1');
    expect(r.suggestedDevice).toBeUndefined();
    expect(check(r, 'device.exists').message).toBe('/dev/disk/by-id/nvme-eui.3634473052b00000 is /dev/nvme0n1.');
  });

  it('a missing device fails with Harvester\'s message and lists the disks', async () => {
    const r = await preflightOf('prod-nvme', 'testing', cfg({ device: '/dev/sdx' }));
    expect(check(r, 'device.exists')).toMatchObject({
      result: 'fail',
      message: 'device not found: /dev/sdx',
      whatToDo: 'Set install.device to one of: /dev/nvme0n1, /dev/nvme1n1 (1 other disk is removable, USB, a loop device, the boot medium or in use).',
      skippable: false,
    });
    expect(r.checks.some((c) => c.id === 'device.size')).toBe(false);
  });

  it('never offers a disk mounted at /, a loop device or a virtual NIC as the thing to use instead', () => {
    const root = disk('vda', 256, { inUse: { mountpoints: ['/'], swap: false, holders: [], bootMedium: false } });
    const facts = machine([root, disk('loop0', 260, { transport: 'loop' })]);
    facts.nics = [
      { name: 'eth0', mac: '02:fc:00:00:00:01', virtual: false, loopback: false, operState: 'up', carrier: true },
      { name: 'ifb0', mac: '3a:fa:1b:91:31:1c', virtual: true, loopback: false },
      { name: 'ifb1', mac: 'ba:63:ba:10:1b:0b', virtual: true, loopback: false },
      { name: 'lo', mac: '00:00:00:00:00:00', virtual: true, loopback: true },
    ];
    const r = runPreflightChecks(facts, { profile: 'testing', config: cfg({ device: '/dev/sda', managementInterface: { interfaces: [{ name: 'ens5' }], method: 'dhcp' } }) });
    expect(check(r, 'device.exists').whatToDo).toBe('No disk here can take it (2 other disks are removable, USB, a loop device, the boot medium or in use).');
    expect(check(r, 'nic.exists', 'ens5').whatToDo).toBe('Use one of: eth0 (02:fc:00:00:00:01).');
  });

  it('an empty device fails with "no device specified" and suggests one', async () => {
    const r = await preflightOf('prod-nvme', 'testing', cfg({ device: '' }));
    expect(check(r, 'device.exists')).toMatchObject({ result: 'fail', message: 'no device specified', whatToDo: 'Set install.device (suggested: /dev/nvme1n1).' });
    expect(r.suggestedDevice).toBe('/dev/nvme1n1');
  });

  it('a partition is refused as install device', async () => {
    const r = await preflightOf('old-install', 'testing', cfg({ device: '/dev/sda2' }));
    expect(check(r, 'device.whole-disk')).toMatchObject({
      result: 'fail',
      measured: 'partition 2 of /dev/sda',
      message: '/dev/sda2 is a partition of /dev/sda, not a whole disk: the installer partitions the whole disk.',
      whatToDo: 'Set install.device to the disk itself (/dev/sda).',
    });
  });

  it('the USB boot medium is refused', async () => {
    const r = await preflightOf('usb-boot', 'testing', cfg({ device: '/dev/disk/by-id/usb-Kingston_DataTraveler_3.0_408D5C1EA1B2-0:0' }));
    expect(check(r, 'device.boot-medium')).toMatchObject({
      result: 'fail',
      subject: '/dev/sdb',
      message: '/dev/sdb holds the medium this system booted from; installing onto it would destroy the running installer.',
      skippable: false,
    });
    expect(check(r, 'device.not-mounted')).toMatchObject({ result: 'fail', measured: 'mounted at /run/initramfs/live' });
  });

  it('a read-only device (the virtual CD holding the ISO) is refused', async () => {
    const r = await preflightOf('prod-nvme', 'testing', cfg({ device: '/dev/sr0' }));
    expect(check(r, 'device.writable')).toMatchObject({
      result: 'fail',
      measured: 'read-only',
      message: '/dev/sr0 is read-only (write-protected or an optical drive).',
      skippable: false,
    });
    expect(check(r, 'device.boot-medium').result).toBe('fail');
  });

  it('a mounted disk with active swap is refused', async () => {
    const r = await preflightOf('old-install', 'testing', cfg({ device: '/dev/sdd' }));
    expect(check(r, 'device.not-mounted')).toMatchObject({
      result: 'fail',
      measured: 'mounted at /mnt/scratch, active swap',
      message: '/dev/sdd is in use: mounted at /mnt/scratch, active swap.',
      whatToDo: 'Unmount it (umount, swapoff) or choose another disk.',
      skippable: false,
    });
    expect(check(r, 'device.size')).toMatchObject({ result: 'fail', measured: '223GiB' });
  });

  it('an LVM member fails unless the config asks to wipe it (then a warning)', async () => {
    const held = await preflightOf('old-install', 'testing', cfg({ device: '/dev/sdc' }));
    expect(check(held, 'device.holders')).toMatchObject({
      result: 'fail',
      measured: 'held by dm-0',
      message: '/dev/sdc is held by dm-0 (LVM, MD RAID or device-mapper).',
      whatToDo: 'Release the holders before the install (vgchange -an VG, mdadm --stop /dev/mdN, dmsetup remove NAME), or list /dev/sdc in install.wipe_disks_list.',
    });
    const wiped = await preflightOf('old-install', 'testing', cfg({ device: '/dev/sdc', wipeDisksList: ['/dev/disk/by-id/ata-MTFDDAK960TDS_SSDC002'] }));
    expect(check(wiped, 'device.holders')).toMatchObject({ result: 'warn', message: '/dev/sdc is held by dm-0 (LVM, MD RAID or device-mapper); the config asks to wipe it.' });
  });

  it('witness role needs only 180GiB', async () => {
    const single = await preflightOf('old-install', 'testing', cfg({ device: '/dev/sdd' }));
    expect(check(single, 'device.size').result).toBe('fail');
    // Same disk after the scratch mount is gone: facts edited to model an unmounted 223GiB disk.
    const facts = await fixtureFacts('old-install');
    const sdd = facts.disks.find((d) => d.name === 'sdd')!;
    sdd.inUse = { mountpoints: [], swap: false, holders: [], bootMedium: false };
    const witness = runPreflightChecks(facts, { profile: 'testing', config: cfg({ device: '/dev/sdd', role: 'witness' }) });
    expect(check(witness, 'device.size')).toMatchObject({ result: 'pass', threshold: '>= 180GiB (witness)' });
  });
});

describe('data disk', () => {
  it('a separate data disk lowers the install disk minimum to 180GiB and is checked for 50GiB', async () => {
    const r = await preflightOf('prod-nvme', 'production', cfg({ device: '/dev/nvme0n1', dataDisk: '/dev/nvme1n1' }));
    expect(outcomes(r).filter((o) => o.startsWith('data-disk.') || o.startsWith('device.size'))).toEqual([
      'device.size /dev/nvme0n1: pass',
      'data-disk.exists /dev/nvme1n1: pass',
      'data-disk.distinct /dev/nvme1n1: pass',
      'data-disk.boot-medium /dev/nvme1n1: pass',
      'data-disk.writable /dev/nvme1n1: pass',
      'data-disk.not-mounted /dev/nvme1n1: pass',
      'data-disk.holders /dev/nvme1n1: pass',
      'data-disk.size /dev/nvme1n1: pass',
      'data-disk.media /dev/nvme1n1: pass',
      'data-disk.sector-size /dev/nvme1n1: pass',
    ]);
    expect(check(r, 'device.size').threshold).toBe('>= 180GiB (separate data disk)');
    expect(r.dataDisk).toBe('/dev/nvme1n1');
  });

  it('data_disk equal to device is one disk (Harvester drops it); a different name for the same disk fails', async () => {
    const same = await preflightOf('prod-nvme', 'testing', cfg({ device: '/dev/nvme0n1', dataDisk: '/dev/nvme0n1' }));
    expect(same.checks.some((c) => c.id.startsWith('data-disk.'))).toBe(false);
    expect(check(same, 'device.size').threshold).toBe('>= 250GiB (OS and data on one disk)');
    const alias = await preflightOf('prod-nvme', 'testing', cfg({ device: '/dev/nvme0n1', dataDisk: '/dev/disk/by-id/nvme-eui.3634473052b00000' }));
    expect(check(alias, 'data-disk.distinct')).toMatchObject({
      result: 'fail',
      message: 'install.data_disk (/dev/disk/by-id/nvme-eui.3634473052b00000) and install.device (/dev/nvme0n1) name the same disk /dev/nvme0n1.',
    });
  });

  it('a rotational data disk is a production warning, fine for testing', async () => {
    const p = await preflightOf('legacy-bios', 'production', cfg({ device: '/dev/sda', dataDisk: '/dev/sdb' }));
    expect(check(p, 'data-disk.media')).toMatchObject({
      result: 'warn',
      message: 'The data disk /dev/sdb is rotational: Longhorn replicas live there, too slow for production.',
      whatToDo: 'Use an NVMe or SSD disk as install.data_disk for production.',
    });
    const t = await preflightOf('legacy-bios', 'testing', cfg({ device: '/dev/sda', dataDisk: '/dev/sdb' }));
    expect(check(t, 'data-disk.media').result).toBe('pass');
  });

  it('a data disk below 50GiB fails with Harvester\'s message; a missing one fails', async () => {
    const facts = await fixtureFacts('prod-nvme');
    facts.disks[1].sizeBytes = 40 * 2 ** 30;
    const r = runPreflightChecks(facts, { profile: 'testing', config: cfg({ device: '/dev/nvme0n1', dataDisk: '/dev/nvme1n1' }) });
    expect(check(r, 'data-disk.size')).toMatchObject({ result: 'fail', measured: '40GiB', message: 'data disk size is too small. Minimum 50Gi is required' });
    const missing = await preflightOf('prod-nvme', 'testing', cfg({ device: '/dev/nvme0n1', dataDisk: '/dev/sdq' }));
    expect(check(missing, 'data-disk.exists')).toMatchObject({ result: 'fail', message: 'device not found: /dev/sdq' });
  });
});

describe('multipath', () => {
  it('two block devices with one WWN are reported as one disk through two paths', async () => {
    const facts = await fixtureFacts('old-install');
    const sdc = facts.disks.find((d) => d.name === 'sdc')!;
    facts.disks.find((d) => d.name === 'sdd')!.wwn = sdc.wwn;
    const r = runPreflightChecks(facts, { profile: 'testing' });
    expect(check(r, 'disks.multipath')).toMatchObject({
      result: 'warn',
      subject: '/dev/sdc, /dev/sdd',
      measured: 'WWN naa.5000c5001000002',
      message: '/dev/sdc, /dev/sdd report the same WWN naa.5000c5001000002: they are one disk seen through 2 paths.',
    });
    // No fixture has such disks, so no row there.
    expect((await preflightOf('old-install', 'testing')).checks.some((c) => c.id === 'disks.multipath')).toBe(false);
  });
});

describe('stale labels with wipe options', () => {
  it('wipe_all_disks covers the disk with COS_OEM, not the whole-disk HARV_LH_DEFAULT one', async () => {
    const r = await preflightOf('old-install', 'testing', cfg({ device: '/dev/nvme0n1', wipeAllDisks: true }));
    expect(check(r, 'disks.stale-labels', '/dev/sda')).toMatchObject({
      result: 'pass',
      message: '/dev/sda carries COS_GRUB, COS_OEM, COS_RECOVERY, COS_STATE, COS_PERSISTENT, HARV_LH_DEFAULT from an old install; the config wipes it (install.wipe_all_disks).',
    });
    expect(check(r, 'disks.stale-labels', '/dev/sdb').result).toBe('warn');
  });

  it('wipe_disks_list covers the disks it names (by path or by-id)', async () => {
    const r = await preflightOf('old-install', 'testing', cfg({ device: '/dev/nvme0n1', wipeDisksList: ['/dev/sda', '/dev/disk/by-id/ata-MTFDDAK1T9TDS_SSDB001'] }));
    expect(check(r, 'disks.stale-labels', '/dev/sda').result).toBe('pass');
    expect(check(r, 'disks.stale-labels', '/dev/sdb')).toMatchObject({ result: 'pass', message: expect.stringContaining('(install.wipe_disks_list)') });
  });

  it('the install device itself may carry old labels (it is repartitioned)', async () => {
    const r = await preflightOf('old-install', 'testing', cfg({ device: '/dev/sda' }));
    expect(r.checks.some((c) => c.id === 'disks.stale-labels' && c.subject === '/dev/sda')).toBe(false);
    expect(check(r, 'disks.stale-labels', '/dev/sdb').result).toBe('warn');
  });
});

describe('management NICs', () => {
  const mgmt = (interfaces: Array<{ name?: string; hwAddr?: string }>) => cfg({ device: '/dev/nvme0n1', managementInterface: { interfaces, method: 'dhcp' } });

  it('by name and by MAC (case-insensitive): found, up, 25G passes production', async () => {
    const r = await preflightOf('prod-nvme', 'production', mgmt([{ name: 'ens1f0np0' }, { hwAddr: 'B8:CE:F6:10:00:02' }]));
    expect(outcomes(r).filter((o) => o.startsWith('nic'))).toEqual([
      'nic.exists ens1f0np0: pass',
      'nic.link ens1f0np0: pass',
      'nic.speed ens1f0np0: pass',
      'nic.exists B8:CE:F6:10:00:02: pass',
      'nic.link ens1f1np1: pass',
      'nic.speed ens1f1np1: pass',
    ]);
    expect(check(r, 'nic.exists', 'B8:CE:F6:10:00:02').message).toBe('B8:CE:F6:10:00:02 is ens1f1np1.');
  });

  it('a missing NIC and a loopback NIC fail with Harvester\'s messages', async () => {
    const r = await preflightOf('prod-nvme', 'testing', mgmt([{ name: 'eth9' }, { name: 'lo' }]));
    expect(check(r, 'nic.exists', 'eth9')).toMatchObject({
      result: 'fail',
      message: 'interface not found: eth9',
      whatToDo: 'Use one of: ens1f0np0 (b8:ce:f6:10:00:01), ens1f1np1 (b8:ce:f6:10:00:02).',
      skippable: false,
    });
    expect(check(r, 'nic.loopback', 'lo')).toMatchObject({ result: 'fail', message: 'interface is a loopback interface: lo', skippable: false });
  });

  it('a NIC without cable warns; when it is the only one the management network fails', async () => {
    const r = await preflightOf('usb-boot', 'testing', mgmt([{ name: 'enp6s0' }]));
    expect(check(r, 'nic.link', 'enp6s0')).toMatchObject({ result: 'warn', message: "NIC enp6s0 is down. Network cable isn't plugged in.", measured: 'down, no carrier' });
    expect(check(r, 'nic.speed', 'enp6s0')).toMatchObject({ result: 'warn', measured: 'not reported' });
    expect(check(r, 'nic.any-link')).toMatchObject({ result: 'fail', measured: 'all down (enp6s0)' });
    const both = await preflightOf('usb-boot', 'testing', mgmt([{ name: 'enp5s0' }, { name: 'enp6s0' }]));
    expect(both.checks.some((c) => c.id === 'nic.any-link')).toBe(false);
  });

  it('a 100Mb/s NIC fails even the testing profile', async () => {
    const r = await preflightOf('old-install', 'testing', mgmt([{ name: 'eno1' }]));
    expect(check(r, 'nic.speed', 'eno1')).toMatchObject({
      result: 'fail',
      measured: '100Mb/s',
      message: 'Link speed of eno1 is only 100Mbps. Harvester requires at least 1Gbps for testing and 10Gbps for production use.',
      skippable: true,
    });
  });
});
