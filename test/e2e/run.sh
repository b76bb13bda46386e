#!/usr/bin/env bash
# make e2e: QEMU (q35, TCG) boots OUR live installer (iso-build/live: Debian's kernel, a small
# initramfs that finds the live medium by its label COS_LIVE, the live root squashfs on it) with
# harvester.install.automatic=true and a config_url served from the host over guestfwd; it installs
# onto an emulated NVMe disk (sparse, 260 GiB) and powers off. Then the installed disk alone boots
# (grub -> cos-img initramfs -> active.img) and its init must report the image it booted. Then a
# negative case, an http(s) iso_url, PXE under legacy BIOS through hvpxe, the hybrid ISO itself as a
# CD-ROM under SeaBIOS and OVMF and as a USB stick under OVMF with Secure Boot enforced, a medium
# that is not found, a second build that must give the same bytes, and an interactive install
# through hvinstall console over the serial line. Then a real systemd node (iso-build/systemd-os)
# installed by hvinstall boots three times and reports its checks as TAP (test/e2e/first-boot.sh).
# Details: docs/e2e.md. Knobs: HV_E2E_STAGES (which stages; default all but 4kn), HV_E2E_OUT,
# HV_E2E_CACHE, HV_E2E_INSTALL_TIMEOUT, HV_E2E_BOOT_TIMEOUT, HV_E2E_SYSTEM_SIZE, HV_E2E_MEM, and the
# older per-stage switches HV_E2E_NEGATIVE=0, HV_E2E_ISO=0, HV_E2E_PXE=0, HV_E2E_CONSOLE=0, HV_E2E_FIRSTBOOT=0, HV_E2E_4KN=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
# The ISO builds take their time from the last commit (iso-build/reproducible.ts): fixed once here,
# so that a commit made while the stages run cannot give the reproducible stage's second build
# another time than the first.
if [ -z "${SOURCE_DATE_EPOCH:-}" ] && t=$(git -C "$REPO" log -1 --format=%ct 2>/dev/null); then export SOURCE_DATE_EPOCH=$t; fi
OUT=${HV_E2E_OUT:-$REPO/.e2e-out}
CACHE=${HV_E2E_CACHE:-$REPO/.e2e-cache}
INSTALL_TIMEOUT=${HV_E2E_INSTALL_TIMEOUT:-3600}
BOOT_TIMEOUT=${HV_E2E_BOOT_TIMEOUT:-900}
SYSTEM_SIZE=${HV_E2E_SYSTEM_SIZE:-256}
MEM=${HV_E2E_MEM:-2048}
OVMF_CODE=/usr/share/OVMF/OVMF_CODE_4M.fd
OVMF_VARS=/usr/share/OVMF/OVMF_VARS_4M.fd
# Secure Boot enforced, Microsoft's keys enrolled (what shim is signed for).
OVMF_SB_CODE=/usr/share/OVMF/OVMF_CODE_4M.ms.fd
OVMF_SB_VARS=/usr/share/OVMF/OVMF_VARS_4M.ms.fd
GUEST_SERVER=10.0.2.100

# Which stages run: HV_E2E_STAGES="install boot-installed ..." (spaces or commas), else all but 4kn
# minus what the older switches turn off.
ALL_STAGES="install boot-installed negative-missing-disk iso-url pxe-bios pxe-uefi http-boot pxe-secureboot console iso-cd-bios iso-cd-uefi iso-usb-sb medium-missing reproducible image-out firstboot 4kn"
if [ -n "${HV_E2E_STAGES:-}" ]; then
  STAGES=" ${HV_E2E_STAGES//,/ } "
else
  STAGES=" ${ALL_STAGES% 4kn} "
  [ "${HV_E2E_NEGATIVE:-1}" = 0 ] && STAGES=${STAGES/ negative-missing-disk / }
  [ "${HV_E2E_ISO:-1}" = 0 ] && STAGES=${STAGES/ iso-url / }
  [ "${HV_E2E_PXE:-1}" = 0 ] && STAGES=${STAGES/ pxe-bios / }
  [ "${HV_E2E_CONSOLE:-1}" = 0 ] && STAGES=${STAGES/ console / }
  [ "${HV_E2E_FIRSTBOOT:-1}" = 0 ] && STAGES=${STAGES/ firstboot / }
  [ "${HV_E2E_4KN:-0}" = 1 ] && STAGES="$STAGES4kn "
