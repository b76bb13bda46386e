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
# The stages run as chains, HV_E2E_JOBS (default 3) at a time. Details: docs/e2e.md.
# Knobs: HV_E2E_STAGES (which stages; default all but 4kn), HV_E2E_JOBS, HV_E2E_OUT,
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
# Two vCPUs for a guest that installs: with one, a live install stopped in mkfs of COS_PERSISTENT
# or HARV_LH_DEFAULT in four of about seventy (QEMU idle, the console silent for minutes; with and
# without Secure Boot and SMM; docs/e2e.md "How long"), never with two. One for a boot of an
# installed disk with the small test OS (BOOT_SMP): ~10 % less CPU, and CPU bounds a run of three
# jobs on two cores. The first boot's systemd boots take two (first-boot.sh).
SMP=${HV_E2E_SMP:-2}
BOOT_SMP=${HV_E2E_SMP:-1}
OVMF_CODE=/usr/share/OVMF/OVMF_CODE_4M.fd
OVMF_VARS=/usr/share/OVMF/OVMF_VARS_4M.fd
# Secure Boot enforced, Microsoft's keys enrolled (what shim is signed for).
OVMF_SB_CODE=/usr/share/OVMF/OVMF_CODE_4M.ms.fd
OVMF_SB_VARS=/usr/share/OVMF/OVMF_VARS_4M.ms.fd
GUEST_SERVER=10.0.2.100

# Which stages run: HV_E2E_STAGES="install boot-installed ..." (spaces or commas), else all but 4kn
# minus what the older switches turn off.
ALL_STAGES="install boot-installed negative-missing-disk iso-url pxe-bios pxe-uefi http-boot pxe-secureboot pxe-tpm console iso-cd-bios iso-cd-uefi iso-usb-sb iso-config-volume medium-missing reproducible image-out firstboot upgrade 4kn"
if [ -n "${HV_E2E_STAGES:-}" ]; then
  STAGES=" ${HV_E2E_STAGES//,/ } "
else
  STAGES=" ${ALL_STAGES% 4kn} "
  [ "${HV_E2E_NEGATIVE:-1}" = 0 ] && STAGES=${STAGES/ negative-missing-disk / }
  [ "${HV_E2E_ISO:-1}" = 0 ] && STAGES=${STAGES/ iso-url / }
  [ "${HV_E2E_PXE:-1}" = 0 ] && STAGES=${STAGES/ pxe-bios / }
  [ "${HV_E2E_CONSOLE:-1}" = 0 ] && STAGES=${STAGES/ console / }
  [ "${HV_E2E_FIRSTBOOT:-1}" = 0 ] && STAGES=${STAGES/ firstboot / }
  [ "${HV_E2E_4KN:-0}" = 1 ] && STAGES="${STAGES}4kn "
fi
wanted() { case "$STAGES" in *" $1 "*) return 0 ;; esac; return 1; }

