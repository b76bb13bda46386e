# Sourced by test/e2e/run.sh (uses first-boot.sh's functions with FB_TAG=up, and run.sh's run_qemu,
# expect_line, has_line, console, say, die, stage_start/stage_end, OUT, REPO, BOOT_TIMEOUT, LOOP).
# The day-two upgrade with boot assessment (docs/upgrade.md): the systemd test OS (v1) installed on
# the host as in the first-boot stage; then `hvinstall upgrade --device` on the loop-attached disk
# between boots, to the variants iso-build/systemd-os/variants.ts derives:
#   v2 healthy            boot: the attempt, its link held down until `nm-online -x` answered
#                         (fb_slow_link), hvagent's gate passes and commits (v2 active, v1 passive)
#   v3 no management net  boot: the attempt, the gate fails on network-online, hvagent reboots once;
#                         boot: grub takes v2 (fallback), hvagent commits it and says why
#   v4 kernel panic       boot: the kernel panics (panic=5 on the attempt: back to grub);
#                         boot: v2 again, committed, "never reached hvagent"
#   v5 healthy            upgraded on the host only: v2 (the fallback) becomes passive, not v4
# Five TCG boots; each boot with a report carries its TAP on the second serial port.
UP_VARIANTS=

# up_partition_mount LABEL: mounts that filesystem of the loop-attached disk read-only on a new dir; prints it.
up_mount() {
  local dir
  dir=$(mktemp -d)
  mount -o ro "$(fb_partition "$1")" "$dir" || die "upgrade: cannot mount $1"
  echo "$dir"
}

# up_image_version FILE-IN-COS_STATE: the IMAGE_VERSION of an image on the attached disk and its
# filesystem label, VERSION/LABEL ('-' when absent).
up_image_version() {
  local st v l
  st=$(up_mount COS_STATE)
  if [ -e "$st/$1" ]; then
    v=$(debugfs -R 'cat /usr/lib/os-release' "$st/$1" 2>/dev/null | sed -n 's/^IMAGE_VERSION=//p')
    l=$(blkid -p -o value -s LABEL "$st/$1")
    v="${v:-?}/$l"
  else v=-; fi
  umount "$st"; rmdir "$st"
  echo "$v"
}

# up_expect_images ACTIVE PASSIVE FAILED STATE: the images' versions (v1 is the base image, '-' absent) and the grub state.
up_expect_images() {
  fb_attach --read-only
  local a p f st env
  a=$(up_image_version cOS/active.img); p=$(up_image_version cOS/passive.img); f=$(up_image_version cOS/failed.img)
  st=$(up_mount COS_STATE); env=$(grub-editenv "$st/hv_assessment" list | sed -n 's/^hv_assessment_state=//p'); umount "$st"; rmdir "$st"
  fb_detach
  local want_a=$1 want_p=$2 want_f=$3
  # VERSION/LABEL: v1 is the base image; active.img must be labelled COS_ACTIVE, passive.img COS_PASSIVE.
  local label
  for v in want_a want_p want_f; do
    case $v in want_a) label=COS_ACTIVE ;; want_p) label=COS_PASSIVE ;; *) label='*' ;; esac
    case ${!v} in v1) eval "$v=\$UP_BASE/\$label" ;; -) ;; *) eval "$v=\$UP_BASE-\${!v}/\$label" ;; esac
  done
  say "   images: active $a, passive $p, failed $f; grub state '${env}'"
  # shellcheck disable=SC2053 # the failed image's label is a pattern: any
  [ "$a" = "$want_a" ] && [ "$p" = "$want_p" ] && [[ $f == $want_f ]] && [ "$env" = "$4" ] ||
    die "upgrade: expected active $want_a, passive $want_p, failed $want_f, state '$4'"
}

# up_upgrade VARIANT: hvinstall upgrade --device onto the loop-attached disk; the plan first (--dry-run).
up_upgrade() {
  fb_attach
  "$REPO/bin/hvinstall" upgrade --device "$LOOP" --source "$UP_VARIANTS/$1" --run-dir "$OUT/up-run" --dry-run > "$OUT/up-plan-$1.txt" 2>&1 ||
    { cat "$OUT/up-plan-$1.txt" >&2; die "upgrade: the plan for $1 was refused"; }
  "$REPO/bin/hvinstall" upgrade --device "$LOOP" --source "$UP_VARIANTS/$1" --run-dir "$OUT/up-run" --yes > "$OUT/up-upgrade-$1.log" 2>&1 ||
    { tail -n 20 "$OUT/up-upgrade-$1.log" >&2; die "upgrade: hvinstall upgrade to $1 failed (see $OUT/up-upgrade-$1.log)"; }
  fb_detach
  say "   hvinstall upgrade to $1: $(grep -a '^upgraded:' "$OUT/up-upgrade-$1.log" | cut -c1-140)"
}

