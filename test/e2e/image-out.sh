# shellcheck shell=bash
# e2e stage image-out (sourced by run.sh): `hvinstall image` writes a qcow2 of the test OS on this
# host (loop device, the normal install pipeline, qemu-img convert), and that image boots alone in
# QEMU under OVMF to the test OS's boot marker from active.img. Uses run.sh's run_qemu, expect_line,
# say, die, $OUT, $LIVE, $REPO, $SYSTEM_SIZE and $BOOT_TIMEOUT.
image_out_stage() {
  local dir="$OUT/image-out" img
  img="$dir/node.qcow2"
  mkdir -p "$dir"
  sed "s#@DEVICE@#/dev/vda#" "$REPO/test/e2e/install-node.yaml" > "$dir/config.yaml"
  node "$REPO/dist/installer/cli.js" image --config "$dir/config.yaml" --source "$LIVE/rootfs.squashfs" --out "$img" \
    --system-size "$SYSTEM_SIZE" --progress plain --state-dir "$dir/state" > "$dir/image.log" 2>&1 \
    || { tail -n 30 "$dir/image.log" >&2; die "image-out: hvinstall image failed (see $dir/image.log)"; }
  say "   $(grep -a '^image written' "$dir/image.log")"
  qemu-img info --output json "$img" | grep -q '"format": "qcow2"' || die "image-out: $img is not a qcow2"
  if losetup --list --noheadings --output BACK-FILE | grep -q "$dir/"; then die "image-out: a loop device is still attached to a file in $dir"; fi
  QEMU_SMP=$BOOT_SMP GRUB_ENTER=1 run_qemu image-out "$BOOT_TIMEOUT" \
    -drive file="$img",if=none,format=qcow2,id=d0,cache=unsafe -device nvme,serial=HVE2EIMG1,drive=d0 \
    -nic none \
    || die "image-out: QEMU exited with status $?"
  expect_line image-out 'HVTEST-BOOTED image=/cOS/active.img os=hvinstall test OS' "the image did not boot the test OS from active.img"
  say "   guest: $(console image-out | grep -a 'HVTEST-BOOTED' | head -n 1)"
}
