/** CPU, memory, virtualisation and firmware checks (harvester/harvester-installer pkg/preflight/checks.go). */
import type { MachineFacts } from '../types.js';
import type { PreflightCheck, Profile } from '../report.js';
import { GiB } from '../../../config/disk-sizes.js';
import { formatGiB, MEMINFO_ALLOWANCE, THRESHOLDS } from '../thresholds.js';
import { EFI_BINARY_NAMES } from '../../bootloader/image-chain.js';

export function checkCpuCores(facts: MachineFacts, profile: Profile): PreflightCheck {
  const n = facts.cpu.threads;
  const { testing, production } = THRESHOLDS;
  const base = {
    id: 'cpu.cores',
    title: 'CPU cores',
    // Harvester counts `nproc --all`: logical CPUs.
    measured: `${n} logical CPUs (${facts.cpu.cores} cores)`,
    threshold: `>= ${THRESHOLDS[profile].cpuCores}`,
    skippable: true,
  };
  if (n < testing.cpuCores) {
    return {
      ...base,
      result: 'fail',
      message: `Only ${n} CPU cores detected. Harvester requires at least ${testing.cpuCores} cores for testing and ${production.cpuCores} for production use.`,
      whatToDo: `Give the machine at least ${THRESHOLDS[profile].cpuCores} CPUs (install.skipchecks lets an automatic install go on anyway).`,
    };
  }
  if (n < production.cpuCores) {
    return {
      ...base,
      result: profile === 'production' ? 'fail' : 'warn',
      message: `${n} CPU cores detected. Harvester requires at least ${production.cpuCores} cores for production use.`,
      whatToDo:
        profile === 'production'
          ? `Use a machine with at least ${production.cpuCores} CPUs for production, or --profile testing for a lab.`
          : `Enough for testing; production needs ${production.cpuCores}.`,
    };
  }
  return { ...base, result: 'pass', message: `${n} CPU cores detected.`, whatToDo: '' };
}

export function checkMemory(facts: MachineFacts, profile: Profile): PreflightCheck {
  const bytes = facts.memoryBytes;
  const { testing, production } = THRESHOLDS;
  // MemTotal reads below the installed RAM, so it is compared against 90 % of the requirement
  // (Harvester's fallback); the DMI figure is the installed RAM and is compared as is.
  const dmi = facts.memorySource === 'dmi';
  const allowance = dmi ? 1 : MEMINFO_ALLOWANCE;
  const meets = (gib: number) => bytes >= gib * GiB * allowance;
  const shown = formatGiB(bytes);
  const need = THRESHOLDS[profile].memoryGiB;
  const base = {
    id: 'memory',
    title: 'Memory',
    measured: `${shown} (${dmi ? 'installed, DMI' : 'MemTotal'})`,
    threshold: dmi ? `>= ${need}GiB` : `>= ${need}GiB (MemTotal >= ${formatGiB(need * GiB * MEMINFO_ALLOWANCE)})`,
    skippable: true,
  };
  if (!meets(testing.memoryGiB)) {
    return {
      ...base,
      result: 'fail',
      message: `Only ${shown} RAM detected. Harvester requires at least ${testing.memoryGiB}GiB for testing and ${production.memoryGiB}GiB for production use.`,
      whatToDo: `Add memory: at least ${THRESHOLDS[profile].memoryGiB}GiB (install.skipchecks lets an automatic install go on anyway).`,
    };
  }
  if (!meets(production.memoryGiB)) {
    return {
      ...base,
      result: profile === 'production' ? 'fail' : 'warn',
      message: `${shown} RAM detected. Harvester requires at least ${production.memoryGiB}GiB for production use.`,
      whatToDo:
        profile === 'production'
          ? `Use at least ${production.memoryGiB}GiB for production, or --profile testing for a lab.`
          : `Enough for testing; production needs ${production.memoryGiB}GiB.`,
    };
  }
  return { ...base, result: 'pass', message: `${shown} RAM detected.`, whatToDo: '' };
}

function vmName(facts: MachineFacts): string {
  return facts.virtualization.hypervisor ?? 'unknown hypervisor';
}

export function checkCpuVirtFlags(facts: MachineFacts): PreflightCheck {
  const { vmx, svm } = facts.cpu;
  const base = { id: 'virt.cpu-flags', title: 'VT-x/AMD-V', threshold: 'vmx or svm', skippable: true };
  if (vmx || svm) {
    return {
      ...base,
      result: 'pass',
      measured: vmx ? 'vmx (Intel VT-x)' : 'svm (AMD-V)',
      message: `The CPU supports hardware-assisted virtualization (${vmx ? 'vmx' : 'svm'}).`,
      whatToDo: '',
    };
  }
  return {
    ...base,
    result: 'fail',
    measured: 'neither vmx nor svm',
    message:
      'Harvester requires hardware-assisted virtualization, but the CPU exposes neither the vmx (Intel VT-x) nor the svm (AMD-V) flag.',
    whatToDo: facts.virtualization.isVm
      ? `This is a VM (${vmName(facts)}): enable nested virtualisation on its host (kvm_intel/kvm_amd nested=1) and pass the flag through (e.g. -cpu host).`
      : 'Enable Intel VT-x or AMD-V (SVM) in the firmware setup, then power-cycle the machine.',
  };
}