say() { printf '[e2e %s%s] %s\n' "$(date -u +%H:%M:%S)" "${JOB_TAG:-}" "$*"; }
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
command -v swtpm >/dev/null || need+=(swtpm)
command -v tpm2_createek >/dev/null || need+=(tpm2-tools)
if ((${#need[@]})); then
  say "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  flock /tmp/hv-apt.lock sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends ${need[*]}" >/dev/null
fi

# --- every process we start is tracked and ended on exit
PIDS=()
LOOP=
CLEANUPS=() # functions a stage adds to undo what it set up (mounts, network namespaces)
NETNS=()    # network namespaces a stage made with netns_add
netns_add() { ip netns add "$1" && NETNS+=("$1"); }
cleanup() {
  local rc=$? ns
  set +e
  for fn in "${CLEANUPS[@]}"; do "$fn"; done
  for ns in "${NETNS[@]}"; do ip netns delete "$ns"; done
  [ -n "$LOOP" ] && losetup --detach "$LOOP"
  # A helper's children go with it: the one waiting in a command substitution (the grub typing's
  # wait for a menu) would otherwise outlive it, holding the run's lock, for up to its deadline.
  local kids
  for pid in "${PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kids=$(ps -o pid= --ppid "$pid")
      # shellcheck disable=SC2086 # a list of PIDs
      kill $kids "$pid" 2>/dev/null; sleep 1; kill -9 $kids "$pid" 2>/dev/null
    fi
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
# A stage's time also goes to times.txt: the jobs are subshells, the summary is the parent's.
stage_end() { TIMES[$1]=$(($(date +%s) - STAGE_T)); echo "$1 ${TIMES[$1]}" >> "$OUT/times.txt"; say "   $1 took ${TIMES[$1]} s"; }

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
# The install stage names its disk by a rule (install.device_selector, docs/config.md), not a path.
sed "s#^  device: @DEVICE@#  device_selector: {transport: nvme, min_size: 250GB}#" "$REPO/test/e2e/install-node.yaml" > "$OUT/www/node-install.yaml"
write_config node-missing-disk.yaml /dev/nvme9n1

# end_guest_failed WHY: for run_qemu's loop (its pid, log and name): ends the guest, shows the
# console's last lines and fails the stage with WHY.
end_guest_failed() {
  kill "$pid"; wait "$pid" 2>/dev/null || true
  tail -n 30 "$log" | tr -d '\r' >&2
  die "$name: $1 (console: $log)"
}
# A guest whose console has said nothing for STALL_AFTER seconds, with every vCPU halted (or the VM
# paused), has stopped: a live install logs a line at least every 5 s of a step, and the boots here
# print within a minute of the last line. It has happened to a live install about once in ten whole
# runs (both vCPUs halted waiting for an interrupt, QEMU idle; docs/e2e.md "A guest that stops"),
# and the stage then waited out its hour. A silent guest with a vCPU running is busy, not stopped
# (grub fetching a PXE initrd under a loaded host was silent for 78 s), and is left to its deadline:
# an NMI there would end it (OVMF and grub take one as a fatal exception).
# run_qemu then saves QEMU's view of the CPUs (stall-NAME.txt) and tries two nudges, each given
# STALL_POKE_WAIT seconds: a key press (an interrupt: wakes a guest that missed a timer's) and then
# an NMI (the kernel prints a line about it, and a console write restarts a serial port that missed
# its transmit interrupt, on which a process writing to the console would block). A guest that goes
# on passes, and the run says which nudge it took in stalls.txt and its summary; one that stays
# silent fails the stage at once. Only for a guest whose monitor run_qemu owns (the systemd boots
# bring their own, and wait on links and timeouts by design). HV_E2E_STALL_AFTER=0 turns it off.
STALL_AFTER=${HV_E2E_STALL_AFTER:-150}
STALL_POKE_WAIT=15
STALL_NUDGES=("sendkey shift" "nmi")
monitor_cmd() { # SOCKET COMMAND: one HMP command, its answer on stdout (without the banner, prompt and echo)
  printf '%s\n' "$2" | socat -t 2 - "UNIX-CONNECT:$1" | tr -d '\r' | sed 's/(qemu) *$//' | grep -av '^QEMU .* monitor - type\|^(qemu) '
}
# guest_stopped SOCKET: the VM is paused, or every vCPU is halted (HLT=1 in its registers), waiting
# for an interrupt, at three looks half a second apart (a working guest idles between its I/Os too).
guest_stopped() {
  local flags i
  case $(monitor_cmd "$1" "info status") in *paused*) return 0 ;; esac
  for i in 1 2 3; do
    flags=$(monitor_cmd "$1" "info registers -a" | grep -ao 'HLT=[01]') || return 1
    case $flags in *HLT=0*) return 1 ;; esac
    [ "$i" = 3 ] || sleep 0.5
  done
}
stall_dump() { # SOCKET FILE
  local c
  for c in "info status" "info cpus" "info registers -a" "info lapic 0" "info lapic 1" "info pic" "info irq"; do
    echo "== $c"; monitor_cmd "$1" "$c"
  done > "$2" 2>&1
}

# run_qemu NAME TIMEOUT qemu-args... : boots, waits for QEMU to exit (the guest powers off) or the
# deadline; returns QEMU's status. The console goes to $OUT/console-NAME.log. FAIL_ON: a console
# line that fails the run at once; DONE_ON: a console line that ends it as wanted (QEMU stopped,
# status 0), for a boot meant to be refused, which never powers off. GRUB_ENTER=1: press Enter at
# the first grub menu countdown, as an operator at the console would, instead of waiting it out
# (grub spins the CPU while it counts down: ~10 CPU-s a boot under TCG).
run_qemu() {
  local name=$1 timeout=$2; shift 2
  local log="$OUT/console-$name.log" keys="" keys_fd="" entered=""
  if [ -n "${GRUB_ENTER:-}" ]; then
    keys="$OUT/keys-$name"; rm -f "$keys"; mkfifo "$keys"
    exec {keys_fd}<>"$keys"
  fi
  local firmware=() smp=${QEMU_SMP:-$SMP}
  case "${FIRMWARE:-uefi}" in
    uefi)
      cp "$OVMF_VARS" "$OUT/vars-$name.fd"
      firmware=(-drive if=pflash,format=raw,readonly=on,file="$OVMF_CODE" -drive if=pflash,format=raw,file="$OUT/vars-$name.fd") ;;
    sb) # Secure Boot needs SMM and a secure pflash.
      cp "$OVMF_SB_VARS" "$OUT/vars-$name.fd"
      firmware=(-machine smm=on -global driver=cfi.pflash01,property=secure,value=on
        -drive if=pflash,format=raw,readonly=on,file="$OVMF_SB_CODE" -drive if=pflash,format=raw,file="$OUT/vars-$name.fd") ;;
  esac
  local monitor=() sock="" size=-1 quiet_since poked="" nudge=0
  case " $* " in *" -monitor "*) ;; *)
    if [ "$STALL_AFTER" -gt 0 ]; then
      sock="$OUT/monitor-$name.sock"; rm -f "$sock"
      monitor=(-monitor "unix:$sock,server=on,wait=off")
    fi ;;
  esac
  # QEMU_STDIN: the serial console's input (a FIFO when a stage types at grub).
  # QEMU_WRAP: a command to run QEMU under (e.g. `ip netns exec NS` for a tap in a namespace).
  # QEMU_SMP: this guest's vCPUs, when not $SMP.
  ${QEMU_WRAP:-} qemu-system-x86_64 -machine q35 -accel tcg -cpu "${HV_E2E_CPU:-qemu64}" -m "$MEM" -smp "$smp" -nographic -no-reboot \
    "${firmware[@]}" "${monitor[@]}" "$@" < "${QEMU_STDIN:-${keys:-/dev/null}}" > "$log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  local deadline=$(($(date +%s) + timeout)) last=0 now s
  quiet_since=$(date +%s)
  while kill -0 "$pid" 2>/dev/null; do
    now=$(date +%s)
    if [ "$now" -ge "$deadline" ]; then end_guest_failed "no power-off within ${timeout} s"; fi
    if [ -n "$sock" ]; then
      s=$(stat -c %s "$log")
      if [ "$s" != "$size" ]; then
        if [ -n "$poked" ]; then
          echo "$name: console silent $((now - quiet_since)) s, went on after \`${STALL_NUDGES[nudge - 1]}\` (QEMU's state when it stopped: stall-$name.txt)" >> "$OUT/stalls.txt"
          say "   $name: the guest went on after \`${STALL_NUDGES[nudge - 1]}\` ($((now - quiet_since)) s silent; stall-$name.txt)"
          poked=""
        fi
        size=$s; quiet_since=$now
      elif { [ -z "$poked" ] && [ $((now - quiet_since)) -ge "$STALL_AFTER" ]; } || { [ -n "$poked" ] && [ $((now - poked)) -ge "$STALL_POKE_WAIT" ]; }; then
        if ! guest_stopped "$sock"; then
          if [ -n "$poked" ]; then
            echo "$name: console silent $((now - quiet_since)) s, a vCPU running again after \`${STALL_NUDGES[nudge - 1]}\` (QEMU's state when it stopped: stall-$name.txt)" >> "$OUT/stalls.txt"
          fi
          say "   $name: the console has been silent for $((now - quiet_since)) s with a vCPU running: busy, not stopped; watching again in ${STALL_AFTER} s"
          quiet_since=$now poked=""
          continue
        fi
        if [ -z "$poked" ]; then nudge=0; stall_dump "$sock" "$OUT/stall-$name.txt"; fi
        if [ "$nudge" -ge "${#STALL_NUDGES[@]}" ]; then
          end_guest_failed "the guest stopped: its console silent for $((now - quiet_since)) s, still after a key press and an NMI (QEMU's state when it stopped: $OUT/stall-$name.txt)"
        fi
        monitor_cmd "$sock" "${STALL_NUDGES[nudge]}" > /dev/null 2>&1 || true
        say "   $name: the console has been silent for $((now - quiet_since)) s$([ -z "$poked" ] && echo ": QEMU's state saved to stall-$name.txt"); trying \`${STALL_NUDGES[nudge]}\`"
        nudge=$((nudge + 1)) poked=$now
      fi
    fi
    # FAIL_ON: a console line that means the run can only wait for its deadline now.
    if [ -n "${FAIL_ON:-}" ] && tr -d '\r' < "$log" | grep -aE "$FAIL_ON" > /dev/null; then
      end_guest_failed "the console says /$FAIL_ON/"
    fi
    # FAIL_FILE: a file whose appearance (with the reason in it) means the same.
    if [ -n "${FAIL_FILE:-}" ] && [ -s "$FAIL_FILE" ]; then end_guest_failed "$(cat "$FAIL_FILE")"; fi
    if [ -n "$keys" ] && [ -z "$entered" ] && grep -a 'The highlighted entry will be executed automatically' "$log" > /dev/null; then
      printf '\r' >&"$keys_fd"; entered=1
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
    if [ -n "$keys" ] && [ -z "$entered" ]; then sleep 0.5; else sleep 2; fi
  done
  local rc=0
  wait "$pid" || rc=$?
  if [ -n "$keys" ]; then exec {keys_fd}>&-; rm -f "$keys"; fi
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

