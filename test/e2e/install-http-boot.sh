# Sourced by test/e2e/run.sh after install-pxe.sh (uses pxe_profiles, pxe_boot_bridge, pxe_serve, pxe_check_events,
# time_to_line, run_qemu, console, expect_line, has_line, say, die, PIDS, netns_add, boot_installed_disk, OUT, …).
# UEFI HTTP Boot: no PXE and no TFTP anywhere on the boot network. One network namespace: a bridge
# 10.76.0.1/24 with the guest's tap, `hvpxe serve` on 10.76.0.1:8080 (ipxe.efi from Debian's ipxe
# package under its --root, so it is served at /artifacts/ipxe.efi), and a real dnsmasq as the
# network's DHCP server, running what `hvpxe render-dnsmasq --dhcp-range … --router … --no-tftp`
# printed. OVMF's HTTP Boot client (edk2 NetworkPkg HttpBootDxe) asks DHCP as client architecture
# 16 with vendor class "HTTPClient:Arch:00016:…", is given the URL of ipxe.efi with "HTTPClient"
# echoed, fetches it with HEAD then GET and starts it; iPXE asks DHCP again with user class "iPXE",
# is sent hvpxe's /boot.ipxe, and from there the install runs as in the pxe-uefi stage. Then the
# disk boots alone under the same firmware.
#
# How the firmware comes to HTTP Boot without a person: OVMF makes four boot options for a NIC
# (PXEv4, PXEv6, HTTPv4, HTTPv6, in that order) and QEMU's bootindex cannot tell them apart (they
# share the NIC's device path). OVMF's fw_cfg switches opt/org.tianocore/IPv4PXESupport and
# IPv6PXESupport (edk2 OvmfPkg, read into NetworkPkg's PcdIPv4PXESupport/PcdIPv6PXESupport) turn the
# PXE options off, so the NIC's first boot option is "UEFI HTTPv4". That is a switch of the
# firmware, not a guess about its timeouts (a PXE client that finds no offer gives up only after
# its DHCP retries) and not a Boot#### variable written into the VARS file (its layout is the
# firmware's own business); a server's setup menu has the same choice ("HTTP Boot" on the NIC).

HB_NET=10.76.0


# http_boot_requests HVPXE_LOG: hvpxe's request lines (JSON) as "METHOD PATH STATUS BYTES CLIENT", in order.
http_boot_requests() {
  node -e '
    for (const l of require("fs").readFileSync(process.argv[1], "utf8").split("\n")) {
      let r; try { r = JSON.parse(l); } catch { continue; }
      if (r.msg === "request") console.log([r.method, r.path, r.status, r.bytes ?? "-", r.client].join(" "));
    }' "$1"
}

