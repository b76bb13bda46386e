import { POWEROFF_AFTER_OUTPUT } from '../poweroff-after-output.js';
/**
 * PID 1 of the small initramfs (stage 1). It finds the boot medium by its ISO 9660 volume label
 * (COS_LIVE, as Harvester's ISO; no kernel parameter needed), mounts it at /run/initramfs/live (where
 * dracut's dmsquash-live puts it, and where hvinstall looks for `iso_url: local` and bundle/),
 * loop-mounts the live root (hvlive/live.squashfs) under a tmpfs overlay and switch_roots into it;
 * the live root's /init (init-script.ts) takes over with /dev, /proc, /sys and /run moved along.
 *
 * The PXE initrd carries the live root itself (appended to this initramfs as hvlive/live.squashfs):
 * then no medium is needed for the live root; one labelled COS_LIVE is still mounted when present
 * (it holds the OS image and bundle/ of `iso_url: local`).
 *
 * Which medium: the first block device whose ISO 9660 label is the wanted one and that carries
 * /.disk/id/<this build's id> (so a second COS_LIVE stick from another build, whose live root would
 * not match this kernel, is not taken). The search has a deadline; while it waits it says so every
 * 10 s, and at the deadline it prints every block device it saw with its label, then powers off
 * (hvlive.on_failure=poweroff) or opens a shell (exit it to search again).
 *
 * Kernel parameters (all optional):
 *   root=live:CDLABEL=X | root=live:LABEL=X   the medium's label (default COS_LIVE; dracut's syntax)
 *   hvlive.medium_timeout=SECONDS             how long to wait for the medium (default 120)
 *   hvlive.on_failure=poweroff                power off instead of opening a shell
 */
export const LIVE_LABEL = 'COS_LIVE';
/** On the medium and, for PXE, inside the initrd. */
export const LIVE_SQUASHFS_PATH = 'hvlive/live.squashfs';
/** In the initramfs: this build's medium id (the ISO carries /.disk/id/<id>). */
export const MEDIUM_ID_FILE = 'etc/hv-live/medium-id';
export const MEDIUM_TIMEOUT_S = 120;

export const INITRAMFS_INIT = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
say() { echo "HV-LIVE: $*"; }
arg() { for a in $(cat /proc/cmdline); do case "$a" in "$1"=*) echo "\${a#*=}"; return 0 ;; esac; done; return 1; }
now() { cut -d. -f1 /proc/uptime; }
say "initramfs: kernel $(uname -r)"
for m in $(cat /etc/hv-live/initramfs-modules); do modprobe "$m" 2>/dev/null; done

label=${LIVE_LABEL}
case "$(arg root)" in live:CDLABEL=*) label=$(arg root); label=\${label#live:CDLABEL=} ;; live:LABEL=*) label=$(arg root); label=\${label#live:LABEL=} ;; esac
timeout=$(arg hvlive.medium_timeout) || timeout=${MEDIUM_TIMEOUT_S}
case "$timeout" in ''|*[!0-9]*) say "hvlive.medium_timeout=$timeout is not a number of seconds; using ${MEDIUM_TIMEOUT_S}"; timeout=${MEDIUM_TIMEOUT_S} ;; esac
id=$(cat /${MEDIUM_ID_FILE})
medium=/run/initramfs/live
mkdir -p $medium /run/hvlive/ro /run/hvlive/rw /newroot
embedded=
[ -f /${LIVE_SQUASHFS_PATH} ] && embedded=/${LIVE_SQUASHFS_PATH}

# The ISO 9660 volume label of a block device (primary volume descriptor at 32 KiB), or nothing.
iso_label() {
  [ "$(dd if="$1" bs=1 skip=32769 count=5 2>/dev/null)" = CD001 ] || return 1
  dd if="$1" bs=1 skip=32808 count=32 2>/dev/null | tr -d '\\000' | sed 's/ *$//'
}

# Mounts the first device labelled $label that belongs to this build (any, with an embedded live
# root) at $medium. Sets seen= (what it looked at) and foreign= (labelled, but from another build).
scan() {
  seen=; foreign=
  for b in /sys/class/block/*; do
    d=\${b##*/}
    case "$d" in loop*|ram*|zram*|dm-*|md*) continue ;; esac
    [ -b "/dev/$d" ] || continue
    l=$(iso_label "/dev/$d")
    seen="$seen $d\${l:+(\\"$l\\")}"
    [ -n "$l" ] && [ "$l" = "$label" ] || continue
    mount -t iso9660 -o ro "/dev/$d" $medium 2>/dev/null || { seen="$seen[mount failed]"; continue; }
    if [ -n "$embedded" ] || [ -e "$medium/.disk/id/$id" ]; then dev=/dev/$d; return 0; fi
    foreign="$foreign $d"
    umount $medium
  done
  return 1
}

# Waits for the medium until the deadline, saying so every 10 s.
find_medium() {
  start=$(now); next=$((start + 10))
  while ! scan; do
    t=$(now)
    if [ $t -ge $((start + $1)) ]; then
      say "no boot medium labelled $label found within $1 s"
      say "block devices seen (ISO 9660 labels in quotes):\${seen:- none}"
      [ -n "$foreign" ] && say "labelled $label but from another build (no /.disk/id/$id):$foreign"
      return 1
    fi
    [ $t -ge $next ] && { say "waiting for the boot medium labelled $label ($((t - start))/$1 s; seen:\${seen:- none})"; next=$((t + 10)); }
    sleep 1
  done
  say "boot medium $dev (label $label) mounted at $medium"
}

failed() {
  echo "HV-LIVE-RESULT $1"
  if [ "$(arg hvlive.on_failure)" = poweroff ]; then say "powering off"; sync; ${POWEROFF_AFTER_OUTPUT}; fi
  say "a shell follows; exit it to try again"
  sh
}

if [ -n "$embedded" ]; then
  # The live root came with the initrd (PXE). A medium is optional: look briefly, unless the OS
  # image comes over the network anyway (root=live:http...).
  case "$(arg root)" in
    live:http://*|live:https://*) ;;
    *) find_medium 10 || say "continuing without a boot medium (iso_url local needs one)" ;;
  esac
  sq=$embedded
else
  while ! find_medium "$timeout"; do failed medium-not-found; done
  sq=$medium/${LIVE_SQUASHFS_PATH}
  while [ ! -f "$sq" ]; do say "$dev has no /${LIVE_SQUASHFS_PATH}: not an hvinstall live medium"; failed live-root-missing; done
fi

mount -t squashfs -o ro,loop "$sq" /run/hvlive/ro || failed "live-root-mount-failed $sq"
mount -t tmpfs -o mode=0755 tmpfs /run/hvlive/rw
mkdir -p /run/hvlive/rw/upper /run/hvlive/rw/work
mount -t overlay overlay -o lowerdir=/run/hvlive/ro,upperdir=/run/hvlive/rw/upper,workdir=/run/hvlive/rw/work /newroot || failed live-root-overlay-failed
for m in dev proc sys run; do mount --move /$m /newroot/$m; done
# switch_root empties this initramfs; an embedded live.squashfs stays alive through its loop device.
exec switch_root /newroot /init
`;
