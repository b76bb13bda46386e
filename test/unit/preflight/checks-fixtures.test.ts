// Every check's outcome and message on each fixture machine, without a config (the machine alone).
import { describe, expect, it } from 'vitest';
import { check, outcomes, preflightOf } from './helpers.js';

describe('production NVMe server', () => {
  it('passes everything in the production profile and suggests the larger NVMe', async () => {
    const r = await preflightOf('prod-nvme', 'production');
    expect(outcomes(r)).toEqual([
      'cpu.cores: pass',
      'memory: pass',
      'virt.cpu-flags: pass',
      'virt.kvm: pass',
      'virt.host: pass',
      'firmware.uefi: pass',
      'firmware.secure-boot: pass',
      'device.suggested /dev/nvme1n1: pass',
      'device.size /dev/nvme1n1: pass',
      'device.media /dev/nvme1n1: pass',
      'device.sector-size /dev/nvme1n1: pass',
      'disks.stale-labels: pass',
      'nics.present: pass',
      'nic.speed ens1f0np0: pass',
    ]);
    expect(r.summary).toEqual({ pass: 14, warn: 0, fail: 0 });
    expect(r.suggestedDevice).toBe('/dev/nvme1n1');
    expect(r.installDevice).toBe('/dev/nvme1n1');
    expect(check(r, 'cpu.cores').message).toBe('128 CPU cores detected.');
    expect(check(r, 'cpu.cores').measured).toBe('128 logical CPUs (64 cores)');
    expect(check(r, 'memory')).toMatchObject({ message: '512GiB RAM detected.', measured: '512GiB (installed, DMI)', threshold: '>= 64GiB' });
    expect(check(r, 'virt.cpu-flags').measured).toBe('vmx (Intel VT-x)');
    expect(check(r, 'virt.host').message).toBe('System is not virtualized.');
    expect(check(r, 'firmware.secure-boot').measured).toBe('enabled');
    expect(check(r, 'device.suggested').message).toBe(
      'Suggested install device: /dev/disk/by-id/nvme-Dell_Ent_NVMe_P5600_MU_U.2_3.2TB_PHAB112300001.',
    );
    expect(check(r, 'device.size').measured).toBe('2980GiB');
    expect(check(r, 'device.media').message).toBe('Install disk /dev/nvme1n1 is NVMe.');
    expect(check(r, 'nic.speed').message).toBe('Link speed of ens1f0np0 is 25Gbps.');
    expect(r.checks.filter((c) => c.result === 'pass').every((c) => c.whatToDo === '')).toBe(true);
  });
});

describe('lab VM without virtualisation flags', () => {
  it('testing profile: clear failures for CPUs, memory, vmx/svm and /dev/kvm; VM and NIC speed warnings', async () => {
    const r = await preflightOf('lab-vm', 'testing');
    expect(outcomes(r)).toEqual([
      'cpu.cores: fail',
      'memory: fail',
      'virt.cpu-flags: fail',
      'virt.kvm: fail',
      'virt.host: warn',
      'firmware.uefi: pass',
      'firmware.secure-boot: pass',
      'device.suggested /dev/vda: pass',
      'device.size /dev/vda: pass',
      'device.media /dev/vda: pass',
      'device.sector-size /dev/vda: pass',
      'disks.stale-labels: pass',
      'nics.present: pass',
      'nic.speed enp1s0: warn',
    ]);
    expect(check(r, 'cpu.cores').message).toBe(
      'Only 4 CPU cores detected. Harvester requires at least 8 cores for testing and 16 for production use.',
    );
    expect(check(r, 'memory').message).toBe(
      'Only 15.5GiB RAM detected. Harvester requires at least 32GiB for testing and 64GiB for production use.',
    );
    expect(check(r, 'virt.cpu-flags')).toMatchObject({
      measured: 'neither vmx nor svm',
      message: 'Harvester requires hardware-assisted virtualization, but the CPU exposes neither the vmx (Intel VT-x) nor the svm (AMD-V) flag.',
    });
    expect(check(r, 'virt.cpu-flags').whatToDo).toMatch(/VM \(kvm\): enable nested virtualisation/);
    expect(check(r, 'virt.kvm').message).toBe('Harvester requires hardware-assisted virtualization, but /dev/kvm does not exist.');
    expect(check(r, 'virt.kvm').whatToDo).toMatch(/First make the CPU expose vmx\/svm/);
    expect(check(r, 'virt.host').message).toBe('System is virtualized (kvm) which is not supported in production.');
    expect(check(r, 'firmware.secure-boot').measured).toBe('disabled');
    expect(check(r, 'nic.speed').message).toBe('Link speed of enp1s0 is not reported by its driver (virtio_net); it cannot be checked.');
    expect(r.checks.filter((c) => c.result !== 'pass').every((c) => c.whatToDo.length > 0)).toBe(true);
  });
});

