# Sourced by test/e2e/run.sh for the console stage (uses its run_qemu, boot_installed_disk, expect_line, say, die, OUT, …).
# An interactive install: the live system without harvester.install.automatic starts hvinstall
# console on its serial line; test/e2e/console-drive.mjs, on the host, reads that screen through a
# headless terminal emulator and types the answers (create mode, DHCP from slirp, a static VIP),
# confirms, and waits for the install; the console reboots the guest. Then the installed disk boots,
# its kernel on ttyS0 (the console defaults install.tty to the console it ran on, as Harvester's
# does) with no_timer_check (a harvester.* key on the command line, which the console keeps).
console_stage() {
  local sock="$OUT/console-serial.sock" qlog="$OUT/console-console-qemu.log"
  rm -f "$sock"
  truncate -s 260G "$OUT/disk-console.raw"
  cp "$OVMF_VARS" "$OUT/vars-console.fd"
  # The serial line is a socket the driver connects to; logfile= keeps what the guest wrote.
  qemu-system-x86_64 -machine q35 -accel tcg -cpu "${HV_E2E_CPU:-qemu64}" -m "$MEM" -smp "$SMP" -display none -monitor none -no-reboot \
    -drive if=pflash,format=raw,readonly=on,file="$OVMF_CODE" -drive if=pflash,format=raw,file="$OUT/vars-console.fd" \
    -chardev socket,id=s0,path="$sock",server=on,wait=off,logfile="$OUT/console-console.log" -serial chardev:s0 \
    "${LIVE_MEDIA[@]}" \
    -append "console=ttyS0 loglevel=4 panic=-1 no_timer_check hvlive.system_size=$SYSTEM_SIZE harvester.os.additional_kernel_arguments=no_timer_check" \
    -drive file="$OUT/disk-console.raw",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2E0009,drive=d0 \
    -netdev user,id=n0,restrict=on -device virtio-net-pci,netdev=n0 > "$qlog" 2>&1 &
  local qemu=$!
  PIDS+=("$qemu")
  node "$REPO/test/e2e/console-drive.mjs" --socket "$sock" --device /dev/nvme0n1 --timeout "$INSTALL_TIMEOUT" --report "$OUT/console-drive.json" \
    | sed 's/^/   /' || die "console: the driver failed (screen in $OUT/console-drive.json, serial log $OUT/console-console.log)"
  local deadline=$(($(date +%s) + 120))
  while kill -0 "$qemu" 2>/dev/null; do
    [ "$(date +%s)" -lt "$deadline" ] || die "console: QEMU did not exit after the guest rebooted"
    sleep 1
  done
  grep -aq 'HV-LIVE: interactive install: hvinstall console on ttyS0 (TERM=vt220)' "$OUT/console-console.log" \
    || die "console: the live init did not start hvinstall console on the serial line"
  LOOP=$(losetup --find --show --read-only --partscan "$OUT/disk-console.raw")
  for _ in $(seq 20); do [ -e "${LOOP}p6" ] && break; partprobe "$LOOP" 2>/dev/null; sleep 0.5; done
  local labels="" hostname
  for p in "$LOOP"p*; do labels="$labels $(blkid -p -s LABEL -o value "$p")"; done
  hostname=$(debugfs -R "cat /harvester.config" "${LOOP}p2" 2>/dev/null | grep -a 'e2e-console-node' || true)
  losetup --detach "$LOOP"; LOOP=
  for label in COS_GRUB COS_OEM COS_RECOVERY COS_STATE COS_PERSISTENT HARV_LH_DEFAULT; do
    case " $labels " in *" $label "*) ;; *) die "console: no filesystem labelled $label on the disk (got:$labels)" ;; esac
  done
  [ -n "$hostname" ] || die "console: /oem/harvester.config on COS_OEM does not carry the hostname typed on the console"
  boot_installed_disk console-boot uefi "$OUT/disk-console.raw" HVE2E0009 "the disk the console installed"
  say "   $(node -p "const r=require('$OUT/console-drive.json'); 'first screen after ' + r.firstScreenS + ' s, install ' + r.installS + ' s, total ' + r.totalS + ' s'")"
  rm -f "$OUT/disk-console.raw"
}
