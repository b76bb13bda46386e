# Sourced by test/e2e/run.sh (uses its run_qemu, boot_installed_disk, console, expect_line, has_line, live_append, say,
# die, PIDS, OUT, ISO, LIVE, BUILD_ARGS, BUNDLE_MARKER, …). The hybrid ISO that `make iso` builds,
# booted the way an operator boots it:
#   iso-cd-bios  as a CD-ROM under SeaBIOS (El Torito BIOS entry, grub-pc), BIOS install, BIOS boot
#   iso-cd-uefi  as a CD-ROM under OVMF (El Torito UEFI entry: shim, signed grub), UEFI install and boot
#   iso-usb-sb   the same bytes as a USB stick (usb-storage on xHCI, as `dd` would write it) under OVMF
#                with Secure Boot enforced (Microsoft's keys): shim -> Debian's grub -> Debian's kernel
# Each types at grub like an operator: at the menu, `c` for grub's command line, the kernel
# parameters into ${extra_iso_cmdline} (the variable every entry appends) in lines short enough
# not to wrap, Esc back to the menu, the serial-console entry ('v'), Enter (docs/iso.md). Not the
# entry editor: grub 2.06's editor scrambled text typed past its second screen row on the
# serial terminal under SeaBIOS (characters landed out of order), so the install never started.
# The live system finds its medium by label, installs (iso_url local: the medium's rootfs.squashfs
# and bundle/), powers off; then the installed disk boots alone. The disk hvinstall writes today
# carries its own unsigned grub, so the Secure Boot install is booted with Secure Boot off (plain
# OVMF) until the image's own signed chain is installed (docs/iso.md).