describe('legacy BIOS box', () => {
  it('fails firmware.uefi with Harvester 1.8 wording; 1G NIC passes testing, fails production', async () => {
    const t = await preflightOf('legacy-bios', 'testing');
    expect(outcomes(t)).toEqual([
      'cpu.cores: pass',
      'memory: pass',
      'virt.cpu-flags: pass',
      'virt.kvm: pass',
      'virt.host: pass',
      'firmware.uefi: fail',
      'device.suggested /dev/sda: pass',
      'device.size /dev/sda: pass',
      'device.media /dev/sda: pass',
      'device.sector-size /dev/sda: pass',
      'disks.stale-labels: pass',
      'nics.present: pass',
      'nic.speed eno1: warn',
    ]);
    expect(check(t, 'firmware.uefi')).toMatchObject({
      measured: 'legacy BIOS (/sys/firmware/efi absent)',
      message: 'Legacy BIOS systems are no longer supported. Please reconfigure the system to use UEFI prior to installation.',
      skippable: false,
    });
    // NVMe first, then solid-state before a larger HDD.
    expect(t.suggestedDevice).toBe('/dev/sda');
    expect(check(t, 'nic.speed').message).toBe('Link speed of eno1 is 1Gbps. Harvester requires at least 10Gbps for production use.');
    const p = await preflightOf('legacy-bios', 'production');
    expect(check(p, 'nic.speed').result).toBe('fail');
    expect(check(p, 'cpu.cores').result).toBe('pass');
    expect(check(p, 'memory')).toMatchObject({ result: 'pass', measured: '62.1GiB (MemTotal)' });
  });
});

describe('USB stick boot medium and a small disk', () => {
  it('never suggests the stick; the small disk fails the 250GiB single-disk minimum', async () => {
    const r = await preflightOf('usb-boot', 'testing');
    expect(outcomes(r)).toEqual([
      'cpu.cores: warn',
      'memory: warn',
      'virt.cpu-flags: pass',
      'virt.kvm: pass',
      'virt.host: pass',
      'firmware.uefi: pass',
      'firmware.secure-boot: pass',
      'device.suggested /dev/sda: pass',
      'device.size /dev/sda: fail',
      'device.media /dev/sda: pass',
      'device.sector-size /dev/sda: pass',
      'disks.stale-labels: pass',
      'nics.present: pass',
      'nic.speed enp5s0: warn',
    ]);
    expect(check(r, 'cpu.cores').message).toBe('8 CPU cores detected. Harvester requires at least 16 cores for production use.');
    expect(check(r, 'memory').message).toBe('31GiB RAM detected. Harvester requires at least 64GiB for production use.');
    expect(check(r, 'device.size')).toMatchObject({
      measured: '111GiB',
      threshold: '>= 250GiB (OS and data on one disk)',
      message: 'installation disk size is too small. Minimum 250Gi is required',
      skippable: true,
    });
    expect(check(r, 'virt.cpu-flags').measured).toBe('svm (AMD-V)');
    expect(check(r, 'firmware.secure-boot').measured).toBe('unknown (SecureBoot efivar not readable)');
    expect(check(r, 'nics.present').measured).toBe('enp5s0 (up, 2500Mb/s, igc); enp6s0 (down, speed n/a, igc)');
    const p = await preflightOf('usb-boot', 'production');
    expect(check(p, 'cpu.cores').result).toBe('fail');
    expect(check(p, 'memory').result).toBe('fail');
    expect(check(p, 'nic.speed')).toMatchObject({ result: 'fail', message: 'Link speed of enp5s0 is 2.5Gbps. Harvester requires at least 10Gbps for production use.' });
  });
});