export function checkDevKvm(facts: MachineFacts): PreflightCheck {
  const base = { id: 'virt.kvm', title: '/dev/kvm', threshold: 'present', skippable: true };
  const flags = facts.cpu.vmx || facts.cpu.svm;
  if (facts.cpu.devKvm && !flags) {
    // Seen in sandboxes that expose the device node without the CPU extensions behind it.
    return {
      ...base,
      result: 'warn',
      measured: 'present, but no vmx/svm',
      message: '/dev/kvm exists, but the CPU exposes neither vmx nor svm, so KVM cannot run guests here.',
      whatToDo: 'Fix the CPU virtualisation flags (see virt.cpu-flags).',
    };
  }
  if (facts.cpu.devKvm) {
    return { ...base, result: 'pass', measured: 'present', message: '/dev/kvm exists.', whatToDo: '' };
  }
  return {
    ...base,
    result: 'fail',
    measured: 'absent',
    message: 'Harvester requires hardware-assisted virtualization, but /dev/kvm does not exist.',
    whatToDo: flags
      ? `Load the KVM module (modprobe ${facts.cpu.vmx ? 'kvm_intel' : 'kvm_amd'}); check dmesg if it refuses.`
      : 'First make the CPU expose vmx/svm (see virt.cpu-flags); /dev/kvm appears once the kvm module loads.',
  };
}

export function checkVirtualisedHost(facts: MachineFacts): PreflightCheck {
  const base = { id: 'virt.host', title: 'Bare metal', threshold: 'not a VM', skippable: true };
  if (!facts.virtualization.isVm) {
    return { ...base, result: 'pass', measured: 'bare metal', message: 'System is not virtualized.', whatToDo: '' };
  }
  return {
    ...base,
    result: 'warn',
    measured: `VM (${vmName(facts)})`,
    message: `System is virtualized (${vmName(facts)}) which is not supported in production.`,
    whatToDo: 'Fine for a lab; install production nodes on bare metal.',
  };
}

export function checkFirmware(facts: MachineFacts): PreflightCheck {
  const base = { id: 'firmware.uefi', title: 'UEFI firmware', threshold: 'UEFI', skippable: false };
  if (facts.firmware.uefi) {
    return { ...base, result: 'pass', measured: 'UEFI', message: 'The system booted in UEFI mode.', whatToDo: '' };
  }
  return {
    ...base,
    result: 'fail',
    measured: 'legacy BIOS (/sys/firmware/efi absent)',
    message: 'Legacy BIOS systems are no longer supported. Please reconfigure the system to use UEFI prior to installation.',
    whatToDo: 'Switch the firmware boot mode to UEFI (disable CSM) and boot the installer in UEFI mode.',
  };
}

/** What preflight knows of the OS image to install (hvinstall preflight --source). */
export interface ImageBootFacts {
  source: string;
  /** The image's signed shim (installer/bootloader/image-shim.ts), if it carries one. */
  shim?: string;
}

/**
 * Secure Boot matters for the installed disk when the image brings no signed shim: hvinstall then
 * installs its own grub, built from Debian's unsigned modules, which firmware with Secure Boot
 * enforced refuses. A warning, not a failure: the install itself works, and the operator can turn
 * Secure Boot off before the first boot of the disk. An image with a shim gets its own chain.
 */
export function checkSecureBoot(facts: MachineFacts, image?: ImageBootFacts): PreflightCheck | undefined {
  if (!facts.firmware.uefi) return undefined;
  const sb = facts.firmware.secureBoot;
  const base = { id: 'firmware.secure-boot', title: 'Secure Boot', threshold: '', skippable: true };
  if (sb !== true) {
    return {
      ...base,
      result: 'pass',
      measured: sb === undefined ? 'unknown (SecureBoot efivar not readable)' : 'disabled',
      message: sb === undefined ? 'Secure Boot state could not be read; reported only.' : 'Secure Boot is disabled; the installed disk boots with any boot chain.',
      whatToDo: '',
    };
  }
  if (!image) {
    return {
      ...base,
      result: 'pass',
      measured: 'enabled',
      message: 'Secure Boot is enabled; whether the installed disk boots with it depends on the OS image (check with --source).',
      whatToDo: '',
    };
  }
  if (image.shim) {
    return {
      ...base,
      result: 'pass',
      measured: `enabled; the image carries ${image.shim}`,
      message: `Secure Boot is enabled. ${image.source} carries a shim (${image.shim}): hvinstall installs the image's own boot chain (its shim, grub and grub.cfg), which boots with Secure Boot on as far as the image's vendor signed it.`,
      whatToDo: '',
    };
  }
  return {
    ...base,
    result: 'warn',
    measured: 'enabled; the image carries no signed shim',
    message: `Secure Boot is enabled, but ${image.source} carries no signed shim (looked for ${EFI_BINARY_NAMES.shim.join(', ')}): the installed disk boots the grub hvinstall builds from Debian's modules, which is not signed, and firmware with Secure Boot enforced refuses it.`,
    whatToDo: 'Turn Secure Boot off in the firmware setup before the installed disk first boots (the install itself is not affected), or install an image that carries its own signed boot chain.',
  };
}