http_boot_stage() {
  local mac=52:54:00:e2:e0:03 dir="$OUT/http-boot" net=$HB_NET
  local server="http://$net.1:8080" efi_size
  rm -rf "$dir"
  mkdir -p "$dir"
  pxe_profiles "$dir" "$mac" "$server"
  cp /usr/lib/ipxe/ipxe.efi "$dir/artifacts/ipxe.efi"
  efi_size=$(stat -c %s "$dir/artifacts/ipxe.efi")

  local ns=hv-e2e-http-$$
  pxe_boot_bridge "$ns" "$net"

  pxe_serve "$dir" "$net.1:8080" "$server" "$server/healthz" ip netns exec "$ns"
  "$REPO/bin/hvpxe" render-dnsmasq --profiles "$dir/profiles.yaml" --interface br0 --netmask 255.255.255.0 \
    --dhcp-range "$net.100,$net.150" --router "$net.1" --no-tftp > "$dir/dnsmasq.conf" 2> "$dir/render-dnsmasq.log" \
    || { cat "$dir/render-dnsmasq.log" >&2; die "http-boot: hvpxe render-dnsmasq failed"; }
  grep -E '^(enable-tftp|tftp-root)' "$dir/dnsmasq.conf" && die "http-boot: the --no-tftp configuration still runs a TFTP server"
  dnsmasq --test -C "$dir/dnsmasq.conf" > "$dir/dnsmasq-test.log" 2>&1 \
    || { cat "$dir/dnsmasq-test.log" >&2; die "http-boot: dnsmasq --test refuses the configuration hvpxe rendered"; }
  ip netns exec "$ns" dnsmasq -k --log-facility=- --pid-file="$dir/dnsmasq.pid" --dhcp-leasefile="$dir/leases" \
    -C "$dir/dnsmasq.conf" > "$dir/dnsmasq.log" 2>&1 &
  PIDS+=($!)
  local _
  for _ in $(seq 50); do grep -aq 'DHCP, IP range' "$dir/dnsmasq.log" 2>/dev/null && break; sleep 0.2; done
  # Nothing on the boot network listens on TFTP's port 69.
  ip netns exec "$ns" ss -ulnH > "$dir/udp-listeners.txt"
  grep -E '[:.]69\s' "$dir/udp-listeners.txt" && die "http-boot: something listens on UDP port 69 (TFTP) in the boot network"

  truncate -s 260G "$OUT/disk-http-boot.raw"
  time_to_line http-boot-install '^HV-LIVE: hvinstall install ' "$dir/to-install-start"
  # romfile= : no iPXE option ROM on the NIC, the firmware's own network stack boots.
  # FAIL_ON: the firmware's PXE client started, its HTTP Boot failed, or iPXE found nothing to boot.
  FAIL_ON='>>Start PXE over IPv|BdsDxe: failed to (load|start) Boot|No more network devices' \
  QEMU_WRAP="ip netns exec $ns" FIRMWARE=uefi run_qemu http-boot-install "$INSTALL_TIMEOUT" \
    -fw_cfg name=opt/org.tianocore/IPv4PXESupport,string=n -fw_cfg name=opt/org.tianocore/IPv6PXESupport,string=n \
    -netdev tap,id=n0,ifname=tap0,script=no,downscript=no \
    -device virtio-net-pci,netdev=n0,mac=$mac,romfile=,bootindex=0 \
    -drive file="$OUT/disk-http-boot.raw",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2E0005,drive=d0 \
    || die "http-boot-install: QEMU exited with status $?"

  # The firmware: HTTP Boot ran, with the URL from DHCP, and nothing of PXE.
  expect_line http-boot-install '>>Start HTTP Boot over IPv4' "OVMF's HTTP Boot client did not start"
  expect_line http-boot-install "URI: $server/artifacts/ipxe\\.efi" "the HTTP Boot client was not given hvpxe's ipxe.efi URL"
  expect_line http-boot-install "File Size: $efi_size Bytes" "the HTTP Boot client did not get ipxe.efi's size ($efi_size bytes)"
  expect_line http-boot-install 'BdsDxe: starting Boot[0-9A-F]{4} "UEFI HTTPv4 \(MAC:525400E2E003\)"' "the firmware did not start its HTTPv4 boot option"
  if has_line http-boot-install 'PXE over IPv|PXEv[46]'; then die "http-boot-install: the firmware's PXE client ran (see $OUT/console-http-boot-install.log)"; fi
  # dnsmasq: the HTTPClient request, the URL and the vendor class echoed; no PXE boot file, no TFTP.
  grep -aE 'vendor class: HTTPClient:Arch:00016' "$dir/dnsmasq.log" > /dev/null \
    || { tail -n 30 "$dir/dnsmasq.log" >&2; die "http-boot: dnsmasq saw no DHCP request with vendor class HTTPClient:Arch:00016 (see $dir/dnsmasq.log)"; }
  grep -aE "option: 67 bootfile-name +$server/artifacts/ipxe\\.efi\$" "$dir/dnsmasq.log" > /dev/null \
    || die "http-boot: dnsmasq did not send the ipxe.efi URL as the boot file (see $dir/dnsmasq.log)"
  # 48:54:54:50:43:6c:69:65:6e:74 is "HTTPClient".
  grep -aE 'option: 60 vendor-class +48:54:54:50:43:6c:69:65:6e:74$' "$dir/dnsmasq.log" > /dev/null \
    || die "http-boot: dnsmasq did not echo vendor class HTTPClient (see $dir/dnsmasq.log)"
  if grep -aE '^dnsmasq-tftp' "$dir/dnsmasq.log"; then die "http-boot: dnsmasq ran TFTP (see $dir/dnsmasq.log)"; fi
  # hvpxe: the firmware's HEAD and GET of ipxe.efi (whole file, its size), before iPXE's /boot.ipxe.
  http_boot_requests "$dir/hvpxe.log" > "$dir/requests.txt"
  local first
  first=$(grep -v '^GET /healthz ' "$dir/requests.txt" | head -n 2 | awk '{print $1, $2, $3}' | tr '\n' ';')
  [ "$first" = "HEAD /artifacts/ipxe.efi 200;GET /artifacts/ipxe.efi 200;" ] || {
    cat "$dir/requests.txt" >&2
    die "http-boot: hvpxe's first requests from the guest were not HEAD then GET of /artifacts/ipxe.efi (got: $first)"
  }
  grep -E "^GET /artifacts/ipxe\\.efi 200 $efi_size $net\\." "$dir/requests.txt" > /dev/null \
    || die "http-boot: hvpxe did not send all $efi_size bytes of ipxe.efi to the guest (see $dir/requests.txt)"
  grep -E '^GET /boot\.ipxe 200 ' "$dir/requests.txt" > /dev/null || die "http-boot: iPXE never fetched /boot.ipxe from hvpxe"

  # The install, as in the PXE stages.
  expect_line http-boot-install '^HV-LIVE: firmware UEFI' "the live system did not come up under UEFI"
  expect_line http-boot-install '"msg":"OS image ready".*"verified":"sha256 [0-9a-f]{64} \(from http[^"]*\.sha256\) matched"' "the OS image was not fetched from root=live: and verified"
  expect_line http-boot-install '^installed /dev/nvme0n1' "the installer did not report a completed install"
  expect_line http-boot-install '^automatic install: poweroff' "the automatic install did not power off by itself"
  pxe_machines "$dir" "$dir/machines.json" ip netns exec "$ns"
  pxe_check_events "$dir/machines.json"
  say "   firmware: $(console http-boot-install | grep -aoE 'BdsDxe: starting Boot[0-9A-F]{4} "UEFI HTTPv4[^"]*"' | head -n 1); dnsmasq leased $(cut -d' ' -f3 "$dir/leases" | sort -u | tr '\n' ' ')"
  say "   hvpxe: $(grep -cE '^(HEAD|GET) /artifacts/ipxe\.efi 200' "$dir/requests.txt") requests for ipxe.efi ($efi_size bytes), power-on to install start $(cat "$dir/to-install-start" 2>/dev/null || echo '?') s"

  boot_installed_disk http-boot-boot uefi "$OUT/disk-http-boot.raw" HVE2E0005 "the disk installed over HTTP Boot"
  rm -f "$OUT/disk-http-boot.raw"
}
