# Sourced by test/e2e/run.sh (uses its run_qemu, boot_installed_disk, netns_add, console, expect_line, say, die, PIDS, OUT, …).
# The PXE path, under legacy BIOS (SeaBIOS + the NIC's iPXE ROM; OVMF's PXE would only load EFI
# binaries, not iPXE scripts): slirp's TFTP hands iPXE a script that chains to `hvpxe serve`'s
# /boot.ipxe; hvpxe matches the machine by MAC and answers with its kernel, initrd and kernel line
# (root=live:<rootfs URL>, harvester.install.automatic=true, harvester.install.config_url=
# <hvpxe>/config/<machine>.yaml?credential=…, hvinstall.events_url=…?credential=…: the boot credential of
# this script, good for one config fetch). The live system fetches the OS
# image from root=live: (checked against hvpxe's .sha256), fetches its config from hvpxe, installs
# a BIOS layout (bios_grub + grub-install i386-pc) and powers off; then the disk boots under SeaBIOS.

# pxe_profiles DIR MAC SERVER_URL [KERNEL_ARG]: the PXE artifacts as the build publishes them (Harvester's
# names: the kernel, the initrd that carries the live root, the OS image root=live: fetches, with
# their sha256 from the build's list) in DIR/artifacts, and DIR/profiles.yaml serving them to one
# machine by MAC with install-node.yaml as its config.
pxe_profiles() {
  local dir=$1 mac=$2 server=$3 extra=${4:+, $4} kernel initrd rootfs
  mkdir -p "$dir/artifacts"
  kernel=$(basename "$(build_field b.pxe.kernel)"); initrd=$(basename "$(build_field b.pxe.initrd)"); rootfs=$(basename "$(build_field b.pxe.rootfs)")
  cp "$OUT/build/$kernel" "$OUT/build/$initrd" "$OUT/build/$rootfs" "$dir/artifacts/"
  sha() { awk -v f="$1" '$2 == f {print $1}' "$(build_field b.checksums.sha256)"; }
  {
    cat <<EOF
# Written by test/e2e/install-pxe.sh for one QEMU machine.
server_url: $server
artifacts:
  kernel: { path: $kernel, sha256: "$(sha "$kernel")" }
  initrd: { path: $initrd, sha256: "$(sha "$initrd")" }
  rootfs: { path: $rootfs, sha256: "$(sha "$rootfs")" }
profiles:
  e2e:
    kernel: kernel
    initrd: initrd
    rootfs: rootfs
    kernel_args: [console=ttyS0, loglevel=4, panic=-1, no_timer_check, hvlive.system_size=$SYSTEM_SIZE, hvlive.on_failure=poweroff$extra]
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
}

# pxe_serve DIR LISTEN SERVER_URL HEALTH_URL [WRAP...]: starts `hvpxe serve` on DIR's artifacts and
# profiles (under WRAP, e.g. `ip netns exec NS`; HVPXE_EXTRA_ARGS: more serve options) and waits for
# its /healthz. Its history and operator token go to DIR/state; its admin listener (/machines,
# /metrics) to an ephemeral port on 127.0.0.1 (of WRAP's namespace), read by pxe_machines.
pxe_serve() {
  local dir=$1 listen=$2 server=$3 health=$4; shift 4
  "$@" "$REPO/bin/hvpxe" serve --root "$dir/artifacts" --profiles "$dir/profiles.yaml" --listen "$listen" \
    --server-url "$server" --state-dir "$dir/state" --admin-listen 127.0.0.1:0 ${HVPXE_EXTRA_ARGS:-} > "$dir/hvpxe.log" 2>&1 &
  local pid=$! _
  PIDS+=("$pid")
  for _ in $(seq 100); do
    if "$@" curl -fsS "$health" >/dev/null 2>&1; then return 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.3
  done
  cat "$dir/hvpxe.log" >&2
  die "pxe: hvpxe serve did not come up on $listen"
}

# pxe_boot_bridge NS NET: a new network namespace NS holding a bridge br0 at NET.1/24 with a tap0
# on it for the guest (QEMU runs under `ip netns exec NS`). The job deletes NS when it ends.
pxe_boot_bridge() {
  local ns=$1 net=$2
  netns_add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ns" link add br0 type bridge
  ip -n "$ns" addr add "$net.1/24" dev br0
  ip -n "$ns" link set br0 up
  ip -n "$ns" tuntap add dev tap0 mode tap
  ip -n "$ns" link set tap0 master br0 up
}

# pxe_bridge_peer NS PEER IF ADDR: a new namespace PEER (deleted when the job ends) joined to NS's
# br0 by a veth pair, IF0 on the bridge and IF1 in PEER at ADDR/24: a second machine on the boot
# network (a site's DHCP server, an hvpxe host).
pxe_bridge_peer() {
  local ns=$1 peer=$2 ifname=$3 addr=$4
  netns_add "$peer"
  ip -n "$ns" link add "${ifname}0" type veth peer name "${ifname}1" netns "$peer"
  ip -n "$ns" link set "${ifname}0" master br0 up
  ip -n "$peer" link set lo up
  ip -n "$peer" addr add "$addr/24" dev "${ifname}1"
  ip -n "$peer" link set "${ifname}1" up
}

# pxe_machines DIR OUT [WRAP...]: what `hvpxe machines --json` says into OUT (the admin listener
# with the operator token); and that the boot listener does not list machines, and that no boot
# credential reached hvpxe's log or a console.
pxe_machines() {
  local dir=$1 out=$2 admin server code; shift 2
  admin=$(sed -n 's/^hvpxe: serving .*; admin \([^ ]*\) (token in .*/\1/p' "$dir/hvpxe.log" | head -n 1)
  server=$(sed -n 's/^hvpxe: serving \([^ ]*\) .*/\1/p' "$dir/hvpxe.log" | head -n 1)
  [ -n "$admin" ] || die "pxe: no admin listener in $dir/hvpxe.log"
  "$@" "$REPO/bin/hvpxe" machines --admin-url "$admin" --admin-token-file "$dir/state/admin-token" --json > "$out" \
    || die "pxe: hvpxe machines failed (admin $admin)"
  code=$("$@" curl -s -o /dev/null -w '%{http_code}' "${PXE_LOCAL_URL:-$server}/machines")
  [ "$code" = 404 ] || die "pxe: the boot listener answered /machines with $code, not 404"
  if grep -aE 'credential=[A-Za-z0-9_-]{43}' "$dir/hvpxe.log" > /dev/null; then die "pxe: a boot credential reached hvpxe's log ($dir/hvpxe.log)"; fi
  # A console is often logged (a BMC's serial-over-LAN): the live system prints no credential either.
  if grep -laE 'credential=[A-Za-z0-9_-]{43}' "$OUT"/console-*.log; then die "pxe: a boot credential reached a console log (above)"; fi
}

# pxe_check_events MACHINES_JSON: hvpxe received the install's STARTED and SUCCEEDED webhooks.
pxe_check_events() {
  local events
  events=$(node -e 'const m=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")).machines.find(x=>x.name==="hv-e2e-pxe"); console.log((m?.events??[]).map(e=>e.event).join(","))' "$1")
  say "   hvpxe /machines: hv-e2e-pxe fetched ipxe, kernel, initrd, config, rootfs; events: $events"
  case ",$events," in *,STARTED,*SUCCEEDED,*) ;; *) die "pxe: hvpxe did not receive the STARTED and SUCCEEDED webhooks (got: $events)" ;; esac
}

