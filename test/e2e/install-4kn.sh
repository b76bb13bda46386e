# Sourced by test/e2e/run.sh for the 4kn stage (HV_E2E_4KN=1 or HV_E2E_STAGES) (uses its run_qemu, expect_line, say, die, OUT, …).
# The UEFI install again, onto an NVMe namespace with 4096-byte logical blocks (4Kn): partitions
# must stay 1 MiB aligned in 4 KiB sectors, mkfs.vfat must build a FAT the firmware reads on a 4Kn
# disk, and OVMF must boot it.
fourk_stage() {
  truncate -s 260G "$OUT/disk-4kn.raw"
  run_qemu 4kn-install "$INSTALL_TIMEOUT" \
    "${LIVE_MEDIA[@]}" -append "$(live_append node-1.yaml)" \
    -drive file="$OUT/disk-4kn.raw",if=none,format=raw,id=d0,cache=unsafe \
    -device nvme,serial=HVE2E0004,drive=d0,logical_block_size=4096,physical_block_size=4096 \
    -netdev "$(netdev)" -device virtio-net-pci,netdev=n0 \
    || die "4kn-install: QEMU exited with status $?"
  expect_line 4kn-install '^installed /dev/nvme0n1' "the installer did not report a completed install on the 4Kn disk"
  # From the outside, through a 4Kn loop device (sgdisk on the plain file would assume 512-byte sectors).
  LOOP=$(losetup --find --show --read-only --sector-size 4096 "$OUT/disk-4kn.raw")
  sgdisk --print "$LOOP" > "$OUT/partitions-4kn.txt" || { losetup --detach "$LOOP"; LOOP=; die "4kn: sgdisk cannot read the 4Kn disk's table"; }
  losetup --detach "$LOOP"; LOOP=
  grep -q 'Sector size (logical/physical): 4096/' "$OUT/partitions-4kn.txt" || die "4kn: the table was not written for 4096-byte sectors"
  local n
  n=$(grep -cE '^ +[0-9]+ ' "$OUT/partitions-4kn.txt" || true)
  [ "$n" = 6 ] || die "4kn: $n partitions instead of 6"
  say "   4Kn table: $n partitions, $(grep -o 'Sector size.*' "$OUT/partitions-4kn.txt")"
  QEMU_SMP=$BOOT_SMP GRUB_ENTER=1 run_qemu 4kn-boot "$BOOT_TIMEOUT" \
    -drive file="$OUT/disk-4kn.raw",if=none,format=raw,id=d0,cache=unsafe \
    -device nvme,serial=HVE2E0004,drive=d0,logical_block_size=4096,physical_block_size=4096 \
    -nic none \
    || die "4kn-boot: QEMU exited with status $?"
  expect_line 4kn-boot 'HVTEST-BOOTED image=/cOS/active.img os=hvinstall test OS' "the 4Kn disk did not boot active.img"
  say "   guest: $(console 4kn-boot | grep -a 'HVTEST-BOOTED' | head -n 1)"
  rm -f "$OUT/disk-4kn.raw"
}
