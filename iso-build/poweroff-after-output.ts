/**
 * How a busybox script whose output is the serial console powers the machine off. `poweroff -f`
 * stops it at once, without waiting for the console to send what is still queued: a script's last
 * lines were lost, or the kernel's power-off message landed inside one of them. busybox's stty sets
 * the terminal's modes with TCSETSW, which returns once the queued output has been sent.
 */
export const POWEROFF_AFTER_OUTPUT = 'stty -tostop <&1 2>/dev/null; poweroff -f';