# count_on LOG TEXT: how many times TEXT is on the console LOG so far.
count_on() { tr -d '\r' < "$1" | { grep -aoF "$2" || true; } | wc -l; }
# await_redraw LOG TEXT N WHAT: waits until TEXT is on LOG more than N times (grub drew it again),
# then until the console is quiet for a second (grub has drawn the rest of the screen). Prints
# what went wrong and fails after 60 s.
await_redraw() {
  local log=$1 text=$2 n=$3 what=$4 deadline=$(($(date +%s) + 60)) size
  until [ "$(count_on "$log" "$text")" -gt "$n" ]; do
    if [ "$(date +%s)" -ge "$deadline" ]; then echo "grub did not redraw '$text' within 60 s of $what"; return 1; fi
    sleep 0.5
  done
  until size=$(stat -c %s "$log"); sleep 1; [ "$(stat -c %s "$log")" = "$size" ]; do
    if [ "$(date +%s)" -ge "$deadline" ]; then echo "the console did not go quiet within 60 s of $what"; return 1; fi
  done
}
# grub_type LOG FD PARAMS FAILED: waits for grub's menu on the console LOG, then types at it
# through FD. When grub does not answer, it writes why to the file FAILED (run_qemu's FAIL_FILE
# then ends the guest) instead of leaving it at the menu until the install's deadline.
grub_type() {
  local why
  why=$(type_at_grub "$@") || { printf 'typing at grub: %s\n' "$why" > "$4"; return 1; }
}
type_at_grub() {
  local log=$1 fd=$2 params=$3 deadline=$(($(date +%s) + BOOT_TIMEOUT))
  local footer='Press enter to boot the selected OS' entry='serial console ttyS0'
  until [ -f "$log" ] && [ "$(count_on "$log" "$entry")" -gt 0 ]; do
    if [ "$(date +%s)" -ge "$deadline" ]; then echo "no grub menu within $BOOT_TIMEOUT s"; return 1; fi
    sleep 1
  done
  # The parameters in pieces of at most 50 characters: set p1="…", set p2="…", then the variable.
  local w piece= lines=() refs=
  for w in $params; do
    [ "$w" = console=ttyS0 ] && continue # the serial entry has console=ttyS0,115200 last already
    if [ -n "$piece" ] && [ $((${#piece} + 1 + ${#w})) -gt 50 ]; then lines+=("$piece"); piece=$w; else piece=${piece:+$piece }$w; fi
  done
  [ -n "$piece" ] && lines+=("$piece")
  local i n=${#lines[@]} cmds=()
  for ((i = 0; i < n; i++)); do cmds+=("set p$i=\"${lines[i]}\""); refs="$refs \$p$i"; done
  cmds+=("set extra_iso_cmdline=\"${refs# }\"")
  sleep 2
  printf 'c' >&"$fd"; sleep 2          # grub's command line
  local c k
  for c in "${cmds[@]}"; do
    # One key at a time: grub echoes each key and, busy, drops input sent faster (seen under SeaBIOS).
    for ((k = 0; k < ${#c}; k++)); do printf '%s' "${c:k:1}" >&"$fd"; sleep 0.1; done
    printf '\r' >&"$fd"; sleep 1
  done
  # Each key waits for grub to show it took the one before: grub's serial terminal reads a key
  # that comes right after Esc as part of an escape sequence, so an Esc and a 'v' that arrive
  # together (a loaded host) leave the default entry selected, which boots without the serial
  # console.
  n=$(count_on "$log" "$footer")
  printf '\033' >&"$fd"               # Esc: back to the menu
  await_redraw "$log" "$footer" "$n" "Esc" || return 1
  n=$(count_on "$log" "$entry")
  printf 'v' >&"$fd"                   # down to the serial-console entry: grub redraws it highlighted
  await_redraw "$log" "$entry" "$n" "'v'" || return 1
  printf '\r' >&"$fd"                  # boot it
}

# debugfs_cat DISK PARTITION PATH: a file's contents from an ext4 partition of a disk image.
debugfs_cat() {
  LOOP=$(losetup --find --show --read-only --partscan "$1")
  for _ in $(seq 20); do [ -e "${LOOP}p$2" ] && break; partprobe "$LOOP" 2>/dev/null; sleep 0.5; done
  debugfs -R "cat $3" "${LOOP}p$2" 2>/dev/null || true
  losetup --detach "$LOOP"; LOOP=
}

media_stage() {
  local name=$1 firmware boot_firmware media serial disk="$OUT/disk-$1.raw" stick=
  case "$name" in
    iso-cd-bios) firmware=bios; boot_firmware=bios; serial=HVE2E0011
      media=(-drive "file=$ISO,if=none,id=cd1,media=cdrom,readonly=on,format=raw" -device ide-cd,drive=cd1,bootindex=0) ;;
    iso-cd-uefi) firmware=uefi; boot_firmware=uefi; serial=HVE2E0012
      media=(-drive "file=$ISO,if=none,id=cd1,media=cdrom,readonly=on,format=raw" -device ide-cd,drive=cd1,bootindex=0) ;;
    iso-usb-sb) firmware=sb; boot_firmware=uefi; serial=HVE2E0013
      # A 4 GiB stick with the ISO written to its start, as dd leaves it. Named for its stage:
      # the media stages run side by side, and each removes only what it made.
      stick="$OUT/stick-$name.raw"
      truncate -s 4G "$stick"
      dd if="$ISO" of="$stick" bs=4M conv=notrunc status=none
      media=(-device qemu-xhci,id=xhci -drive "if=none,id=stick,format=raw,file=$stick"
        -device usb-storage,bus=xhci.0,drive=stick,removable=on,bootindex=0) ;;
  esac
  truncate -s 260G "$disk"
  local fifo="$OUT/keys-$name" fd
  rm -f "$fifo"; mkfifo "$fifo"
  exec {fd}<>"$fifo"
  rm -f "$OUT/typing-$name.failed"
  # Legacy BIOS: Harvester v1.8's gate refuses it; this run's command line consents, as v1.7 allowed.
  local append; append=$(live_append node-1.yaml)
  if [ "$firmware" = bios ]; then append="$append hvinstall.legacy_bios"; fi
  grub_type "$OUT/console-$name-install.log" "$fd" "$append" "$OUT/typing-$name.failed" &
  PIDS+=($!)
  # Had the typing not reached grub, the live system would wait at its shell: stop at once.
  FAIL_ON='HV-LIVE: interactive install' FAIL_FILE=$OUT/typing-$name.failed \
    QEMU_STDIN=$fifo FIRMWARE=$firmware run_qemu "$name-install" "$INSTALL_TIMEOUT" \
    "${media[@]}" \
    -drive file="$disk",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=$serial,drive=d0 \
    -netdev "$(netdev)" -device virtio-net-pci,netdev=n0 \
    || die "$name-install: QEMU exited with status $?"
  exec {fd}>&-
  rm -f "$fifo"
  expect_line "$name-install" 'HV-LIVE: boot medium /dev/(sr|sd)[a-z0-9]* \(label COS_LIVE\)' "the initramfs did not find the medium by its label"
  # The live init runs the automatic install only when /proc/cmdline has harvester.install.automatic=true.
  expect_line "$name-install" '^HV-LIVE: hvinstall install --cmdline-file /proc/cmdline' "the parameters typed at grub did not reach the kernel command line"
  case "$firmware" in
    bios) expect_line "$name-install" '^HV-LIVE: firmware BIOS' "the ISO did not boot under BIOS" ;;
    uefi) expect_line "$name-install" '^HV-LIVE: firmware UEFI, Secure Boot disabled' "the ISO did not boot under UEFI (Secure Boot off)"
          expect_line "$name-install" '^HV-LIVE: kernel lockdown \[none\]' "the kernel locked itself down without Secure Boot" ;;
    sb) expect_line "$name-install" 'EFI stub: UEFI Secure Boot is enabled' "the kernel was not started with Secure Boot on"
        expect_line "$name-install" '^HV-LIVE: kernel lockdown .*\[(integrity|confidentiality)\]' "the kernel did not lock itself down under Secure Boot"
        expect_line "$name-install" '^HV-LIVE: firmware UEFI, Secure Boot enabled' "the live system does not see Secure Boot enforced" ;;
  esac
  expect_line "$name-install" '^installed /dev/nvme0n1' "the installer did not report a completed install"
  expect_line "$name-install" '^automatic install: poweroff' "the automatic install did not power off by itself"
  expect_line "$name-install" '"from":"fallback".*"/run/initramfs/live/rootfs.squashfs"' "the OS did not come from the medium's rootfs.squashfs"
  local got
  got=$(debugfs_cat "$disk" 5 /.state/var-lib-rancher.bind/hvagent/bundle/harvester/images-lists/e2e-live-marker.txt)
  [ "$got" = "$BUNDLE_MARKER" ] || die "$name: the medium's bundle/ is not on COS_PERSISTENT (read: '$got')"
  say "   guest: $(console "$name-install" | grep -aE '^HV-LIVE: boot medium /' | head -n 1); $(console "$name-install" | grep -aE '^installed ' | head -n 1); the medium's bundle is on COS_PERSISTENT"

  if [ "$firmware" = sb ]; then say "   the installed disk boots under UEFI with Secure Boot off: it carries hvinstall's unsigned grub"; fi
  boot_installed_disk "$name-boot" "$boot_firmware" "$disk" "$serial" "the disk installed from the $name medium"
  rm -f "$disk" ${stick:+"$stick"}
}

# The initramfs with no medium it can take: one CD labelled otherwise, one labelled COS_LIVE but
# from another build. It must say what it waits for, then what it saw, within its deadline.
medium_missing_stage() {
  local other="$OUT/medium-other" foreign="$OUT/medium-foreign"
  mkdir -p "$other" "$foreign/hvlive"
  echo other > "$other/README"
  echo "not this build's live root" > "$foreign/hvlive/live.squashfs"
  xorriso -as mkisofs -quiet -V NOT_COS_LIVE -o "$OUT/other.iso" "$other" 2>/dev/null || die "medium-missing: xorriso failed"
  xorriso -as mkisofs -quiet -V COS_LIVE -o "$OUT/foreign.iso" "$foreign" 2>/dev/null || die "medium-missing: xorriso failed"
  run_qemu medium-missing "$BOOT_TIMEOUT" \
    -kernel "$LIVE/vmlinuz" -initrd "$LIVE/initrd" \
    -append "console=ttyS0 loglevel=4 panic=-1 no_timer_check hvlive.medium_timeout=20 hvlive.on_failure=poweroff" \
    -drive "file=$OUT/other.iso,if=none,id=cd0,media=cdrom,readonly=on,format=raw" -device ide-cd,drive=cd0,bus=ide.0 \
    -drive "file=$OUT/foreign.iso,if=none,id=cd1,media=cdrom,readonly=on,format=raw" -device ide-cd,drive=cd1,bus=ide.1 \
    -netdev hubport,id=n0,hubid=0 -device virtio-net-pci,netdev=n0 \
    || die "medium-missing: QEMU exited with status $?"
  expect_line medium-missing 'HV-LIVE: waiting for the boot medium labelled COS_LIVE \([0-9]+/20 s' "no progress line while waiting"
  expect_line medium-missing 'HV-LIVE: no boot medium labelled COS_LIVE found within 20 s' "no message at the deadline"
  expect_line medium-missing 'HV-LIVE: block devices seen .*sr[0-9]\("NOT_COS_LIVE"\)' "the message does not list the wrongly labelled CD"
  expect_line medium-missing 'HV-LIVE: labelled COS_LIVE but from another build .*sr[0-9]' "the message does not name the other build's medium"
  expect_line medium-missing '^HV-LIVE-RESULT medium-not-found' "no result line"
  if has_line medium-missing 'HV-LIVE: kernel .* up'; then die "medium-missing: the live root started from another build's medium"; fi
  say "   guest: $(console medium-missing | grep -a 'block devices seen' | head -n 1 | cut -c1-160)"
}

# A second build of the same inputs (same commit, same packages) at a later time in other
# directories must give the same bytes for every published artifact.
reproducible_stage() {
  local tmp="$OUT/tmp-rebuild"
  mkdir -p "$tmp"
  TMPDIR="$tmp" node "$REPO/dist/iso-build/live/cli.js" --out "$OUT/build2" "${BUILD_ARGS[@]}" > "$OUT/live-build2.json"
  local a b
  a=$(build_field b.checksums.sha256)
  b=$(node -p "require('$OUT/live-build2.json').checksums.sha256")
  if ! cmp -s "$a" "$b"; then
    diff "$a" "$b" >&2 || true
    die "reproducible: a second build gave different bytes (see above; $OUT/build and $OUT/build2)"
  fi
  say "   two builds, same sha256 for all $(wc -l < "$a") artifacts: $(awk '{print substr($1,1,12) "… " $2}' "$a" | tr '\n' ' ')"
  rm -rf "$OUT/build2" "$OUT/tmp-rebuild"
}

# iso-config-volume: no PXE, no web server, no network at all (the NIC the config names sits on a
# QEMU hub with nothing else on it: Harvester's gate needs it to exist). The installer ISO and a second CD
# written by `hvinstall config-volume`; the command line has harvester.install.automatic=true and no
# config_url, so the live installer discovers the config by its volume label HARVESTER_CONFIG,
# installs from the medium (iso_url local) and powers off; then the installed disk boots alone.
config_volume_stage() {
  local name=iso-config-volume disk="$OUT/disk-config-volume.raw" serial=HVE2E0014 cfg="$OUT/config-volume.yaml" iso="$OUT/config-volume.iso"
  sed "s#@DEVICE@#/dev/nvme0n1#" "$REPO/test/e2e/install-node.yaml" > "$cfg"
  "$REPO/bin/hvinstall" config-volume --config "$cfg" --out "$iso" --force > /dev/null || die "$name: hvinstall config-volume failed"
  truncate -s 260G "$disk"
  FAIL_ON='HV-LIVE: interactive install' run_qemu "$name-install" "$INSTALL_TIMEOUT" \
    -kernel "$LIVE/vmlinuz" -initrd "$LIVE/initrd" \
    -append "console=ttyS0 loglevel=4 panic=-1 no_timer_check harvester.install.automatic=true hvlive.system_size=$SYSTEM_SIZE hvlive.on_failure=poweroff" \
    -drive "file=$ISO,if=none,id=cd0,media=cdrom,readonly=on,format=raw" -device ide-cd,drive=cd0,bus=ide.0 \
    -drive "file=$iso,if=none,id=cd1,media=cdrom,readonly=on,format=raw" -device ide-cd,drive=cd1,bus=ide.1 \
    -drive file="$disk",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=$serial,drive=d0 \
    -netdev hubport,id=n0,hubid=0 -device virtio-net-pci,netdev=n0 \
    || die "$name-install: QEMU exited with status $?"
  expect_line "$name-install" 'looking for a config volume \(no config_url\)' "the installer did not look for a config volume"
  expect_line "$name-install" 'automatic install config loaded.*HARVESTER_CONFIG\(/dev/sr[0-9]\):config\.yaml' "the config did not come from the volume labelled HARVESTER_CONFIG"
  expect_line "$name-install" '^installed /dev/nvme0n1' "the installer did not report a completed install"
  expect_line "$name-install" '^automatic install: poweroff' "the automatic install did not power off by itself"
  if has_line "$name-install" 'HV-LIVE-RESULT install-failed'; then die "$name: the live system reported a failed install"; fi
  say "   guest: $(console "$name-install" | grep -aoE 'HARVESTER_CONFIG\(/dev/sr[0-9]\):config\.yaml' | head -n 1); $(console "$name-install" | grep -aE '^installed ' | head -n 1)"
  boot_installed_disk "$name-boot" uefi "$disk" "$serial" "the disk installed from the config volume"
  rm -f "$disk"
}
