# Sourced by test/e2e/run.sh after install-pxe.sh (uses pxe_profiles, pxe_boot_bridge, pxe_bridge_peer, pxe_serve, pxe_check_events,
# run_qemu, console, expect_line, say, die, PIDS, netns_add, boot_installed_disk, OUT, SYSTEM_SIZE, …).
# PXE under UEFI firmware, as a v1.8 fleet installs (Harvester v1.8 refuses legacy BIOS), on a boot
# network of its own instead of slirp: slirp's one bootfile cannot tell the firmware's PXE client
# from the iPXE it loads, so ipxe.efi would fetch ipxe.efi forever. Two network namespaces:
#   NS      a bridge 10.77.0.1/24 with the guest's tap, `hvpxe serve` on 10.77.0.1:8080 and a real
#           dnsmasq running the proxy-DHCP + TFTP configuration `hvpxe render-dnsmasq` printed;
#   DHCP_NS the site's DHCP server (a plain dnsmasq: addresses and a router, no boot information),
#           on a veth into NS's bridge.
# OVMF's own PXE client (the NIC has no option ROM) gets an address from the site's server and
# ipxe.efi by TFTP from hvpxe's dnsmasq (client architecture 7, x86-64 UEFI); ipxe.efi asks again
# with user class "iPXE" and is sent hvpxe's /boot.ipxe, which chains to the machine's script:
# kernel and initrd over HTTP (initrd= on the kernel line, as UEFI kernels need), the live system
# fetches root=live: and its config from hvpxe, installs a UEFI layout, powers off; then the disk
# boots alone under the same firmware.

PXEU_NET=10.77.0


pxe_uefi_stage() {
  local mac=52:54:00:e2:e0:02 dir="$OUT/pxe-uefi" net=$PXEU_NET
  local server="http://$net.1:8080"
  rm -rf "$dir"
  mkdir -p "$dir/tftp"
  # dnsmasq serves TFTP as an unprivileged user.
  chmod 755 "$dir" "$dir/tftp"
  cp /usr/lib/ipxe/ipxe.efi "$dir/tftp/"
  pxe_profiles "$dir" "$mac" "$server"

  local ns=hv-e2e-pxeu-$$ dhcp_ns=hv-e2e-dhcp-$$
  pxe_boot_bridge "$ns" "$net"
  pxe_bridge_peer "$ns" "$dhcp_ns" dhcp "$net.2"

  # The site's DHCP server: addresses and a router (the installer needs a default route), nothing about booting.
  ip netns exec "$dhcp_ns" dnsmasq -k --conf-file=/dev/null --port=0 --interface=dhcp1 --bind-interfaces \
    --dhcp-range="$net.100,$net.150,255.255.255.0,1h" --dhcp-option=3,"$net.1" \
    --dhcp-leasefile="$dir/leases" --pid-file="$dir/dhcp.pid" --log-dhcp --log-facility=- > "$dir/dhcp.log" 2>&1 &
  PIDS+=($!)

  pxe_serve "$dir" "$net.1:8080" "$server" "$server/healthz" ip netns exec "$ns"
  "$REPO/bin/hvpxe" render-dnsmasq --profiles "$dir/profiles.yaml" --subnet "$net.0" --netmask 255.255.255.0 \
    --tftp-root "$dir/tftp" --interface br0 > "$dir/dnsmasq.conf" 2> "$dir/render-dnsmasq.log" \
    || { cat "$dir/render-dnsmasq.log" >&2; die "pxe-uefi: hvpxe render-dnsmasq failed"; }
  dnsmasq --test -C "$dir/dnsmasq.conf" > "$dir/dnsmasq-test.log" 2>&1 \
    || { cat "$dir/dnsmasq-test.log" >&2; die "pxe-uefi: dnsmasq --test refuses the configuration hvpxe rendered"; }
  ip netns exec "$ns" dnsmasq -k --log-facility=- --pid-file="$dir/proxy.pid" -C "$dir/dnsmasq.conf" > "$dir/proxy.log" 2>&1 &
  PIDS+=($!)

  truncate -s 260G "$OUT/disk-pxe-uefi.raw"
  time_to_line pxe-uefi-install '^HV-LIVE: hvinstall install ' "$dir/to-install-start"
  # romfile= : no iPXE option ROM on the NIC, so the firmware's own PXE client boots, as on most servers.
  QEMU_WRAP="ip netns exec $ns" FIRMWARE=uefi run_qemu pxe-uefi-install "$INSTALL_TIMEOUT" \
    -netdev tap,id=n0,ifname=tap0,script=no,downscript=no \
    -device virtio-net-pci,netdev=n0,mac=$mac,romfile=,bootindex=0 \
    -drive file="$OUT/disk-pxe-uefi.raw",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2E0004,drive=d0 \
    || die "pxe-uefi-install: QEMU exited with status $?"
  grep -aE 'sent .*/ipxe\.efi to '"$net"'\.' "$dir/proxy.log" > /dev/null \
    || { tail -n 30 "$dir/proxy.log" >&2; die "pxe-uefi: hvpxe's dnsmasq did not send ipxe.efi by TFTP (see $dir/proxy.log)"; }
  expect_line pxe-uefi-install '^HV-LIVE: firmware UEFI' "the live system did not come up through PXE under UEFI"
  expect_line pxe-uefi-install '"msg":"OS image ready".*"verified":"sha256 [0-9a-f]{64} \(from http[^"]*\.sha256\) matched"' "the OS image was not fetched from root=live: and verified"
  expect_line pxe-uefi-install '^installed /dev/nvme0n1' "the installer did not report a completed install"
  expect_line pxe-uefi-install '^automatic install: poweroff' "the automatic install did not power off by itself"
  pxe_machines "$dir" "$dir/machines.json" ip netns exec "$ns"
  pxe_check_events "$dir/machines.json"
  say "   dnsmasq (hvpxe's proxy config): $(grep -acE 'proxy' "$dir/proxy.log") proxy-DHCP lines, $(grep -ac '^dnsmasq-tftp.*: sent ' "$dir/proxy.log") TFTP transfers; the site's DHCP leased $(cut -d' ' -f3 "$dir/leases" | sort -u | tr '\n' ' ')"

  boot_installed_disk pxe-uefi-boot uefi "$OUT/disk-pxe-uefi.raw" HVE2E0004 "the UEFI-installed disk"
  rm -f "$OUT/disk-pxe-uefi.raw"
}
