# Sourced by test/e2e/run.sh (uses its run_qemu, console, expect_line, say, die, PIDS, OUT, …).
# The PXE path, under legacy BIOS (SeaBIOS + the NIC's iPXE ROM; OVMF's PXE would only load EFI
# binaries, not iPXE scripts): slirp's TFTP hands iPXE a script that chains to `hvpxe serve`'s
# /boot.ipxe; hvpxe matches the machine by MAC and answers with its kernel, initrd and kernel line
# (root=live:<rootfs URL>, harvester.install.automatic=true, harvester.install.config_url=
# <hvpxe>/config/<machine>.yaml?mac=…, hvinstall.events_url=…). The live system fetches the OS
# image from root=live: (checked against hvpxe's .sha256), fetches its config from hvpxe, installs
# a BIOS layout (bios_grub + grub-install i386-pc) and powers off; then the disk boots under SeaBIOS.

pxe_stage() {
  local mac=52:54:00:e2:e0:01 dir="$OUT/pxe"
  mkdir -p "$dir/artifacts" "$dir/tftp"
  # The PXE artifacts as the build publishes them (Harvester's names): the kernel, the initrd that
  # carries the live root, and the OS image root=live: fetches. Their sha256 from the build's list.
  local kernel initrd rootfs
  kernel=$(basename "$(build_field b.pxe.kernel)"); initrd=$(basename "$(build_field b.pxe.initrd)"); rootfs=$(basename "$(build_field b.pxe.rootfs)")
  cp "$OUT/build/$kernel" "$OUT/build/$initrd" "$OUT/build/$rootfs" "$dir/artifacts/"
  sha() { awk -v f="$1" '$2 == f {print $1}' "$(build_field b.checksums.sha256)"; }
  {
    cat <<EOF
# Written by test/e2e/install-pxe.sh for one QEMU machine.
server_url: http://$GUEST_SERVER
artifacts:
  kernel: { path: $kernel, sha256: "$(sha "$kernel")" }
  initrd: { path: $initrd, sha256: "$(sha "$initrd")" }
  rootfs: { path: $rootfs, sha256: "$(sha "$rootfs")" }
profiles:
  e2e:
    kernel: kernel
    initrd: initrd
    rootfs: rootfs
    kernel_args: [console=ttyS0, loglevel=4, panic=-1, no_timer_check, hvlive.system_size=$SYSTEM_SIZE, hvlive.on_failure=poweroff]
    report_events: true
    config:
EOF
    sed -e 's#@DEVICE@#/dev/nvme0n1#' -e '/^\s*#/d' -e 's/^/      /' "$REPO/test/e2e/install-node.yaml"
    cat <<EOF
groups:
  - name: e2e
    profile: e2e
    machines:
      - { hostname: hv-e2e-pxe, mac: "$mac" }
EOF
  } > "$dir/profiles.yaml"
  printf '#!ipxe\necho hvinstall e2e: chaining to hvpxe\nchain http://%s/boot.ipxe || shell\n' "$GUEST_SERVER" > "$dir/tftp/start.ipxe"

  local port
  port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
  "$REPO/bin/hvpxe" serve --root "$dir/artifacts" --profiles "$dir/profiles.yaml" --listen "127.0.0.1:$port" \
    --server-url "http://$GUEST_SERVER" > "$OUT/hvpxe.log" 2>&1 &
  PIDS+=($!)
  local up=
  for _ in $(seq 100); do
    if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then up=1; break; fi
    kill -0 "${PIDS[-1]}" 2>/dev/null || break
    sleep 0.3
  done
  [ -n "$up" ] || { cat "$OUT/hvpxe.log" >&2; die "pxe: hvpxe serve did not come up"; }

  truncate -s 260G "$OUT/disk-pxe.raw"
  FIRMWARE=bios run_qemu pxe-install "$INSTALL_TIMEOUT" \
    -boot n \
    -netdev "user,id=n0,restrict=on,tftp=$dir/tftp,bootfile=start.ipxe,guestfwd=tcp:$GUEST_SERVER:80-cmd:socat - TCP:127.0.0.1:$port" \
    -device virtio-net-pci,netdev=n0,mac=$mac \
    -drive file="$OUT/disk-pxe.raw",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2E0003,drive=d0 \
    || die "pxe-install: QEMU exited with status $?"
  expect_line pxe-install '^HV-LIVE: firmware BIOS' "the live system did not come up through PXE under BIOS"
  expect_line pxe-install 'HV-LIVE: OS image sha256 [0-9a-f]{64} verified' "the OS image was not fetched from root=live: and verified"
  expect_line pxe-install '^installed /dev/nvme0n1' "the installer did not report a completed install"
  expect_line pxe-install '^automatic install: poweroff' "the automatic install did not power off by itself"
  curl -fsS "http://127.0.0.1:$port/machines" > "$OUT/pxe-machines.json" || die "pxe: GET /machines failed"
  # report_events: hvpxe added webhooks to the served config; the install posts them back.
  local events
  events=$(node -e 'const m=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")).machines.find(x=>x.name==="hv-e2e-pxe"); console.log((m?.events??[]).map(e=>e.event).join(","))' "$OUT/pxe-machines.json")
  say "   hvpxe /machines: hv-e2e-pxe fetched ipxe, kernel, initrd, config, rootfs; events: $events"
  case ",$events," in *,STARTED,*SUCCEEDED,*) ;; *) die "pxe: hvpxe did not receive the STARTED and SUCCEEDED webhooks (got: $events)" ;; esac

  FIRMWARE=bios run_qemu pxe-boot "$BOOT_TIMEOUT" \
    -drive file="$OUT/disk-pxe.raw",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2E0003,drive=d0,bootindex=0 \
    -nic none \
    || die "pxe-boot: QEMU exited with status $?"
  expect_line pxe-boot 'HVTEST-BOOTED image=/cOS/active.img os=hvinstall test OS' "the BIOS-installed disk did not boot active.img"
  say "   guest: $(console pxe-boot | grep -a 'HVTEST-BOOTED' | head -n 1)"
}
