/**
 * The architectures hvpxe's installer boots on. The artifacts are x86_64 (Harvester ships no other
 * installer), which BIOS iPXE (i386, undionly.kpxe) and x86_64 UEFI iPXE or grub can start; a 32-bit
 * UEFI or an arm64 machine cannot, and is told so instead of failing somewhere in the kernel. Pure.
 */
import type { Machine } from './profiles.js';

/** Whether the installer boots on `arch` (iPXE's ${buildarch}, grub's $grub_cpu); an older script that sends none is served. */
export function archServed(arch: string | undefined, platform: 'efi' | 'pcbios' | undefined): boolean {
  if (!arch) return true;
  return arch === 'x86_64' || (arch === 'i386' && platform === 'pcbios');
}

/** What such a machine's console says (iPXE and grub say the same); `arch` is already checked to be a plain word. */
export function unsupportedArchLines(m: Machine, arch: string): string[] {
  return [
    `hvpxe: ${m.name} booted as ${arch}, but profile ${m.profile} serves an x86_64 installer only.`,
    'hvpxe: boot this machine in x86_64 UEFI or BIOS mode, or give it a profile for its architecture; trying the next boot device in 30 s',
  ];
}
