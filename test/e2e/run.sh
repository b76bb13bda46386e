#!/usr/bin/env bash
# make e2e: QEMU (q35, TCG, OVMF) boots OUR live installer (iso-build/live: Debian kernel + an
# initramfs with node, hvinstall and the disk tools) with harvester.install.automatic=true and a
# config_url served from the host over guestfwd; it installs onto an emulated NVMe disk (sparse,
# 260 GiB) and powers off. Then the installed disk alone boots under OVMF (grub -> cos-img
# initramfs -> active.img) and its init must report the image it booted. Then a negative case: a
# config naming a missing disk must fail on the console, power off, and leave its disk untouched.
# Then the PXE path under legacy BIOS: iPXE -> hvpxe serve -> the same live system -> BIOS install -> boot.
# Details: docs/e2e.md. Knobs: HV_E2E_OUT, HV_E2E_CACHE, HV_E2E_INSTALL_TIMEOUT, HV_E2E_BOOT_TIMEOUT,
# HV_E2E_SYSTEM_SIZE, HV_E2E_MEM, HV_E2E_NEGATIVE=0 (skip the negative case), HV_E2E_PXE=0 (skip the
# PXE-under-BIOS case through hvpxe serve, test/e2e/install-pxe.sh), HV_E2E_4KN=1 (add a UEFI
# install + boot on a 4Kn NVMe namespace, test/e2e/install-4kn.sh), HV_E2E_FIRSTBOOT=0 (skip the
# systemd OS first boot, test/e2e/first-boot.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
OUT=${HV_E2E_OUT:-$REPO/.e2e-out}
CACHE=${HV_E2E_CACHE:-$REPO/.e2e-cache}
INSTALL_TIMEOUT=${HV_E2E_INSTALL_TIMEOUT:-3600}
BOOT_TIMEOUT=${HV_E2E_BOOT_TIMEOUT:-900}
SYSTEM_SIZE=${HV_E2E_SYSTEM_SIZE:-256}
MEM=${HV_E2E_MEM:-2048}
OVMF_CODE=/usr/share/OVMF/OVMF_CODE_4M.fd
OVMF_VARS=/usr/share/OVMF/OVMF_VARS_4M.fd
GUEST_SERVER=10.0.2.100

say() { printf '[e2e %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { say "FAIL: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || { echo "e2e: needs root (it installs packages if missing and inspects disk images); run: sudo make e2e" >&2; exit 2; }

# --- what the host needs (make build installs .ci/apt-packages.txt; this covers a partial setup)
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -f "$OVMF_CODE" ] || need+=(ovmf)
command -v socat >/dev/null || need+=(socat)
command -v mksquashfs >/dev/null || need+=(squashfs-tools)
[ -x /bin/busybox ] || need+=(busybox-static)
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

# --- 1. the live installer
stage_start build-live
node "$REPO/dist/iso-build/live/cli.js" --out "$OUT/live" --cache "$CACHE" > "$OUT/live-build.json"
say "   initrd $(du -h --apparent-size "$OUT/live/initrd.zst" | cut -f1), kernel $(node -p "require('$OUT/live-build.json').kernelVersion")"
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

# run_qemu NAME TIMEOUT MARKER-REGEX qemu-args... : boots, waits for QEMU to exit (the guest powers
# off) or the deadline; returns QEMU's status. The console goes to $OUT/console-NAME.log.
run_qemu() {
  local name=$1 timeout=$2; shift 2
  local log="$OUT/console-$name.log"
  local firmware=()
  if [ "${FIRMWARE:-uefi}" = uefi ]; then
    cp "$OVMF_VARS" "$OUT/vars-$name.fd"
    firmware=(-drive if=pflash,format=raw,readonly=on,file="$OVMF_CODE" -drive if=pflash,format=raw,file="$OUT/vars-$name.fd")
  fi
  qemu-system-x86_64 -machine q35 -accel tcg -cpu max -m "$MEM" -smp 2 -nographic -no-reboot \
    "${firmware[@]}" "$@" < /dev/null > "$log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  local deadline=$(($(date +%s) + timeout)) last=0
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      kill "$pid"; wait "$pid" 2>/dev/null || true
      tail -n 30 "$log" | tr -d '\r' >&2
      die "$name: no power-off within ${timeout} s (console: $log)"
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
stage_start install
truncate -s 260G "$OUT/disk.raw"
run_qemu install "$INSTALL_TIMEOUT" \
  -kernel "$OUT/live/vmlinuz" -initrd "$OUT/live/initrd.zst" -append "$(live_append node-1.yaml)" \
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

# --- 4. boot the installed disk alone: OVMF -> EFI/BOOT/BOOTX64.EFI -> grub -> cos-img initramfs -> active.img
stage_start boot-installed
run_qemu boot "$BOOT_TIMEOUT" \
  -drive file="$OUT/disk.raw",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2E0001,drive=d0 \
  -nic none \
  || die "boot: QEMU exited with status $?"
stage_end boot-installed
expect_line boot 'HVTEST-INITRD root=LABEL=COS_STATE image=/cOS/active.img' "grub did not start the cos-img initramfs with the active image"
expect_line boot 'HVTEST-BOOTED image=/cOS/active.img os=hvinstall test OS' "the installed system's init did not run from active.img"
say "   guest: $(console boot | grep -a 'HVTEST-BOOTED' | head -n 1)"

# --- 5. negative: the config names a disk the machine does not have
if [ "${HV_E2E_NEGATIVE:-1}" != 0 ]; then
  stage_start negative-missing-disk
  truncate -s 260G "$OUT/disk-neg.raw"
  run_qemu negative "$INSTALL_TIMEOUT" \
    -kernel "$OUT/live/vmlinuz" -initrd "$OUT/live/initrd.zst" -append "$(live_append node-missing-disk.yaml)" \
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
if [ "${HV_E2E_ISO:-1}" != 0 ]; then
  # shellcheck source=install-iso.sh
  . "$REPO/test/e2e/install-iso.sh"
  stage_start iso-url
  iso_stage
  stage_end iso-url
fi

# --- 7. PXE under legacy BIOS through hvpxe serve (test/e2e/install-pxe.sh)
if [ "${HV_E2E_PXE:-1}" != 0 ]; then
  # shellcheck source=install-pxe.sh
  . "$REPO/test/e2e/install-pxe.sh"
  stage_start pxe-bios
  pxe_stage
  stage_end pxe-bios
fi

# --- 8. optional: the UEFI install onto a 4Kn NVMe namespace (test/e2e/install-4kn.sh)
if [ "${HV_E2E_4KN:-0}" = 1 ]; then
  # shellcheck source=install-4kn.sh
  . "$REPO/test/e2e/install-4kn.sh"
  stage_start 4kn
  fourk_stage
  stage_end 4kn
fi

# --- 9. the first boot of a real systemd node installed by hvinstall (test/e2e/first-boot.sh)
if [ "${HV_E2E_FIRSTBOOT:-1}" != 0 ]; then
  # shellcheck source=first-boot.sh
  . "$REPO/test/e2e/first-boot.sh"
  firstboot_stage
fi

TIMES[total]=$(($(date +%s) - T0))
{
  echo "e2e passed $(date -u +%FT%TZ)"
  for k in build-live install boot-installed negative-missing-disk iso-url pxe-bios 4kn firstboot-build firstboot-install firstboot-boot1 firstboot-boot2 firstboot-passive total; do [ -n "${TIMES[$k]:-}" ] && echo "$k: ${TIMES[$k]} s"; done
} | tee "$OUT/summary.txt"
say "PASS (disk image left at $OUT/disk.raw; consoles in $OUT/console-*.log)"
