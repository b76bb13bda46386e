# Sourced by test/e2e/run.sh for the iso-url stage (uses its run_qemu, expect_line, say, die, OUT, LIVE_MEDIA, …).
# A Harvester-style automatic install whose config names an http install.iso_url: the live installer
# downloads the ISO (checked against the .sha256 next to it), loop-mounts it (isofs), installs its
# rootfs.squashfs rather than its boot medium's, and copies its bundle/ onto COS_PERSISTENT,
# where the installed node's image preload looks (/var/lib/rancher/hvagent/bundle).
iso_stage() {
  local root="$OUT/iso-root" marker="e2e bundle marker $(date +%s)"
  rm -rf "$root"
  mkdir -p "$root/bundle/harvester/images-lists"
  cp "$LIVE/rootfs.squashfs" "$root/rootfs.squashfs"
  printf 'images:\n  common: []\n' > "$root/bundle/metadata.yaml"
  echo "$marker" > "$root/bundle/harvester/images-lists/e2e-marker.txt"
  xorriso -as mkisofs -quiet -V COS_LIVE -o "$OUT/www/hv.iso" "$root" 2>/dev/null || die "iso: xorriso could not build the ISO"
  (cd "$OUT/www" && sha256sum hv.iso > hv.iso.sha256)
  sed "s#@DEVICE@#/dev/nvme0n1#; s#iso_url: local#iso_url: http://$GUEST_SERVER/hv.iso#" "$REPO/test/e2e/install-node.yaml" > "$OUT/www/node-iso.yaml"
  grep -q "iso_url: http://$GUEST_SERVER/hv.iso" "$OUT/www/node-iso.yaml" || die "iso: the config template no longer says iso_url: local"
  truncate -s 260G "$OUT/disk-iso.raw"
  run_qemu iso-install "$INSTALL_TIMEOUT" \
    "${LIVE_MEDIA[@]}" -append "$(live_append node-iso.yaml)" \
    -drive file="$OUT/disk-iso.raw",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2E0005,drive=d0 \
    -netdev "$(netdev)" -device virtio-net-pci,netdev=n0 \
    || die "iso-install: QEMU exited with status $?"
  expect_line iso-install '^installed /dev/nvme0n1' "the installer did not report a completed install from the ISO"
  expect_line iso-install '"from":"iso"' "the live installer did not take the OS from install.iso_url"
  expect_line iso-install '"msg":"install ISO ready".*"verified":true' "the ISO was not verified against its published sha256"
  if has_line iso-install 'loop-mounting the ISO failed'; then die "iso-install: the ISO was extracted instead of loop-mounted (is isofs in the live system?)"; fi
  grep -q 'GET /hv.iso 200' "$OUT/config-server.log" || die "iso-install: the guest never downloaded the ISO (see $OUT/config-server.log)"
  # From the outside, without mounting: debugfs reads COS_PERSISTENT (partition 5).
  LOOP=$(losetup --find --show --read-only --partscan "$OUT/disk-iso.raw")
  for _ in $(seq 20); do [ -e "${LOOP}p5" ] && break; partprobe "$LOOP" 2>/dev/null; sleep 0.5; done
  local got
  got=$(debugfs -R "cat /.state/var-lib-rancher.bind/hvagent/bundle/harvester/images-lists/e2e-marker.txt" "${LOOP}p5" 2>/dev/null)
  losetup --detach "$LOOP"; LOOP=
  [ "$got" = "$marker" ] || die "iso: the ISO's bundle/ is not on COS_PERSISTENT at .state/var-lib-rancher.bind/hvagent/bundle (read: '$got')"
  say "   guest: $(console iso-install | grep -aE '^installed ' | head -n 1); the ISO's bundle is on COS_PERSISTENT"
  rm -f "$OUT/disk-iso.raw"
}
