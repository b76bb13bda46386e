# Sourced by test/e2e/run.sh after install-pxe.sh (uses pxe_profiles, pxe_serve, pxe_boot_bridge, pxe_bridge_peer, pxe_check_events,
# time_to_line, run_qemu, console, expect_line, say, die, PIDS, netns_add, boot_installed_disk, OUT, CACHE, …).
# PXE with Secure Boot enforced (OVMF with Microsoft's keys): an unsigned iPXE cannot run there, so
# the profile says `boot: grub-signed` and the chain is Debian's signed shim -> Debian's signed grub
# network image (grubnetx64, which shim loads as grubx64.efi) -> Debian's signed kernel, everything
# after the firmware's DHCP over TFTP from `hvpxe serve --tftp` (that grub has no http module). Two
# network namespaces on one bridge:
#   NS     the bridge 10.79.0.1/24 with the guest's tap and a real dnsmasq running the DHCP-server
#          configuration `hvpxe render-dnsmasq` printed: it tags the machine by MAC (profiles.yaml)
#          and hands it shim with next-server 10.79.0.3. A DHCP server, not proxy-DHCP: Debian's
#          grub takes its TFTP server from the DHCP server's answer and ignores a proxy's.
#   HV_NS  hvpxe serve on 10.79.0.3 (HTTP 8080 and TFTP 69; dnsmasq keeps its own TFTP on .1).
# shim, grub, grub/grub.cfg, the machine's grub script, kernel and initrd come from hvpxe by TFTP;
# the live system fetches root=live: and its config over HTTP, installs, reports its events and
# powers off. The console must show the kernel started with Secure Boot on and locked down.

PXESB_NET=10.79.0