# time_to_line NAME REGEX FILE: in the background, the seconds from now until console NAME shows REGEX, into FILE.
time_to_line() {
  local log="$OUT/console-$1.log" re=$2 file=$3 start
  start=$(date +%s)
  rm -f "$file"
  ( until [ -f "$log" ] && tr -d '\r' < "$log" | grep -aE "$re" > /dev/null; do sleep 1; done
    echo $(($(date +%s) - start)) > "$file" ) &
  PIDS+=($!)
}

pxe_stage() {
  local mac=52:54:00:e2:e0:01 dir="$OUT/pxe"
  mkdir -p "$dir/tftp"
  # Legacy BIOS: Harvester v1.8's gate refuses it; this run's command line consents, as v1.7 allowed.
  pxe_profiles "$dir" "$mac" "http://$GUEST_SERVER" hvinstall.legacy_bios
  printf '#!ipxe\necho hvinstall e2e: chaining to hvpxe\nchain http://%s/boot.ipxe || shell\n' "$GUEST_SERVER" > "$dir/tftp/start.ipxe"

  local port
  port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
  pxe_serve "$dir" "127.0.0.1:$port" "http://$GUEST_SERVER" "http://127.0.0.1:$port/healthz"

  truncate -s 260G "$OUT/disk-pxe.raw"
  time_to_line pxe-install '^HV-LIVE: hvinstall install ' "$dir/to-install-start"
  FIRMWARE=bios run_qemu pxe-install "$INSTALL_TIMEOUT" \
    -boot n \
    -netdev "user,id=n0,restrict=on,tftp=$dir/tftp,bootfile=start.ipxe,guestfwd=tcp:$GUEST_SERVER:80-cmd:socat - TCP:127.0.0.1:$port" \
    -device virtio-net-pci,netdev=n0,mac=$mac \
    -drive file="$OUT/disk-pxe.raw",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2E0003,drive=d0 \
    || die "pxe-install: QEMU exited with status $?"
  expect_line pxe-install '^HV-LIVE: firmware BIOS' "the live system did not come up through PXE under BIOS"
  expect_line pxe-install '"msg":"OS image ready".*"verified":"sha256 [0-9a-f]{64} \(from http[^"]*\.sha256\) matched"' "the OS image was not fetched from root=live: and verified"
  expect_line pxe-install '^installed /dev/nvme0n1' "the installer did not report a completed install"
  expect_line pxe-install '^automatic install: poweroff' "the automatic install did not power off by itself"
  PXE_LOCAL_URL="http://127.0.0.1:$port" pxe_machines "$dir" "$OUT/pxe-machines.json"
  # report_events: hvpxe added webhooks to the served config; the install posts them back (with the boot credential).
  pxe_check_events "$OUT/pxe-machines.json"
  pxe_check_node_report "$dir" "http://127.0.0.1:$port"

  boot_installed_disk pxe-boot bios "$OUT/disk-pxe.raw" HVE2E0003 "the BIOS-installed disk"
}