# --- 3. the stages. Each is a function of test/e2e/*.sh; a job runs one chain of stages (a stage
# that needs another's result shares its chain) and HV_E2E_JOBS jobs (default 3) run at once. Under
# TCG a guest keeps about one core busy and waits on firmware menus, DHCP and power-off countdowns
# for the rest: one job uses ~1.0 of the two cores, two ~1.7, three ~1.9 (docs/e2e.md "How long").
for f in install-live install-iso install-pxe install-pxe-uefi install-pxe-secureboot install-http-boot install-pxe-tpm console install-media image-out first-boot upgrade install-4kn; do
  # shellcheck source=/dev/null
  . "$REPO/test/e2e/$f.sh"
done
run_stage() {
  if [ "$1" = firstboot ]; then firstboot_stage; return; fi # it times its own parts
  if [ "$1" = upgrade ]; then upgrade_stage; return; fi     # so does this one
  stage_start "$1"
  case $1 in
    install) install_stage ;;                       # onto a sparse 260 GiB NVMe disk
    boot-installed) boot_installed_stage ;;         # that disk alone: OVMF -> grub -> cos-img initramfs -> active.img
    negative-missing-disk) negative_stage ;;        # the config names a disk the machine does not have
    iso-url) iso_stage ;;                           # an http(s) install.iso_url: its rootfs and bundle/ installed
    pxe-bios) pxe_stage ;;                          # PXE under legacy BIOS through hvpxe serve
    pxe-uefi) pxe_uefi_stage ;;                     # PXE under UEFI, a real dnsmasq running hvpxe's proxy-DHCP
    http-boot) http_boot_stage ;;                   # UEFI HTTP Boot through hvpxe, no PXE or TFTP
    pxe-secureboot) pxe_secureboot_stage ;;         # shim -> signed grub -> signed kernel from hvpxe
    pxe-tpm) pxe_tpm_stage ;;                       # a machine enrolled by its TPM's EK installs; another TPM is refused
    console) console_stage ;;                       # hvinstall console driven over the serial line
    iso-cd-bios | iso-cd-uefi | iso-usb-sb) media_stage "$1" ;; # the hybrid ISO as a CD-ROM or a USB stick
    iso-config-volume) config_volume_stage ;;        # no network: the config from a second CD by its label
    medium-missing) medium_missing_stage ;;         # a medium the initramfs cannot find
    reproducible) reproducible_stage ;;             # a second build gives the same bytes
    image-out) image_out_stage ;;                   # hvinstall image: a qcow2 written here boots
    4kn) fourk_stage ;;                             # the UEFI install onto a 4Kn NVMe namespace
  esac
  stage_end "$1"
}
# The chains, longest first so that the jobs end close together (figures: docs/e2e.md "How long").
CHAINS=("firstboot" "upgrade" "pxe-secureboot" "pxe-uefi" "pxe-tpm" "iso-cd-bios" "iso-cd-uefi" "http-boot" "iso-usb-sb"
  "console" "pxe-bios" "install boot-installed" "iso-url" "iso-config-volume" "negative-missing-disk" "4kn" "medium-missing"
  "image-out" "reproducible")
