/**
 * COS_OEM/grubcustom for the integration tests that boot an installed disk under OVMF: the
 * operator's hook, sourced last by hvinstall's grub.cfg, ends the menu's 10 s countdown at once.
 * grub's x86 EFI idle is a no-op (grub-core include/grub/i386/time.h, grub_cpu_idle), so under
 * TCG the countdown costs a CPU-second per second. A menu the config stopped on purpose (timeout
 * -1, a duplicate COS_STATE) keeps waiting; timeout 0 still takes the fallback entries when the
 * default fails, as the countdown running out does.
 */
export const NO_COUNTDOWN = 'if [ "$timeout" != "-1" ]; then set timeout=0; fi\n';