fi
wanted() { case "$STAGES" in *" $1 "*) return 0 ;; esac; return 1; }

say() { printf '[e2e %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { say "FAIL: $*" >&2; exit 1; }

for st in $STAGES; do
  case " $ALL_STAGES " in *" $st "*) ;; *) echo "e2e: unknown stage '$st' in HV_E2E_STAGES; stages: $ALL_STAGES" >&2; exit 2 ;; esac
done
if wanted boot-installed && ! wanted install; then echo "e2e: boot-installed boots the disk the install stage writes: add install to HV_E2E_STAGES" >&2; exit 2; fi
[ "$(id -u)" = 0 ] || { echo "e2e: needs root (it installs packages if missing and inspects disk images); run: sudo make e2e" >&2; exit 2; }

# --- what the host needs (make build installs .ci/apt-packages.txt; this covers a partial setup)
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -f "$OVMF_CODE" ] && [ -f "$OVMF_SB_CODE" ] || need+=(ovmf)
command -v socat >/dev/null || need+=(socat)
command -v mksquashfs >/dev/null || need+=(squashfs-tools)
[ -x /bin/busybox ] || need+=(busybox-static)
[ -f /usr/lib/ipxe/ipxe.efi ] || need+=(ipxe)
command -v dnsmasq >/dev/null || need+=(dnsmasq)
if ((${#need[@]})); then
  say "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  flock /tmp/hv-apt.lock sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends ${need[*]}" >/dev/null
fi

# --- every process we start is tracked and ended on exit
PIDS=()
LOOP=
CLEANUPS=() # functions a stage adds to undo what it set up (mounts, network namespaces)
cleanup() {
  local rc=$?
  set +e
  for fn in "${CLEANUPS[@]}"; do "$fn"; done
  [ -n "$LOOP" ] && losetup --detach "$LOOP"
  for pid in "${PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then kill "$pid" 2>/dev/null; sleep 1; kill -9 "$pid" 2>/dev/null; fi
    wait "$pid" 2>/dev/null
  done
  [ $rc -eq 0 ] || say "logs are in $OUT (console-*.log, config-server.log)"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

T0=$(date +%s)
declare -A TIMES
stage_start() { STAGE_T=$(date +%s); say "== $1"; }
stage_end() { TIMES[$1]=$(($(date +%s) - STAGE_T)); say "   $1 took ${TIMES[$1]} s"; }

case "$(realpath -m "$OUT")" in /|"$REPO"|"$HOME") die "HV_E2E_OUT=$OUT would remove too much; point it at a directory of its own" ;; esac
rm -rf "$OUT"
mkdir -p "$OUT/www" "$CACHE/kernel"

# --- 1. the live installer and its ISO (make iso), with a bundle/ the ISO stages read back
stage_start build-live
mkdir -p "$OUT/bundle-src/harvester/images-lists"
printf 'images:\n  common: []\n' > "$OUT/bundle-src/metadata.yaml"
BUNDLE_MARKER="e2e live ISO bundle marker"
echo "$BUNDLE_MARKER" > "$OUT/bundle-src/harvester/images-lists/e2e-live-marker.txt"
# A 30 s grub menu: the ISO stages type at it (test/e2e/install-media.sh), even on a loaded host.
BUILD_ARGS=(--cache "$CACHE" --bundle "$OUT/bundle-src" --grub-timeout 30)
node "$REPO/dist/iso-build/live/cli.js" --out "$OUT/build" "${BUILD_ARGS[@]}" > "$OUT/live-build.json"
build_field() { node -p "const b=require('$OUT/live-build.json'); $1"; }
LIVE="$OUT/build/live"
ISO=$(build_field b.iso)
# The live system as the ISO boots it, but with QEMU loading kernel and initrd (-kernel/-initrd):
# the initramfs still finds the live root on the medium, attached as a CD-ROM.
LIVE_MEDIA=(-kernel "$LIVE/vmlinuz" -initrd "$LIVE/initrd"
  -drive "file=$ISO,if=none,id=cd0,media=cdrom,readonly=on,format=raw" -device ide-cd,drive=cd0)
say "   ISO $(du -h --apparent-size "$ISO" | cut -f1) ($(basename "$ISO")), initrd $(du -h --apparent-size "$LIVE/initrd" | cut -f1), live root $(du -h --apparent-size "$LIVE/live.squashfs" | cut -f1), PXE initrd $(du -h --apparent-size "$LIVE/initrd-pxe" | cut -f1), kernel $(build_field b.kernelVersion)"
stage_end build-live

# --- 2. the config server (the PXE side of an automatic install), reached from the guest via guestfwd
node "$REPO/test/e2e/install-config-server.mjs" --dir "$OUT/www" --port-file "$OUT/server.port" > "$OUT/config-server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do [ -s "$OUT/server.port" ] && break; sleep 0.2; done
[ -s "$OUT/server.port" ] || die "the config server did not start (see $OUT/config-server.log)"
PORT=$(cat "$OUT/server.port")

write_config() { # file device
  sed "s#@DEVICE@#$2#" "$REPO/test/e2e/install-node.yaml" > "$OUT/www/$1"
}
write_config node-1.yaml /dev/nvme0n1
write_config node-missing-disk.yaml /dev/nvme9n1

# run_qemu NAME TIMEOUT qemu-args... : boots, waits for QEMU to exit (the guest powers off) or the
# deadline; returns QEMU's status. The console goes to $OUT/console-NAME.log. FAIL_ON: a console
# line that fails the run at once; DONE_ON: a console line that ends it as wanted (QEMU stopped,
# status 0), for a boot meant to be refused, which never powers off.
run_qemu() {
  local name=$1 timeout=$2; shift 2
  local log="$OUT/console-$name.log"
  local firmware=()
  case "${FIRMWARE:-uefi}" in
    uefi)
      cp "$OVMF_VARS" "$OUT/vars-$name.fd"
      firmware=(-drive if=pflash,format=raw,readonly=on,file="$OVMF_CODE" -drive if=pflash,format=raw,file="$OUT/vars-$name.fd") ;;
    sb) # Secure Boot needs SMM and a secure pflash.
      cp "$OVMF_SB_VARS" "$OUT/vars-$name.fd"
      firmware=(-machine smm=on -global driver=cfi.pflash01,property=secure,value=on
        -drive if=pflash,format=raw,readonly=on,file="$OVMF_SB_CODE" -drive if=pflash,format=raw,file="$OUT/vars-$name.fd") ;;
  esac
  # QEMU_STDIN: the serial console's input (a FIFO when a stage types at grub).
  # QEMU_WRAP: a command to run QEMU under (e.g. `ip netns exec NS` for a tap in a namespace).
  ${QEMU_WRAP:-} qemu-system-x86_64 -machine q35 -accel tcg -cpu "${HV_E2E_CPU:-qemu64}" -m "$MEM" -smp 2 -nographic -no-reboot \
    "${firmware[@]}" "$@" < "${QEMU_STDIN:-/dev/null}" > "$log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  local deadline=$(($(date +%s) + timeout)) last=0
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      kill "$pid"; wait "$pid" 2>/dev/null || true
      tail -n 30 "$log" | tr -d '\r' >&2
      die "$name: no power-off within ${timeout} s (console: $log)"
    fi
    # FAIL_ON: a console line that means the run can only wait for its deadline now.
    if [ -n "${FAIL_ON:-}" ] && tr -d '\r' < "$log" | grep -aE "$FAIL_ON" > /dev/null; then
      kill "$pid"; wait "$pid" 2>/dev/null || true
      tail -n 30 "$log" | tr -d '\r' >&2
      die "$name: the console says /$FAIL_ON/ (console: $log)"
    fi
    if [ -n "${DONE_ON:-}" ] && tr -d '\r' < "$log" | grep -aE "$DONE_ON" > /dev/null; then
      kill "$pid"; wait "$pid" 2>/dev/null || true
      return 0
    fi
    # One progress line a minute so a long TCG run visibly moves.
    if [ $(($(date +%s) - last)) -ge 60 ]; then
      last=$(date +%s)
      say "   $name: $(grep -aE 'HV-LIVE|HVTEST|^\[|step|installed' "$log" | tail -n 1 | tr -d '\r' | cut -c1-150)"
    fi
    sleep 2
  done
  local rc=0
  wait "$pid" || rc=$?
  return $rc
}
console() { tr -d '\r' < "$OUT/console-$1.log"; }
# grep without -q: with pipefail, an early exit of grep -q would fail the pipeline (SIGPIPE to tr).
has_line() { console "$1" | grep -aE "$2" > /dev/null; }
expect_line() { # name regex what
  has_line "$1" "$2" || { console "$1" | tail -n 40 >&2; die "$1: $3 (no line matching /$2/ in $OUT/console-$1.log)"; }
}

netdev() { echo "user,id=n0,restrict=on,guestfwd=tcp:$GUEST_SERVER:80-cmd:socat - TCP:127.0.0.1:$PORT"; }
live_append() { # config file name
  # no_timer_check: under TCG on a loaded host the kernel's IO-APIC timer check can fail and panic.
  echo "console=ttyS0 loglevel=4 panic=-1 no_timer_check harvester.install.automatic=true harvester.install.config_url=http://$GUEST_SERVER/$1 hvlive.system_size=$SYSTEM_SIZE hvlive.on_failure=poweroff"
}

# --- 3. install onto a sparse 260 GiB NVMe disk
if wanted install; then
stage_start install
truncate -s 260G "$OUT/disk.raw"
run_qemu install "$INSTALL_TIMEOUT" \
  "${LIVE_MEDIA[@]}" -append "$(live_append node-1.yaml)" \
  -drive file="$OUT/disk.raw",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2E0001,drive=d0 \
  -netdev "$(netdev)" -device virtio-net-pci,netdev=n0 \
  || die "install: QEMU exited with status $?"
stage_end install
expect_line install '^HV-LIVE: kernel' "the live system did not start"
grep -q 'GET /node-1.yaml 200' "$OUT/config-server.log" || { console install | tail -n 40 >&2; die "install: the guest never fetched its config_url (see $OUT/config-server.log)"; }
expect_line install '^installed /dev/nvme0n1' "the installer did not report a completed install"
expect_line install '^automatic install: poweroff' "the automatic install did not power off by itself"
if has_line install 'HV-LIVE-RESULT install-failed'; then die "install: the live system reported a failed install"; fi
say "   guest: $(console install | grep -aE '^installed ' | head -n 1)"
sgdisk --print "$OUT/disk.raw" | sed -n '/^Number/,$p' > "$OUT/partitions.txt"
sed 's/^/   /' "$OUT/partitions.txt"
# Filesystem labels from the outside, through a read-only loop device (detached on exit).
LOOP=$(losetup --find --show --read-only --partscan "$OUT/disk.raw")
for _ in $(seq 20); do [ -e "${LOOP}p6" ] && break; partprobe "$LOOP" 2>/dev/null; sleep 0.5; done
: > "$OUT/labels.txt"
for p in "$LOOP"p*; do echo "${p#"$LOOP"} $(blkid -p -s TYPE -s LABEL -o export "$p" | tr '\n' ' ')" >> "$OUT/labels.txt"; done
losetup --detach "$LOOP"; LOOP=
sed 's/^/   /' "$OUT/labels.txt"
for label in COS_GRUB COS_OEM COS_RECOVERY COS_STATE COS_PERSISTENT HARV_LH_DEFAULT; do
  grep -q "LABEL=$label " "$OUT/labels.txt" || die "install: no filesystem labelled $label on the disk"
done
say "   disk: $(du -h --apparent-size "$OUT/disk.raw" | cut -f1) apparent, $(du -h "$OUT/disk.raw" | cut -f1) allocated"
# The UEFI boot entry the install reports (the own chain's "hvinstall", an image chain's
# "elemental-shim"), read back from the firmware's VARS file.
expect_line install 'UEFI boot entry Boot[0-9A-F]{4} "[^"]+" -> ' "the install wrote no UEFI boot entry"
ENTRY=$(console install | grep -aoE 'UEFI boot entry Boot[0-9A-F]{4} "[^"]+" -> [^ ]+' | tail -n 1)
ENTRY_LABEL=$(echo "$ENTRY" | sed -E 's/.*"([^"]+)".*/\1/'); ENTRY_LOADER=${ENTRY##* }
NVRAM=$(node "$REPO/test/e2e/boot-entry.mjs" "$OUT/vars-install.fd" "$ENTRY_LABEL" "$ENTRY_LOADER") || die "install: the firmware's VARS lack the boot entry (test/e2e/boot-entry.mjs)"
say "   nvram: $NVRAM"
fi

# --- 4. boot the installed disk alone: OVMF -> EFI/BOOT/BOOTX64.EFI -> grub -> cos-img initramfs -> active.img
if wanted boot-installed; then
stage_start boot-installed
run_qemu boot "$BOOT_TIMEOUT" \
  -drive file="$OUT/disk.raw",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2E0001,drive=d0 \
  -nic none \
  || die "boot: QEMU exited with status $?"
stage_end boot-installed
expect_line boot 'HVTEST-INITRD root=LABEL=COS_STATE image=/cOS/active.img' "grub did not start the cos-img initramfs with the active image"
expect_line boot 'HVTEST-BOOTED image=/cOS/active.img os=hvinstall test OS' "the installed system's init did not run from active.img"
say "   guest: $(console boot | grep -a 'HVTEST-BOOTED' | head -n 1)"
fi

# --- 5. negative: the config names a disk the machine does not have
if wanted negative-missing-disk; then
  stage_start negative-missing-disk
  truncate -s 260G "$OUT/disk-neg.raw"
  run_qemu negative "$INSTALL_TIMEOUT" \
    "${LIVE_MEDIA[@]}" -append "$(live_append node-missing-disk.yaml)" \
    -drive file="$OUT/disk-neg.raw",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2E0002,drive=d0 \
    -netdev "$(netdev)" -device virtio-net-pci,netdev=n0 \
    || die "negative: QEMU exited with status $?"
  stage_end negative-missing-disk
  expect_line negative 'HV-LIVE-RESULT install-failed exit=1 ' "the live system did not report the refused install (exit 1)"
  expect_line negative '/dev/nvme9n1' "the error does not name the missing disk"
  if has_line negative '^installed '; then die "negative: an install was reported on a missing disk"; fi
  used=$(stat -c %b "$OUT/disk-neg.raw")
  [ "$used" = 0 ] || die "negative: the disk that was not named got written ($used blocks allocated)"
  say "   guest: $(console negative | grep -aE 'nvme9n1' | head -n 1 | cut -c1-160)"
  say "   the untouched disk has 0 blocks allocated"
  rm -f "$OUT/disk-neg.raw"
fi

# --- 6. an http(s) install.iso_url: the ISO's rootfs and bundle/ are installed (test/e2e/install-iso.sh)
if wanted iso-url; then
  # shellcheck source=install-iso.sh
  . "$REPO/test/e2e/install-iso.sh"
  stage_start iso-url
  iso_stage
  stage_end iso-url
fi

# --- 7. PXE under legacy BIOS through hvpxe serve (test/e2e/install-pxe.sh), then under UEFI with
# a real dnsmasq running hvpxe's proxy-DHCP configuration (test/e2e/install-pxe-uefi.sh)
if wanted pxe-bios || wanted pxe-uefi || wanted pxe-secureboot; then
  # shellcheck source=install-pxe.sh
  . "$REPO/test/e2e/install-pxe.sh"
fi
if wanted pxe-bios; then
  stage_start pxe-bios
  pxe_stage
  stage_end pxe-bios
fi
if wanted pxe-uefi; then
  # shellcheck source=install-pxe-uefi.sh
  . "$REPO/test/e2e/install-pxe-uefi.sh"
  stage_start pxe-uefi
  pxe_uefi_stage
  stage_end pxe-uefi
fi
# PXE with Secure Boot enforced: shim -> signed grub -> signed kernel from hvpxe (test/e2e/install-pxe-secureboot.sh)
if wanted pxe-secureboot; then
  # shellcheck source=install-pxe-secureboot.sh
  . "$REPO/test/e2e/install-pxe-secureboot.sh"
  stage_start pxe-secureboot
  pxe_secureboot_stage
  stage_end pxe-secureboot
fi
if [ -f "$OUT/pxe/to-install-start" ] && [ -f "$OUT/pxe-uefi/to-install-start" ]; then
  bios_s=$(cat "$OUT/pxe/to-install-start") uefi_s=$(cat "$OUT/pxe-uefi/to-install-start")
  TIMES[pxe-uefi-vs-bios]="power-on to install start: UEFI $uefi_s s, BIOS $bios_s s, ratio $(awk -v u="$uefi_s" -v b="$bios_s" 'BEGIN { printf "%.2f", u / b }')"
  say "   ${TIMES[pxe-uefi-vs-bios]}"
fi

# --- 7b. UEFI HTTP Boot through hvpxe, no PXE or TFTP on the network (test/e2e/install-http-boot.sh)
if wanted http-boot; then
  # shellcheck source=install-pxe.sh
  . "$REPO/test/e2e/install-pxe.sh"
  # shellcheck source=install-http-boot.sh
  . "$REPO/test/e2e/install-http-boot.sh"
  stage_start http-boot
  http_boot_stage
  stage_end http-boot
fi

# --- 8. an interactive install: hvinstall console driven over the serial line (test/e2e/console.sh)
if wanted console; then
  # shellcheck source=console.sh
  . "$REPO/test/e2e/console.sh"
  stage_start console
  console_stage
  stage_end console
fi

# --- 9. the hybrid ISO as a CD-ROM (SeaBIOS, OVMF) and as a USB stick (OVMF, Secure Boot), a
# medium the initramfs cannot find, and a second build (test/e2e/install-media.sh)
# shellcheck source=install-media.sh
. "$REPO/test/e2e/install-media.sh"
for st in iso-cd-bios iso-cd-uefi iso-usb-sb; do
  if wanted $st; then stage_start $st; media_stage $st; stage_end $st; fi
done
if wanted medium-missing; then stage_start medium-missing; medium_missing_stage; stage_end medium-missing; fi
if wanted reproducible; then stage_start reproducible; reproducible_stage; stage_end reproducible; fi

# --- 10. hvinstall image: a qcow2 written on this host boots in QEMU (test/e2e/image-out.sh)
if wanted image-out; then
  # shellcheck source=image-out.sh
  . "$REPO/test/e2e/image-out.sh"
  stage_start image-out
  image_out_stage
  stage_end image-out
fi

# --- 11. the first boot of a real systemd node installed by hvinstall (test/e2e/first-boot.sh)
if wanted firstboot; then
  # shellcheck source=first-boot.sh
  . "$REPO/test/e2e/first-boot.sh"
  firstboot_stage
fi

# --- 12. optional: the UEFI install onto a 4Kn NVMe namespace (test/e2e/install-4kn.sh)
if wanted 4kn; then
  # shellcheck source=install-4kn.sh
  . "$REPO/test/e2e/install-4kn.sh"
  stage_start 4kn
  fourk_stage
  stage_end 4kn
fi

TIMES[total]=$(($(date +%s) - T0))
{
  echo "e2e passed $(date -u +%FT%TZ)"
  for k in build-live ${ALL_STAGES/firstboot/firstboot-build firstboot-install firstboot-boot1 firstboot-boot2 firstboot-passive firstboot-sb-refused} total; do [ -n "${TIMES[$k]:-}" ] && echo "$k: ${TIMES[$k]} s"; done
  if [ -n "${TIMES[pxe-uefi-vs-bios]:-}" ]; then echo "pxe-uefi-vs-bios: ${TIMES[pxe-uefi-vs-bios]}"; fi
} | tee "$OUT/summary.txt"
say "PASS (disk image left at $OUT/disk.raw; consoles in $OUT/console-*.log)"