JOBS=${HV_E2E_JOBS:-3}
case $JOBS in '' | *[!0-9]* | 0) die "HV_E2E_JOBS=$JOBS: give the number of stage chains to run at once (1 runs them one by one)" ;; esac

# run_chain STAGE...: one job, in a subshell of its own: its QEMU, loop device and namespaces are
# its own and its EXIT trap undoes them, also when the parent ends it.
run_chain() {
  PIDS=() NETNS=() LOOP= JOB_TAG=" $1" RUNNING=() # the parent's, not this job's
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  local st
  for st in "$@"; do run_stage "$st"; done
}
declare -A RUNNING=() # job PID -> its chain
FAILED=
end_jobs() { # TERM, not KILL: each job's trap must still undo what it set up
  local pid
  for pid in "${!RUNNING[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${!RUNNING[@]}"; do wait "$pid" 2>/dev/null || true; done
  RUNNING=()
}
CLEANUPS=(end_jobs "${CLEANUPS[@]}")
PENDING=()
for chain in "${CHAINS[@]}"; do
  picked=
  for st in $chain; do wanted "$st" && picked+="$st "; done
  [ -n "$picked" ] && PENDING+=("${picked% }")
done
say "   ${#PENDING[@]} chains, $JOBS at a time"
while ((${#PENDING[@]})) || ((${#RUNNING[@]})); do
  while [ -z "$FAILED" ] && ((${#PENDING[@]})) && ((${#RUNNING[@]} < JOBS)); do
    # shellcheck disable=SC2086 # a chain is a list of stage names
    run_chain ${PENDING[0]} &
    RUNNING[$!]=${PENDING[0]}
    say "   job $! started: ${PENDING[0]}"
    PENDING=("${PENDING[@]:1}")
  done
  ((${#RUNNING[@]})) || break
  rc=0
  wait -n -p done_pid "${!RUNNING[@]}" || rc=$?
  chain=${RUNNING[$done_pid]}
  unset "RUNNING[$done_pid]"
  if [ "$rc" -ne 0 ] && [ -z "$FAILED" ]; then
    FAILED="$chain (status $rc)"
    say "   job $done_pid ($chain) failed: ending the others"
    end_jobs
  fi
done
[ -z "$FAILED" ] || die "stage chain $FAILED (its lines above start with FAIL)"

while read -r k v; do TIMES[$k]=$v; done < <(cat "$OUT/times.txt" 2>/dev/null)
if [ -f "$OUT/pxe/to-install-start" ] && [ -f "$OUT/pxe-uefi/to-install-start" ]; then
  bios_s=$(cat "$OUT/pxe/to-install-start") uefi_s=$(cat "$OUT/pxe-uefi/to-install-start")
  TIMES[pxe-uefi-vs-bios]="power-on to install start: UEFI $uefi_s s, BIOS $bios_s s, ratio $(awk -v u="$uefi_s" -v b="$bios_s" 'BEGIN { printf "%.2f", u / b }')"
  say "   ${TIMES[pxe-uefi-vs-bios]}"
fi
TIMES[total]=$(($(date +%s) - T0))
summed=0
for st in $ALL_STAGES; do [ "$st" = firstboot ] || [ "$st" = upgrade ] || summed=$((summed + ${TIMES[$st]:-0})); done
for part in build install boot1 boot2 passive sb-refused; do summed=$((summed + ${TIMES[firstboot-$part]:-0})); done
UPGRADE_PARTS="upgrade-build upgrade-install upgrade-v2 upgrade-v3 upgrade-v4 upgrade-v5"
for part in $UPGRADE_PARTS; do summed=$((summed + ${TIMES[$part]:-0})); done
{
  echo "e2e passed $(date -u +%FT%TZ)"
  stages=${ALL_STAGES/firstboot/firstboot-build firstboot-install firstboot-boot1 firstboot-boot2 firstboot-passive firstboot-sb-refused}
  for k in build-live ${stages/upgrade/$UPGRADE_PARTS} total; do [ -n "${TIMES[$k]:-}" ] && echo "$k: ${TIMES[$k]} s"; done
  echo "stages summed: $summed s, $JOBS at a time"
  if [ -n "${TIMES[pxe-uefi-vs-bios]:-}" ]; then echo "pxe-uefi-vs-bios: ${TIMES[pxe-uefi-vs-bios]}"; fi
  if [ -s "$OUT/stalls.txt" ]; then sed 's/^/stalled: /' "$OUT/stalls.txt"; fi
} | tee "$OUT/summary.txt"
say "PASS (disk image left at $OUT/disk.raw; consoles in $OUT/console-*.log)"
