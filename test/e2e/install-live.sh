# Sourced by test/e2e/run.sh (uses its run_qemu, expect_line, has_line, console, say, die, OUT,
# REPO, LIVE_MEDIA, live_append, netdev, INSTALL_TIMEOUT, BOOT_TIMEOUT, LOOP). The automatic install
# of the live system onto a sparse 260 GiB NVMe disk, the boot of that disk alone, and a config
# that names a disk the machine does not have.

# live_automatic_install NAME CONFIG DISK SERIAL: the live system boots with the config server's
# CONFIG as its config_url and a new sparse 260 GiB NVMe DISK, runs its automatic install and powers off.
# Further arguments go to QEMU before the install disk (another disk the rule must pass over).
live_automatic_install() {
  local name=$1 config=$2 disk=$3 serial=$4
  shift 4
  truncate -s 260G "$disk"
  run_qemu "$name" "$INSTALL_TIMEOUT" \
    "${LIVE_MEDIA[@]}" -append "$(live_append "$config")" "$@" \
    -drive file="$disk",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial="$serial",drive=d0 \
    -netdev "$(netdev)" -device virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56 \
    || die "$name: QEMU exited with status $?"
}

# install: the install writes every partition with its label and a UEFI boot entry into the VARS.
install_stage() {
  local p want entry label loader nvram
  # A 16 GiB NVMe disk sits before the install disk on the PCI bus: the config's rule (transport nvme,
  # min_size 250GB) must pass over it to the 260 GiB one and leave it unwritten. Which of the two is
  # nvme0 is the kernel's choice (NVMe probes asynchronously), so the disk taken is checked by what
  # was written, not by its kernel name.
  truncate -s 16G "$OUT/disk-small.raw"
  live_automatic_install install node-install.yaml "$OUT/disk.raw" HVE2E0001 \
    -drive file="$OUT/disk-small.raw",if=none,format=raw,id=d9,cache=unsafe -device nvme,serial=HVE2E0009,drive=d9
  expect_line install '^HV-LIVE: kernel' "the live system did not start"
  grep -q 'GET /node-install.yaml 200' "$OUT/config-server.log" || { console install | tail -n 40 >&2; die "install: the guest never fetched its config_url (see $OUT/config-server.log)"; }
  expect_line install '^installed /dev/nvme[0-9]n1' "the installer did not report a completed install"
  # The hardware gate's lines say which disk the rule took and why it passed over the other.
  expect_line install '^  install\.device_selector \(size 250GB\.\.any, transport nvme\): /dev/nvme[0-9]n1' "the install did not say which disk the rule took"
  expect_line install '^    - /dev/nvme[0-9]n1 \(17\.2 GB, nvme, .*serial HVE2E0009\): 17\.2 GB is below min_size 250GB' "the install did not say why the rule passed over the 16 GiB disk"
  [ "$(stat -c %b "$OUT/disk-small.raw")" = 0 ] || die "install: the disk the rule passed over got written"
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
  # /oem/harvester.config names the disk the rule chose by path, for Harvester's own tools.
  debugfs -R 'cat /harvester.config' "${LOOP}p2" 2>/dev/null | grep -E '^    (device|deviceselector):' > "$OUT/oem-device.txt" || true
  # The management NIC's name is pinned by its permanent MAC (the one live_automatic_install gives it).
  debugfs -R 'cat /grubenv' "${LOOP}p2" 2>/dev/null | grep -a '^third_party_kernel_args=' > "$OUT/oem-kargs.txt" || true
  losetup --detach "$LOOP"; LOOP=
  sed 's/^/   oem: /' "$OUT/oem-device.txt"
  # The live system has no udev (no by-id links), so the path is the kernel name; that the rule took
  # the 260 GiB disk is what the labels below and the unwritten 16 GiB disk show.
  grep -qxE '    device: /dev/(nvme[0-9]n1|disk/by-id/nvme-QEMU_NVMe_Ctrl_HVE2E0001)' "$OUT/oem-device.txt" || die "install: /oem/harvester.config does not record the chosen disk as a plain path"
  if grep -q deviceselector "$OUT/oem-device.txt"; then die "install: /oem/harvester.config still carries the rule"; fi
  sed 's/^/   oem: /' "$OUT/oem-kargs.txt"
  grep -qw 'ifname=eth0:52:54:00:12:34:56' "$OUT/oem-kargs.txt" || die "install: /oem/grubenv does not pin the management NIC eth0 to its MAC (third_party_kernel_args: $(cat "$OUT/oem-kargs.txt"))"
  sed 's/^/   /' "$OUT/labels.txt"
  for want in COS_GRUB COS_OEM COS_RECOVERY COS_STATE COS_PERSISTENT HARV_LH_DEFAULT; do
    grep -q "LABEL=$want " "$OUT/labels.txt" || die "install: no filesystem labelled $want on the disk"
  done
  say "   disk: $(du -h --apparent-size "$OUT/disk.raw" | cut -f1) apparent, $(du -h "$OUT/disk.raw" | cut -f1) allocated"
  # The UEFI boot entry the install reports (the own chain's "hvinstall", an image chain's
  # "elemental-shim"), read back from the firmware's VARS file.
  expect_line install 'UEFI boot entry Boot[0-9A-F]{4} "[^"]+" -> ' "the install wrote no UEFI boot entry"
  entry=$(console install | grep -aoE 'UEFI boot entry Boot[0-9A-F]{4} "[^"]+" -> [^ ]+' | tail -n 1)
  label=$(echo "$entry" | sed -E 's/.*"([^"]+)".*/\1/'); loader=${entry##* }
  nvram=$(node "$REPO/test/e2e/boot-entry.mjs" "$OUT/vars-install.fd" "$label" "$loader") || die "install: the firmware's VARS lack the boot entry (test/e2e/boot-entry.mjs)"
  say "   nvram: $nvram"
}

# boot_installed_disk NAME FIRMWARE DISK SERIAL WHAT: DISK alone (no NIC, first in the boot order)
# under FIRMWARE (uefi, bios) must reach the test OS's init from active.img; WHAT names the disk
# in the failure.
boot_installed_disk() {
  local name=$1 firmware=$2 disk=$3 serial=$4 what=$5
  QEMU_SMP=$BOOT_SMP GRUB_ENTER=${GRUB_ENTER-1} FIRMWARE=$firmware run_qemu "$name" "$BOOT_TIMEOUT" \
    -drive file="$disk",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial="$serial",drive=d0,bootindex=0 \
    -nic none \
    || die "$name: QEMU exited with status $?"
  expect_line "$name" 'HVTEST-BOOTED image=/cOS/active.img os=hvinstall test OS' "$what did not boot active.img"
  say "   guest: $(console "$name" | grep -a 'HVTEST-BOOTED' | head -n 1)"
}

# boot-installed: OVMF -> EFI/BOOT/BOOTX64.EFI -> grub -> cos-img initramfs -> active.img, on the
# disk the install stage wrote (the same job runs both).
boot_installed_stage() {
  # This boot alone waits out grub's countdown: the default entry must boot with nobody at the console.
  GRUB_ENTER= boot_installed_disk boot uefi "$OUT/disk.raw" HVE2E0001 "the installed disk"
  expect_line boot 'The highlighted entry will be executed automatically in 0s' "grub's countdown did not run out by itself"
  expect_line boot 'HVTEST-INITRD root=LABEL=COS_STATE image=/cOS/active.img' "grub did not start the cos-img initramfs with the active image"
}

# negative-missing-disk: the refusal names the missing disk and the disk that is there stays unwritten.
negative_stage() {
  live_automatic_install negative node-missing-disk.yaml "$OUT/disk-neg.raw" HVE2E0002
  expect_line negative 'HV-LIVE-RESULT install-failed exit=1 ' "the live system did not report the refused install (exit 1)"
  expect_line negative '/dev/nvme9n1' "the error does not name the missing disk"
  if has_line negative '^installed '; then die "negative: an install was reported on a missing disk"; fi
  local used
  used=$(stat -c %b "$OUT/disk-neg.raw")
  [ "$used" = 0 ] || die "negative: the disk that was not named got written ($used blocks allocated)"
  say "   guest: $(console negative | grep -aE 'nvme9n1' | head -n 1 | cut -c1-160)"
  say "   the untouched disk has 0 blocks allocated"
  rm -f "$OUT/disk-neg.raw"
}