describe('4Kn disk', () => {
  it('reports the 4Kn disk and passes it', async () => {
    const r = await preflightOf('4kn', 'production');
    expect(outcomes(r)).toEqual([
      'cpu.cores: pass',
      'memory: pass',
      'virt.cpu-flags: pass',
      'virt.kvm: pass',
      'virt.host: pass',
      'firmware.uefi: pass',
      'firmware.secure-boot: pass',
      'device.suggested /dev/sda: pass',
      'device.size /dev/sda: pass',
      'device.media /dev/sda: pass',
      'device.sector-size /dev/sda: pass',
      'disks.stale-labels: pass',
      'nics.present: pass',
      'nic.speed ens3f0: pass',
    ]);
    expect(check(r, 'device.sector-size')).toMatchObject({
      measured: '4096 logical / 4096 physical (4Kn)',
      message: '/dev/sda is a 4Kn disk (4096-byte logical sectors); the layout is 1 MiB aligned and supports it.',
    });
    expect(check(r, 'device.media').measured).toBe('sas, 1490GiB, solid-state, 4Kn, MZILT1T6HBJR0D3');
    expect(check(r, 'device.media').message).toBe('Install disk /dev/sda is not NVMe (sas).');
    expect(check(r, 'nic.speed').message).toBe('Link speed of ens3f0 is 10Gbps.');
  });
});

describe('disk with an old install', () => {
  it('warns about COS_*/HARV_LH_DEFAULT on other disks, naming the wipe options', async () => {
    const r = await preflightOf('old-install', 'production');
    expect(outcomes(r)).toEqual([
      'cpu.cores: pass',
      'memory: pass',
      'virt.cpu-flags: pass',
      'virt.kvm: pass',
      'virt.host: pass',
      'firmware.uefi: pass',
      'firmware.secure-boot: pass',
      'device.suggested /dev/nvme0n1: pass',
      'device.size /dev/nvme0n1: pass',
      'device.media /dev/nvme0n1: pass',
      'device.sector-size /dev/nvme0n1: pass',
      'disks.stale-labels /dev/sda: warn',
      'disks.stale-labels /dev/sdb: warn',
      'nics.present: pass',
      'nic.speed ens2f0: pass',
    ]);
    expect(check(r, 'disks.stale-labels', '/dev/sda')).toMatchObject({
      measured: 'COS_GRUB, COS_OEM, COS_RECOVERY, COS_STATE, COS_PERSISTENT, HARV_LH_DEFAULT',
      message:
        '/dev/sda carries COS_GRUB, COS_OEM, COS_RECOVERY, COS_STATE, COS_PERSISTENT, HARV_LH_DEFAULT from an old install: duplicate labels make the new node boot or mount the wrong partitions.',
      whatToDo: 'Set install.wipe_all_disks: true or add /dev/sda to install.wipe_disks_list.',
    });
    expect(check(r, 'disks.stale-labels', '/dev/sdb').whatToDo).toBe(
      'Add /dev/sdb to install.wipe_disks_list (install.wipe_all_disks only wipes disks with a COS_OEM partition).',
    );
    // The in-use disks (LVM member, mounted + swap) are never suggested.
    expect(r.suggestedDevice).toBe('/dev/nvme0n1');
  });
});