# up_attempt_fails NAME WHY: boots an attempt that must end back at grub by itself (no report, no power-off).
up_attempt_fails() {
  local name=$1
  QEMU_SMP=$FB_SMP QEMU_WRAP="ip netns exec $FB_QNS" run_qemu "$name" "$BOOT_TIMEOUT" $FB_NO_VGA \
    -drive file="$FB_DISK",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2EFB001,drive=d0 \
    -netdev tap,id=mgmt0,ifname=fbtap0,script=no,downscript=no -device virtio-net-pci,netdev=mgmt0,id=nic0,mac="$FB_MAC",bus=pcie.0,addr=0x5 \
    -serial stdio -monitor none -fw_cfg name=opt/hvtest/report,string=0 || die "$name: QEMU exited with status $?"
  expect_line "$name" 'boot assessment: trying the upgraded image once' "grub did not start the armed attempt"
  expect_line "$name" 'hv.assessment=attempt' "the attempt's kernel line lacks the assessment arguments"
  if has_line "$name" 'reboot: Power down'; then die "$name: the attempt powered off instead of going back to grub"; fi
  say "   $name: $2"
}

upgrade_stage() {
  FB_TAG=up
  stage_start upgrade-build
  fb_build
  flock "$CACHE/systemd-os.lock" node "$REPO/dist/iso-build/systemd-os/cli.js" --cache "$CACHE" --variants "$OUT/up-variants" > "$OUT/up-variants.json" 2> "$OUT/up-variants-build.log" ||
    die "upgrade: deriving the variants failed (see $OUT/up-variants-build.log)"
  UP_VARIANTS="$OUT/up-variants"
  UP_BASE=$(sed -n 's/^IMAGE_VERSION=//p' "$UP_VARIANTS/base/usr/lib/os-release")
  stage_end upgrade-build
  stage_start upgrade-install
  fb_install
  stage_end upgrade-install
  fb_net
  stage_start upgrade-v2
  up_upgrade v2
  # The link held down on purpose (fb_slow_link): an upgraded node's NIC often comes up late (a
  # switch port's spanning tree after the reboot), and v2 must still pass its gate and commit.
  FB_EXTRA_ARGS="-fw_cfg name=opt/hvtest/assessment,string=committed" fb_boot up-v2 1 active run slow-link
  expect_line up-v2 'hvagent: boot assessment: .* is healthy: committed' "hvagent did not commit v2 on the console"
  up_expect_images v2 v1 - ''
  stage_end upgrade-v2
  stage_start upgrade-v3
  up_upgrade v3
  up_attempt_fails up-v3-attempt "the gate failed and hvagent rebooted once"
  expect_line up-v3-attempt 'hvagent: boot assessment: .* is NOT healthy: network-online' "hvagent did not name network-online"
  expect_line up-v3-attempt 'reboot: Restarting system' "the node did not reboot itself"
  FB_EXTRA_ARGS="-fw_cfg name=opt/hvtest/assessment,string=fell-back" fb_boot up-v3-fallback 2 passive run
  expect_line up-v3-fallback 'hv.assessment=fallback' "grub did not mark the fallback boot"
  expect_line up-v3-fallback 'hvagent: boot assessment: UPGRADE FAILED: .*network-online' "the console does not say why v3 failed"
  up_expect_images v2 - v3 ''
  stage_end upgrade-v3
  stage_start upgrade-v4
  up_upgrade v4
  up_attempt_fails up-v4-attempt "the kernel panicked and came back to grub"
  expect_line up-v4-attempt 'Kernel panic' "v4's kernel did not panic"
  FB_EXTRA_ARGS="-fw_cfg name=opt/hvtest/assessment,string=fell-back" fb_boot up-v4-fallback 3 passive run
  expect_line up-v4-fallback 'hvagent: boot assessment: UPGRADE FAILED: .*never reached hvagent' "the console does not say v4 never reached hvagent"
  up_expect_images v2 - v4 ''
  stage_end upgrade-v4
  stage_start upgrade-v5
  up_upgrade v5
  up_expect_images v5 v2 - armed
  stage_end upgrade-v5
}