pxe_secureboot_stage() {
  local mac=52:54:00:e2:e0:05 dir="$OUT/pxe-sb" net=$PXESB_NET
  local server="http://$net.3:8080" sb="$CACHE/signed-boot"
  rm -rf "$dir"
  mkdir -p "$dir/tftp"
  chmod 755 "$dir" "$dir/tftp"
  pxe_profiles "$dir" "$mac" "$server"
  sed -i 's/^    report_events: true$/&\n    boot: grub-signed/' "$dir/profiles.yaml"
  grep -q '^    boot: grub-signed$' "$dir/profiles.yaml" || die "pxe-secureboot: could not set boot: grub-signed in $dir/profiles.yaml"
  # The signed binaries, from the Debian packages the live build fetched into the cache (iso-build/signed-boot.ts).
  cp "$sb/shim-signed/usr/lib/shim/shimx64.efi.signed" "$dir/artifacts/shimx64.efi"
  cp "$sb/grub-efi-amd64-signed/usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed" "$dir/artifacts/grubx64.efi"

  local ns=hv-e2e-pxesb-$$ hvpxe_ns=hv-e2e-hvpxe-$$
  pxe_boot_bridge "$ns" "$net"
  pxe_bridge_peer "$ns" "$hvpxe_ns" hv "$net.3"
  ip -n "$hvpxe_ns" route add default via "$net.1"

  HVPXE_EXTRA_ARGS="--tftp $net.3:69" pxe_serve "$dir" "$net.3:8080" "$server" "$server/healthz" ip netns exec "$hvpxe_ns"
  "$REPO/bin/hvpxe" render-dnsmasq --profiles "$dir/profiles.yaml" --dhcp-range "$net.100,$net.150" --router "$net.1" --netmask 255.255.255.0 \
    --tftp-root "$dir/tftp" --interface br0 > "$dir/dnsmasq.conf" 2> "$dir/render-dnsmasq.log" \
    || { cat "$dir/render-dnsmasq.log" >&2; die "pxe-secureboot: hvpxe render-dnsmasq failed"; }
  grep -q "^dhcp-mac=set:hvpxe-sb,$mac\$" "$dir/dnsmasq.conf" || die "pxe-secureboot: the rendered dnsmasq.conf does not tag $mac for Secure Boot"
  dnsmasq --test -C "$dir/dnsmasq.conf" > "$dir/dnsmasq-test.log" 2>&1 \
    || { cat "$dir/dnsmasq-test.log" >&2; die "pxe-secureboot: dnsmasq --test refuses the configuration hvpxe rendered"; }
  ip netns exec "$ns" dnsmasq -k --log-facility=- --pid-file="$dir/dnsmasq.pid" --dhcp-leasefile="$dir/leases" -C "$dir/dnsmasq.conf" > "$dir/dnsmasq.log" 2>&1 &
  PIDS+=($!)

  truncate -s 260G "$OUT/disk-pxe-sb.raw"
  time_to_line pxe-sb-install '^HV-LIVE: hvinstall install ' "$dir/to-install-start"
  # Secure Boot enforced, Microsoft's keys (run_qemu's sb firmware); no option ROM: OVMF's own PXE client.
  QEMU_WRAP="ip netns exec $ns" FIRMWARE=sb FAIL_ON='hvpxe: (no profile matches|downloading or booting the installer|could not fetch)' \
    run_qemu pxe-sb-install "$INSTALL_TIMEOUT" \
    -netdev tap,id=n0,ifname=tap0,script=no,downscript=no \
    -device virtio-net-pci,netdev=n0,mac=$mac,romfile=,bootindex=0 \
    -drive file="$OUT/disk-pxe-sb.raw",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2E0005,drive=d0 \
    || die "pxe-sb-install: QEMU exited with status $?"
  local f
  for f in shimx64.efi grubx64.efi grub/grub.cfg grub/auto "$(basename "$(build_field b.pxe.kernel)")" "$(basename "$(build_field b.pxe.initrd)")"; do
    grep -aF '"msg":"tftp"' "$dir/hvpxe.log" | grep -aF "\"filename\":\"$f" | grep -aqF '"ok":true' \
      || { grep -aF '"msg":"tftp"' "$dir/hvpxe.log" | tail -n 20 >&2; die "pxe-secureboot: hvpxe did not send $f by TFTP (see $dir/hvpxe.log)"; }
  done
  expect_line pxe-sb-install "hvpxe: installing hv-e2e-pxe with profile e2e" "grub did not run the machine's script from hvpxe"
  expect_line pxe-sb-install 'EFI stub: UEFI Secure Boot is enabled' "the kernel was not started with Secure Boot on"
  expect_line pxe-sb-install '^HV-LIVE: kernel lockdown .*\[(integrity|confidentiality)\]' "the kernel did not lock itself down under Secure Boot"
  expect_line pxe-sb-install '^HV-LIVE: firmware UEFI, Secure Boot enabled' "the live system does not see Secure Boot enforced"
  expect_line pxe-sb-install '"msg":"OS image ready".*"verified":"sha256 [0-9a-f]{64} \(from http[^"]*\.sha256\) matched"' "the OS image was not fetched from root=live: and verified"
  expect_line pxe-sb-install '^installed /dev/nvme0n1' "the installer did not report a completed install"
  expect_line pxe-sb-install '^automatic install: poweroff' "the automatic install did not power off by itself"
  pxe_machines "$dir" "$dir/machines.json" ip netns exec "$hvpxe_ns"
  pxe_check_events "$dir/machines.json"
  say "   Secure Boot: $(console pxe-sb-install | grep -aE 'EFI stub: UEFI Secure Boot is enabled|^HV-LIVE: kernel lockdown' | tr '\n' ';' | cut -c1-160)"
  say "   hvpxe TFTP: $(grep -acF '"msg":"tftp"' "$dir/hvpxe.log") transfers (shim, grub, grub/grub.cfg, grub/auto, kernel, initrd); dnsmasq leased $(cut -d' ' -f3 "$dir/leases" | sort -u | tr '\n' ' ')"

  say "   the installed disk boots under UEFI with Secure Boot off: it carries hvinstall's unsigned grub"
  boot_installed_disk pxe-sb-boot uefi "$OUT/disk-pxe-sb.raw" HVE2E0005 "the disk installed under Secure Boot"
  rm -f "$OUT/disk-pxe-sb.raw"
}
