import { POWEROFF_AFTER_OUTPUT } from '../poweroff-after-output.js';
/**
 * PID 1 of the live installer's root (after the initramfs, initramfs-init.ts, switch_rooted into it
 * with /dev, /proc, /sys and /run moved along, the boot medium at /run/initramfs/live). It brings up
 * what hvinstall needs (modules, efivarfs, the network by DHCP), then, as Harvester's live system does for `harvester.install.automatic=true`,
 * runs `hvinstall install --cmdline-file /proc/cmdline` (automatic mode: it fetches
 * `harvester.install.config_url`, merges the command line's harvester.* keys and validates). On success hvinstall
 * itself powers off or reboots (install.power_off). Without automatic mode it starts the interactive
 * `hvinstall console` on tty1 and on the serial console(s) the command line names (docs/console.md).
 * Lines starting with `HV-LIVE` are for people and for the e2e harness reading the serial console.
 *
 * Live-only kernel parameters:
 *   hvlive.system_size=MIB     --system-size for active.img (default: hvinstall's)
 *   hvlive.on_failure=poweroff power off after a failed install (default: keep a shell on the console)
 *   hvlive.device=/dev/X       --device when the config names none
 */
export const LIVE_INIT = `#!/usr/bin/busybox sh
# The initramfs moved these here; mount them only when started some other way.
[ -e /proc/self ] || /usr/bin/busybox mount -t proc proc /proc
[ -d /sys/class ] || /usr/bin/busybox mount -t sysfs sysfs /sys
[ -e /dev/null ] || /usr/bin/busybox mount -t devtmpfs devtmpfs /dev
/usr/bin/busybox --install -s /bb
export PATH=/usr/sbin:/usr/bin:/bb HOME=/root TERM=dumb
mkdir -p /dev/pts /dev/shm /run/live /run/hvinstall /var/lib/hvinstall
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
echo "HV-LIVE: kernel $(uname -r) up, $(grep MemTotal /proc/meminfo | tr -s ' ')"
for m in $(cat /etc/hv-live/modules); do modprobe "$m" 2>/dev/null || echo "HV-LIVE: module $m not loaded"; done
# After the modules: efivarfs is one.
[ -d /sys/firmware/efi/efivars ] && mount -t efivarfs efivarfs /sys/firmware/efi/efivars 2>/dev/null
if [ -d /sys/firmware/efi ]; then
  # efivarfs: 4 bytes of attributes, then the value (1: Secure Boot enforced). Read from the start:
  # efivarfs files cannot seek, and od -j on a regular file seeks.
  v=/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c
  sb=$(od -An -t u1 -N 5 "$v" 2>/dev/null | awk '{print $5}')
  case "$sb" in
    1) sb=enabled ;; 0) sb=disabled ;;
    # Firmware without Secure Boot has no such variable (the other variables are there).
    *) if [ -n "$(ls /sys/firmware/efi/efivars 2>/dev/null)" ]; then sb="disabled (no SecureBoot variable)"; else sb="unknown (efivarfs not mounted)"; fi ;;
  esac
  echo "HV-LIVE: firmware UEFI, Secure Boot $sb"
  # Debian's kernel locks itself down under Secure Boot (unsigned modules, kexec, /dev/mem refused).
  mount -t securityfs securityfs /sys/kernel/security 2>/dev/null
  [ -r /sys/kernel/security/lockdown ] && echo "HV-LIVE: kernel lockdown $(cat /sys/kernel/security/lockdown)"
else
  echo "HV-LIVE: firmware BIOS"
fi
medium=$(awk '$2 == "/run/initramfs/live" {print $1}' /proc/mounts)
echo "HV-LIVE: boot medium \${medium:-none}"

arg() { for a in $(cat /proc/cmdline); do case "$a" in "$1"=*) echo "\${a#*=}"; return 0 ;; esac; done; return 1; }
# A URL as the console may show it: hvpxe's config URL carries the machine's credential in its query,
# and a console is often logged (a BMC's serial-over-LAN); its query and userinfo are never printed.
shown_url() {
  u=\${1%%\\?*}; [ "$u" = "$1" ] || u="$u?<query hidden>"
  rest=\${u#*://}; authority=\${rest%%/*}
  case "$authority" in *@*) u="\${u%%://*}://<userinfo hidden>@\${rest#*@}" ;; esac
  echo "$u"
}

finish() {
  echo "HV-LIVE-RESULT $1"
  sync
  if [ "$(arg hvlive.on_failure)" = poweroff ] || [ "$2" = ok ]; then
    echo "HV-LIVE: powering off"
    ${POWEROFF_AFTER_OUTPUT}
  fi
  echo "HV-LIVE: the install did not complete; a shell follows (the journal and log are under /var/lib/hvinstall)"
  exec sh
}

ip link set lo up
nic=
for n in /sys/class/net/*; do n=\${n##*/}; [ "$n" = lo ] || { nic=$n; break; }; done
if [ -n "$nic" ]; then
  ip link set "$nic" up
  udhcpc -i "$nic" -n -q -t 10 -T 2 -s /etc/hv-live/udhcpc.script >/dev/null 2>&1 || echo "HV-LIVE: DHCP on $nic got no lease"
  echo "HV-LIVE: network $nic $(ip -4 -o addr show dev "$nic" | awk '{print $4}')"
fi

# NVMe and virtio disks appear asynchronously after their modules load.
i=0
while [ $i -lt 20 ] && ! grep -qE ' (nvme[0-9]+n[0-9]+|vd[a-z]+|sd[a-z]+)$' /proc/partitions; do sleep 1; i=$((i + 1)); done
echo "HV-LIVE: disks $(awk '$4 ~ /^(nvme[0-9]+n[0-9]+|vd[a-z]+|sd[a-z]+)$/ {printf "%s(%d MiB) ", $4, $3/1024}' /proc/partitions)"

echo "HV-LIVE: live system ready after $(cut -d. -f1 /proc/uptime) s"
if ! grep -qE '(^| )harvester\\.install\\.automatic(=(true|t|yes|y))?( |$)' /proc/cmdline; then
  # Interactive: hvinstall console on tty1 and on each serial console=ttyS*/ttyAMA*/hvc* named; a shell when it quits.
  size=$(arg hvlive.system_size) && size="--system-size $size"
  for t in tty1 $(for a in $(cat /proc/cmdline); do case "$a" in console=tty[A-Z]*|console=hvc*) a=\${a#console=}; echo "\${a%%,*}" ;; esac; done); do
    [ -c "/dev/$t" ] || continue
    case $t in tty[0-9]*) term=linux ;; *) term=vt220 ;; esac
    (while :; do setsid -c env TERM=$term HV_CONSOLE_TTY=$t sh -c "hvinstall console --source /run/initramfs/live/rootfs.squashfs $size; exec sh" <"/dev/$t" >"/dev/$t" 2>&1; done) &
    echo "HV-LIVE: interactive install: hvinstall console on $t (TERM=$term)"
  done
  wait
fi

config_url=$(arg harvester.install.config_url) && config_url=$(shown_url "$config_url") || config_url='(no config_url: a config volume labelled HARVESTER_CONFIG, cidata or config-2 when one is attached, else the command line only)'
echo "HV-LIVE: automatic install: the config comes from $config_url"

# root=live:URL (PXE, as hvpxe writes it): the OS image comes over HTTP; hvinstall downloads it
# (with resume) and checks it against the URL.sha256 the server publishes before using any of it
# (refused without one, unless hvinstall.unverified_media), then installs it as --source. Otherwise
# the boot medium's rootfs.squashfs is only the fallback: an http(s) install.iso_url in the config
# still wins (its rootfs.squashfs and bundle/ are installed); for iso_url local or none, the medium's is.
source=
live=$(arg root) && case "$live" in live:http://*|live:https://*)
  source=\${live#live:}
  echo "HV-LIVE: the OS image is $(shown_url "$source") (hvinstall downloads and verifies it)" ;;
esac
# hvinstall's automatic mode reads the command line itself: config_url (with Harvester's retries)
# merged under the harvester.* keys, webhooks, and progress to hvinstall.events_url when present.
if [ -n "$source" ]; then
  set -- --cmdline-file /proc/cmdline --source "$source" --progress plain
elif [ -f /run/initramfs/live/rootfs.squashfs ]; then
  set -- --cmdline-file /proc/cmdline --fallback-source /run/initramfs/live/rootfs.squashfs --progress plain
else
  set -- --cmdline-file /proc/cmdline --progress plain
fi
size=$(arg hvlive.system_size) && set -- "$@" --system-size "$size"
dev=$(arg hvlive.device) && set -- "$@" --device "$dev"
echo "HV-LIVE: hvinstall install $*"
start=$(cut -d. -f1 /proc/uptime)
hvinstall install "$@"
rc=$?
took=$(( $(cut -d. -f1 /proc/uptime) - start ))
# A successful automatic install powers off (or reboots) from inside hvinstall; reaching here means
# it did not, or that it failed.
[ $rc -eq 0 ] && finish "install-ok exit=0 seconds=$took" ok
finish "install-failed exit=$rc seconds=$took" fail
`;

/** busybox udhcpc's hook: configure the lease (slirp's 10.0.2.0/24 in QEMU). */
export const UDHCPC_SCRIPT = `#!/bin/sh
case "$1" in
  deconfig) ip -4 addr flush dev "$interface"; ip link set "$interface" up ;;
  bound|renew)
    ip -4 addr flush dev "$interface"
    ip addr add "$ip/\${mask:-24}" dev "$interface"
    [ -n "$router" ] && ip route replace default via "\${router%% *}" dev "$interface"
    : > /etc/resolv.conf
    for d in $dns; do echo "nameserver $d" >> /etc/resolv.conf; done
    ;;
esac
exit 0
`;