# The node-report grant the install wrote on COS_OEM (docs/pxe.md "After the install: node
# reports"): root-only, and it works: hvpxe takes a FALLBACK with its token and shows it, and
# refuses the same report with a forged token. hvagent posts the same way after a fallback.
pxe_check_node_report() {
  local dir=$1 local_url=$2 grant="$OUT/pxe-node-report.json" mode url token code
  LOOP=$(losetup --find --show --read-only --partscan "$OUT/disk-pxe.raw")
  for _ in $(seq 20); do [ -e "${LOOP}p2" ] && break; partprobe "$LOOP" 2>/dev/null; sleep 0.5; done
  mode=$(debugfs -R 'stat /hvinstall/hvpxe-report.json' "${LOOP}p2" 2>/dev/null | sed -n 's/.*Mode: *\([0-7]*\).*/\1/p' | head -n 1)
  debugfs -R 'cat /hvinstall/hvpxe-report.json' "${LOOP}p2" > "$grant" 2>/dev/null
  losetup --detach "$LOOP"; LOOP=
  [ "$mode" = 0600 ] || die "pxe: COS_OEM's hvinstall/hvpxe-report.json has mode '${mode:-none}', not 0600 (the install wrote no node-report grant?)"
  url=$(node -p "new URL(require('$grant').url).pathname") && token=$(node -p "require('$grant').token") \
    || die "pxe: COS_OEM's hvinstall/hvpxe-report.json is not a grant: $(head -c 200 "$grant")"
  local body='{"event":"FALLBACK","at":"2026-01-01T00:00:00Z","message":"e2e: a fallback told with the install'"'"'s grant","running":"v1","failed":"v2"}'
  code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: application/json' -H "authorization: Bearer hvnr_$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')" --data "$body" "$local_url$url")
  [ "$code" = 401 ] || die "pxe: a forged node-report token got $code from $url, not 401"
  code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: application/json' -H "authorization: Bearer $token" --data "$body" "$local_url$url")
  case "$code" in 2??) ;; *) die "pxe: hvpxe answered $code to a FALLBACK with the install's grant at $url" ;; esac
  PXE_LOCAL_URL=$local_url pxe_machines "$dir" "$OUT/pxe-machines-reported.json"
  node -e "const m = require('$OUT/pxe-machines-reported.json').machines.find((x) => x.name === 'hv-e2e-pxe'); if (m?.nodeReport?.event !== 'FALLBACK' || !m.installed) process.exit(1)" \
    || die "pxe: hvpxe's machines do not show the FALLBACK (or it changed the install record): $OUT/pxe-machines-reported.json"
  say "   node report: the install's grant (mode 0600 on COS_OEM) told hvpxe a FALLBACK; a forged token got 401"
}
