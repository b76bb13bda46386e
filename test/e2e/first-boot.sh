# Sourced by test/e2e/run.sh unless HV_E2E_FIRSTBOOT=0 (uses its run_qemu, expect_line, has_line,
# console, say, die, stage_start/stage_end, OUT, CACHE, REPO, BOOT_TIMEOUT, PIDS, CLEANUPS, LOOP).
# The first boot of a real node: the systemd test OS (iso-build/systemd-os: Debian packages shaped
# as an Elemental image, with its own initramfs) is installed by `hvinstall install --source
# <its squashfs>` on the host onto a loop-attached sparse 260 GiB file, inside a network
# namespace whose one NIC has the config's name and the guest's MAC (the installer resolves and
# names the management NIC from the machine it runs on). That name (mgmt0) is one the guest's udev
# would not give its NIC (enp0s5): the NIC has it only because the install pinned it by MAC
# (ifname= in /oem/grubenv, installer/render/nic-names.ts). Then that disk alone boots under OVMF through
# the image's own chain (its shim, grub and /etc/cos/grub.cfg, installed in Elemental's layout), three times, each
# under OVMF with Secure Boot enforced (Microsoft's keys: Debian's signed shim, grub and kernel): the
# active image (first boot), again (state kept), and the passive image (grubenv next_entry=fallback). A fourth boot proves the enforcement: with one
# byte of the ESP's grub changed, shim must refuse it under the same firmware and no kernel start. Each boot's report comes as TAP over the guest's
# second serial port and is parsed with tap-parser (first-boot-tap.mjs); a failing check is named.
# QEMU's monitor socket ($OUT/monitor-<boot>.sock, the NIC is `nic0`) lets a stage take the
# link down and up: fb_monitor <boot> "set_link nic0 off".
# The install puts hvagent on (HV_E2E_FB_AGENT, default the payload `make build` writes; `none`
# installs without it) and the boot report checks what its guards did. The guest's NIC is a tap in
# a network namespace of this stage's own (fb_net): dnsmasq leases the address with a router (the
# network-online guard requires a default route, which QEMU's restricted user network never
# offers) and answers DNS, a chronyd there serves NTP; nothing leaves the namespace.
# FB_TAG: the prefix of this chain's files and namespaces (the upgrade stage runs these functions as `up`).
FB_TAG=${FB_TAG:-fb}
# The config's management NIC: a name of the operator's own, where the guest's udev names its
# virtio NIC at addr 0x5 enp0s5 (the boot report checks both).
FB_NIC=mgmt0
FB_MAC=52:54:00:e2:e0:fb
FB_PIN="ifname=$FB_NIC:$FB_MAC"
FB_DISK=
FB_NETNS=
FB_MNT=
FB_STATE_PATHS=
FB_AGENT=${HV_E2E_FB_AGENT:-$REPO/build/hvagent-payload}
FB_QNS=
FB_NET_PIDS=()
# What the config's containerd-registry setting declares (first-boot.yaml): registries.yaml must name it.
FB_REGISTRY=https://mirror.hv-e2e.test:5000

fb_cleanup() {
  [ -n "$FB_MNT" ] && mountpoint -q "$FB_MNT" && umount "$FB_MNT"
  [ -n "$FB_MNT" ] && rmdir "$FB_MNT" 2>/dev/null
  [ -n "$FB_NETNS" ] && ip netns delete "$FB_NETNS" 2>/dev/null
  local pid
  for pid in "${FB_NET_PIDS[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  [ -n "$FB_QNS" ] && ip netns delete "$FB_QNS" 2>/dev/null
  FB_MNT= FB_NETNS= FB_QNS= FB_NET_PIDS=()
}
CLEANUPS+=(fb_cleanup)

# fb_monitor BOOT COMMAND: a QEMU monitor command for the running guest of that boot; prints the answer.
fb_monitor() {
  printf '%s\n' "$2" | socat -t 2 - "UNIX-CONNECT:$OUT/monitor-$1.sock" | tr -d '\r'
}

# fb_partition LABEL: the loop partition carrying that filesystem label
fb_partition() {
  local p
  for p in "$LOOP"p*; do [ "$(blkid -p -s LABEL -o value "$p" 2>/dev/null)" = "$1" ] && { echo "$p"; return 0; }; done
  return 1
}
fb_attach() { # [--read-only]
  LOOP=$(losetup --find --show --partscan "$@" "$FB_DISK")
  for _ in $(seq 20); do [ -e "${LOOP}p6" ] && break; partprobe "$LOOP" 2>/dev/null; sleep 0.5; done
}
fb_detach() { losetup --detach "$LOOP"; LOOP=; }

# The firstboot and upgrade chains start together: with a cold cache both would build the same
# test OS at once (twice the CPU) and write one report file. The cache's lock makes the second wait
# for the first and find the image cached; each chain has its own report.
fb_build() {
  local report="$OUT/$FB_TAG-systemd-os.json" log="$OUT/$FB_TAG-systemd-os-build.log"
  flock "$CACHE/systemd-os.lock" node "$REPO/dist/iso-build/systemd-os/cli.js" --cache "$CACHE" > "$report" 2> "$log" ||
    { tail -n 20 "$log" >&2; die "systemd-os: building the test OS failed (see $log)"; }
  FB_SQUASHFS=$(node -p "require('$report').squashfs")
  say "   $(node -p "const m = require('$report'); \`image \${m.key} (root \${m.rootKey}): \${m.packages} packages, kernel \${m.kernelVersion}, tree \${(m.treeBytes / 2 ** 20).toFixed(0)} MiB, squashfs \${(m.squashfsBytes / 2 ** 20).toFixed(0)} MiB, initrd \${(m.initrd.bytes / 2 ** 20).toFixed(1)} MiB; built: root \${m.built.rootSec === undefined ? 'cached' : m.built.rootSec + ' s'}, image \${m.built.imageSec === undefined ? 'cached' : m.built.imageSec + ' s'}\`")"
}

# fb_facts: the facts of the machine the disk is for (--facts), as `hvinstall preflight --json`
# gathers them in the install's namespace: its NIC is the stand-in with the guest's MAC. The
# installer pins a NIC's name only by its permanent MAC (installer/preflight/machine.ts
# permanentMac), and a veth's address is one set at creation (addr_assign_type 3); this host's
# kernel may have no bonding (bonding_slave/perm_hwaddr), dummy or netdevsim driver to give one. The
# guest's virtio NIC has a permanent address, so the stand-in says so too: a file reading 0
# (NET_ADDR_PERM) over its addr_assign_type, in preflight's own mount namespace (ip netns exec
# mounts /sys afresh; nothing else sees it). The CPUs, memory and firmware gathered are this
# host's; those of the guest QEMU gives (OVMF) replace them.
fb_facts() {
  printf '0\n' > "$OUT/$FB_TAG-addr-assign-perm"
  ip netns exec "$FB_NETNS" sh -c 'mount --bind "$1" "/sys/class/net/$2/addr_assign_type" && shift 2 && exec "$@"' sh "$OUT/$FB_TAG-addr-assign-perm" "$FB_NIC" \
    "$REPO/bin/hvinstall" preflight --json > "$OUT/$FB_TAG-preflight.json" 2> "$OUT/$FB_TAG-preflight.log" || [ $? = 1 ] ||
    die "first-boot: hvinstall preflight in $FB_NETNS failed (see $OUT/$FB_TAG-preflight.log)"
  node --input-type=module -e "
    import { readFileSync, writeFileSync } from 'node:fs';
    const f = JSON.parse(readFileSync('$OUT/$FB_TAG-preflight.json', 'utf8'));
    const nic = f.nics.find((n) => n.name === '$FB_NIC');
    if (nic?.permMac !== '$FB_MAC') { process.stderr.write('preflight did not find $FB_NIC with the permanent MAC $FB_MAC: ' + JSON.stringify(nic) + '\\n'); process.exit(1); }
    const cpus = $FB_SMP;
    writeFileSync('$OUT/$FB_TAG-facts.json', JSON.stringify({ ...f, cpu: { ...f.cpu, cores: cpus, threads: cpus }, memoryBytes: $MEM * 2 ** 20, firmware: { uefi: true } }, null, 1) + '\\n');" ||
    die "first-boot: no facts of the guest's machine (see $OUT/$FB_TAG-preflight.json)"
}

fb_install() {
  FB_DISK="$OUT/$FB_TAG-disk.raw"
  truncate -s 260G "$FB_DISK"
  fb_attach
  sed "s#@DEVICE@#$LOOP#; s#@NIC@#$FB_NIC#; s#@MAC@#$FB_MAC#" "$REPO/test/e2e/first-boot.yaml" > "$OUT/$FB_TAG-config.yaml"
  FB_NETNS="hv-e2e-$FB_TAG-$$"
  ip netns add "$FB_NETNS"
  ip -n "$FB_NETNS" link add "$FB_NIC" address "$FB_MAC" type veth peer name fb-peer0 || die "first-boot: cannot create the stand-in NIC in $FB_NETNS"
  fb_facts
  # An image bundle in Harvester's layout, copied by the install onto COS_PERSISTENT.
  node "$REPO/test/e2e/first-boot-bundle.mjs" "$OUT/$FB_TAG-bundle" > "$OUT/$FB_TAG-bundle.json" || die "first-boot: cannot write the image bundle"
  node -p "const b = require('$OUT/$FB_TAG-bundle.json'); b.archive + ' ' + b.sha256" | tr -d '\n' > "$OUT/$FB_TAG-bundle.txt"
  node -p "require('$OUT/$FB_TAG-bundle.json').images.join(' ')" | tr -d '\n' > "$OUT/$FB_TAG-bundle-images.txt"
  [ "$FB_AGENT" = none ] || [ -s "$FB_AGENT/hvagent-payload.json" ] || die "first-boot: no hvagent payload in $FB_AGENT (make build writes build/hvagent-payload; HV_E2E_FB_AGENT=none installs without the agent)"
  local t0=$SECONDS
  # --device: the loop device is a disk built here for the guest, not this host's (whose hardware the
  # gate would judge); --facts: the guest's machine, which the gate judges and the node's files are
  # rendered for (its NIC's name pinned by MAC).
  ip netns exec "$FB_NETNS" "$REPO/bin/hvinstall" install --config "$OUT/$FB_TAG-config.yaml" --device "$LOOP" --source "$FB_SQUASHFS" --bundle "$OUT/$FB_TAG-bundle" \
    --agent "$FB_AGENT" --facts "$OUT/$FB_TAG-facts.json" --yes \
    --progress plain --state-dir "$OUT/$FB_TAG-state" > "$OUT/$FB_TAG-install.log" 2>&1 ||
    { tail -n 30 "$OUT/$FB_TAG-install.log" >&2; die "first-boot: hvinstall install of the systemd OS failed (see $OUT/$FB_TAG-install.log)"; }
  say "   hvinstall install: $((SECONDS - t0)) s ($(grep -E '^installed ' "$OUT/$FB_TAG-install.log" | head -n 1 | cut -c1-80))"
  # The test OS carries an Elemental boot chain: the disk boots through it, not hvinstall's own grub.
  grep -q "boot chain: the image's own" "$OUT/$FB_TAG-install.log" ||
    { grep -a 'boot chain' "$OUT/$FB_TAG-install.log" >&2; die "first-boot: the install did not choose the test OS's own boot chain (see $OUT/$FB_TAG-install.log)"; }
  ip netns delete "$FB_NETNS"; FB_NETNS=
  local oem kargs
  oem=$(fb_partition COS_OEM) || die "first-boot: no COS_OEM on the installed disk"
  # The pin the guest's NIC gets its name by; without it the keyfiles would name no NIC of the guest's.
  kargs=$(fb_oem_grubenv third_party_kernel_args || true)
  case " $kargs " in *" $FB_PIN "*) ;; *)
    grep -a 'pinned' "$OUT/$FB_TAG-install.log" >&2 || true
    die "first-boot: /oem/grubenv does not pin the management NIC ($FB_PIN; third_party_kernel_args: ${kargs:-none}; see $OUT/$FB_TAG-install.log)" ;; esac
  say "   /oem/grubenv pins the management NIC: $FB_PIN"
  debugfs -R "cat /90_custom.yaml" "$oem" 2>/dev/null > "$OUT/$FB_TAG-90_custom.yaml"
  # What the installer's layout says, read with a YAML parser (the guest's initramfs has its own).
  FB_STATE_PATHS=$(cd "$REPO" && node --input-type=module -e "
    import { parse } from 'yaml';
    import { readFileSync } from 'node:fs';
    const e = (parse(readFileSync('$OUT/$FB_TAG-90_custom.yaml', 'utf8')).stages?.rootfs ?? []).find((x) => x.environment_file === '/run/cos/cos-layout.env');
    process.stdout.write(String(e?.environment?.PERSISTENT_STATE_PATHS ?? ''));")
  [ -n "$FB_STATE_PATHS" ] || die "first-boot: /oem/90_custom.yaml on the installed disk has no PERSISTENT_STATE_PATHS (see $OUT/$FB_TAG-90_custom.yaml)"
  case " $FB_STATE_PATHS " in *" /var/lib/hvtest-extra "*) ;; *) die "first-boot: the installer's layout lacks the config's persistent_state_paths entry" ;; esac
  printf '%s' "$FB_STATE_PATHS" > "$OUT/$FB_TAG-state-paths.txt"
  fb_detach
}

# fb_net: the namespace the guest's NIC lives in (fbtap0, 10.0.2.2 the router and NTP server,
# 10.0.2.3 DNS), with dnsmasq (DHCP: 10.0.2.15 with a router; DNS: Debian's NTP pool names are
# 10.0.2.2) and chronyd (NTP from the host's clock, never setting it). Lives for all three boots.
# --no-ping: dnsmasq pings an address before it first offers it and waits 3 s for no answer, so
# the first boot's lease (the only new one) came 3 s after its DISCOVER where the later boots'
# came at once; nothing else lives on this link, and the baseline (a later boot) never paid it.
fb_net() {
  FB_QNS="hv-e2e-${FB_TAG}q-$$"
  ip netns add "$FB_QNS"
  ip -n "$FB_QNS" link set lo up
  ip -n "$FB_QNS" tuntap add dev fbtap0 mode tap
  ip -n "$FB_QNS" addr add 10.0.2.2/24 dev fbtap0
  ip -n "$FB_QNS" addr add 10.0.2.3/24 dev fbtap0
  ip -n "$FB_QNS" link set fbtap0 up
  ip netns exec "$FB_QNS" dnsmasq --conf-file=/dev/null --keep-in-foreground --user=root --bind-interfaces --interface=fbtap0 \
    --dhcp-range=10.0.2.15,10.0.2.15,255.255.255.0,1h --dhcp-option=option:router,10.0.2.2 --dhcp-option=option:dns-server,10.0.2.3 \
    --no-ping --no-resolv --no-hosts --address=/debian.pool.ntp.org/10.0.2.2 --dhcp-leasefile="$OUT/$FB_TAG-dnsmasq.leases" --pid-file= \
    --log-dhcp --log-queries --log-facility="$OUT/$FB_TAG-dnsmasq.log" &
  FB_NET_PIDS+=($!)
  printf 'local stratum 8\nallow 10.0.2.0/24\nport 123\ncmdport 0\npidfile %s\n' "$OUT/$FB_TAG-chronyd.pid" > "$OUT/$FB_TAG-chrony.conf"
  ip netns exec "$FB_QNS" chronyd -f "$OUT/$FB_TAG-chrony.conf" -x -d -u root > "$OUT/$FB_TAG-chronyd.log" 2>&1 &
  FB_NET_PIDS+=($!)
  local i
  for i in $(seq 20); do ip netns exec "$FB_QNS" ss -Hlnu | grep -q ':67 ' && ip netns exec "$FB_QNS" ss -Hlnu | grep -q ':123 ' && return 0; sleep 0.5; done
  die "first-boot: dnsmasq or chronyd did not start in $FB_QNS (see $OUT/$FB_TAG-dnsmasq.log, $OUT/$FB_TAG-chronyd.log)"
}

# fb_slow_link NAME: the link made slow on purpose. Down from power-on (before the guest's
# NetworkManager starts), up again FB_LINK_DOWN_AFTER seconds after the guest printed what
# `nm-online -x` answered (iso-build/systemd-os/files/hvtest-nm-online-x); the guest's report
# then shows that answer came while mgmt-br had no address. Each monitor command's answer and
# the times go to $OUT/slow-link-NAME.txt (an error there fails the boot).
FB_LINK_DOWN_AFTER=5
fb_slow_link() {
  local name=$1 log="$OUT/slow-link-$1.txt" i
  { echo "link off at $(date -u +%T): $(fb_monitor "$name" "set_link nic0 off" | grep -av '^QEMU\|^(qemu)' | tr -d '\033')"
    for i in $(seq $((BOOT_TIMEOUT * 2))); do has_line "$name" 'HVTEST-NM-ONLINE-X returned' && break; sleep 0.5; done
    echo "guest: $(console "$name" | grep -a -m1 -o 'HVTEST-NM-ONLINE-X returned.*' | tr -d '\r')"
    sleep "$FB_LINK_DOWN_AFTER"
    echo "link on at $(date -u +%T): $(fb_monitor "$name" "set_link nic0 on" | grep -av '^QEMU\|^(qemu)' | tr -d '\033')"; } > "$log" 2>&1
}

# No display adapter: nobody looks at one here, and under TCG the firmware's, grub's and the kernel's
# framebuffer console (tty1, on the kernel command line) draw every console line in emulated code.
# The consoles that are read are the serial ports.
FB_NO_VGA="-vga none"
# Two vCPUs for these boots (run.sh's BOOT_SMP gives the small test OS's boots one): systemd starts units in parallel, and
# with one vCPU a first boot took longer and more CPU (in full runs: 326 s and 226 CPU-s, against
# 228 s and 188 CPU-s with two).
FB_SMP=${HV_E2E_SMP:-2}

# fb_boot NAME BOOT MODE AGENT [slow-link]: boots the installed disk; passes when the initramfs and
# the boot report say what this boot must be and the guest powers off cleanly. AGENT: run (the
# report checks what hvagent did), masked (the harness masked it on this boot), none.
fb_boot() {
  local name=$1 boot=$2 mode=$3 agent=$4 slow=${5:-} tap="$OUT/tap-$1.log"
  rm -f "$tap" "$OUT/monitor-$name.sock" "$OUT/slow-link-$name.txt"
  # The monitor answers while the guest runs: one query proves the socket a later stage drives.
  ( for _ in $(seq 120); do [ -S "$OUT/monitor-$name.sock" ] && break; sleep 0.5; done
    fb_monitor "$name" "info network" > "$OUT/monitor-$name.txt" 2>&1
    [ "$slow" = slow-link ] && fb_slow_link "$name" ) &
  local helper=$!
  PIDS+=($helper)
  local t0=$SECONDS
  QEMU_SMP=$FB_SMP QEMU_WRAP="ip netns exec $FB_QNS" run_qemu "$name" "$BOOT_TIMEOUT" $FB_NO_VGA \
    -drive file="$FB_DISK",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2EFB001,drive=d0 \
    -netdev tap,id=mgmt0,ifname=fbtap0,script=no,downscript=no -device virtio-net-pci,netdev=mgmt0,id=nic0,mac="$FB_MAC",bus=pcie.0,addr=0x5 \
    -serial stdio -serial file:"$tap" -monitor unix:"$OUT/monitor-$name.sock",server,nowait \
    -fw_cfg name=opt/hvtest/boot,string="$boot" -fw_cfg name=opt/hvtest/mode,string="$mode" \
    -fw_cfg name=opt/hvtest/nic,string="$FB_NIC" -fw_cfg name=opt/hvtest/state-paths,file="$OUT/$FB_TAG-state-paths.txt" \
    -fw_cfg name=opt/hvtest/slow-link,string="$([ "$slow" = slow-link ] && echo 1 || echo 0)" \
    -fw_cfg name=opt/hvtest/bundle,file="$OUT/$FB_TAG-bundle.txt" -fw_cfg name=opt/hvtest/bundle-images,file="$OUT/$FB_TAG-bundle-images.txt" \
    -fw_cfg name=opt/hvtest/agent,string="$agent" -fw_cfg name=opt/hvtest/registry,string="$FB_REGISTRY" ${FB_EXTRA_ARGS:-} \
    || die "$name: QEMU exited with status $?"
  local wall=$((SECONDS - t0))
  # The guest is gone: a link helper still waiting for its marker has nothing left to do.
  kill "$helper" 2> /dev/null || true; wait "$helper" 2> /dev/null || true
  expect_line "$name" "HVTEST-INITRD root=LABEL=COS_STATE image=/cOS/$mode.img mode=$mode" "the initramfs did not start the $mode image"
  if has_line "$name" 'HVTEST-INITRD-FAILED'; then console "$name" | grep -a 'HVTEST-INITRD' | tail -n 20 >&2; die "$name: the initramfs failed (console-$name.log)"; fi
  expect_line "$name" 'HVTEST-INITRD layout from /run/cos/cos-layout.env' "the initramfs did not read a layout"
  expect_line "$name" 'HVTEST-INITRD switch_root into' "the initramfs did not switch to the image"
  say "   $name: TAP report ($tap):"
  node "$REPO/test/e2e/first-boot-tap.mjs" "$tap" --summary "$OUT/tap-$name.json" | sed 's/^/     /' || die "$name: the boot report failed (TAP in $tap, console in $OUT/console-$name.log)"
  expect_line "$name" 'reboot: Power down' "the guest did not power off cleanly"
  if has_line "$name" 'Failed unmounting|A stop job is running'; then console "$name" | grep -aE 'Failed unmounting|A stop job is running' >&2; die "$name: the shutdown was not clean"; fi
  grep -q 'nic0' "$OUT/monitor-$name.txt" || die "$name: the QEMU monitor did not answer on $OUT/monitor-$name.sock (see monitor-$name.txt)"
  if [ "$slow" = slow-link ]; then
    grep -q '^link on at [0-9:]*: *$' "$OUT/slow-link-$name.txt" && grep -q '^link off at [0-9:]*: *$' "$OUT/slow-link-$name.txt" ||
      die "$name: the harness could not take the link down and up (see $OUT/slow-link-$name.txt)"
    say "   $name: slow link: $(tr '\n' ';' < "$OUT/slow-link-$name.txt")"
  fi
  say "   $name: $(node -p "const s = require('$OUT/tap-$name.json'); \`\${s.checks.length} checks passed; \${s.checks[0].notes[0] ?? ''}\`"); power-on to power-off ${wall} s"
}

# Secure Boot's negative case: one byte in the middle of EFI/BOOT/grubx64.efi (inside the image
# its signature covers) flipped, as a tampered disk would have it; shim, which the firmware started
# from the removable path, must refuse that grub, and no kernel may start. The disk is not booted
# again after this.
fb_sb_refused() {
  local grub="$OUT/$FB_TAG-grubx64.efi" esp off byte
  fb_attach
  esp=$(fb_partition COS_GRUB) || die "first-boot: no COS_GRUB on the installed disk"
  mcopy -n -i "$esp" ::/EFI/BOOT/grubx64.efi "$grub" || die "first-boot: no EFI/BOOT/grubx64.efi on $esp"
  off=$(( $(stat -c %s "$grub") / 2 ))
  byte=$(od -An -tu1 -j "$off" -N1 "$grub" | tr -d ' ')
  printf "$(printf '\\%03o' $(( byte ^ 255 )))" | dd of="$grub" bs=1 seek="$off" conv=notrunc status=none
  mcopy -o -i "$esp" "$grub" ::/EFI/BOOT/grubx64.efi || die "first-boot: cannot write the altered grub to $esp"
  fb_detach
  FIRMWARE=sb DONE_ON='Verification failed: \(0x1A\) Security Violation' FAIL_ON='EFI stub|Linux version' \
    run_qemu fb-sb-refused "$BOOT_TIMEOUT" $FB_NO_VGA \
    -drive file="$FB_DISK",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2EFB001,drive=d0 -nic none \
    -serial stdio -monitor none || die "fb-sb-refused: QEMU exited with status $?"
  expect_line fb-sb-refused 'starting Boot[0-9A-F]+ "UEFI QEMU NVMe' "the firmware did not start the disk's shim"
  expect_line fb-sb-refused 'Verification failed: \(0x1A\) Security Violation' "shim did not refuse the altered grub"
  say "   fb-sb-refused: shim refused the ESP's grub with byte $off flipped ($byte -> $(( byte ^ 255 ))): Verification failed (0x1A) Security Violation"
}

# COS_OEM's grubenv, which the boot chain's grub.cfg reads: fb_grubenv set|unset ARGS...
fb_grubenv() {
  fb_attach
  FB_MNT=$(mktemp -d)
  mount "$(fb_partition COS_OEM)" "$FB_MNT"
  grub-editenv "$FB_MNT/grubenv" "$@"
  umount "$FB_MNT"; rmdir "$FB_MNT"; FB_MNT=
  fb_detach
}
# The next boot takes the passive image once (next_entry, which grub clears), with the agent
# masked on its kernel line (third_party_kernel_args, which the boot chain's bootargs.cfg appends; the
# installed value is put back after): the benchmark's boot without the agent. Without hvagent the
# node bootstraps as Harvester's image does, through a unit ordered as rancherd.service (after
# network-online.target, before multi-user.target), which that boot's kernel line pulls in.
FB_MASK="systemd.mask=hvagent.service systemd.mask=hvagent-console.service systemd.wants=hvtest-bootstrap-baseline.service"
FB_KARGS=
fb_oem_grubenv() { debugfs -R "cat /grubenv" "$(fb_partition COS_OEM)" 2>/dev/null | grep -a "^$1=" | cut -d= -f2-; }
# The passive image's menu entry id in the image's own grub.cfg: Elemental's `fallback` (its ids are
# cos, fallback and recovery; hvinstall's own grub.cfg names them active, passive and recovery).
FB_PASSIVE_ENTRY=fallback
fb_select_passive() {
  if [ "$FB_AGENT" = none ]; then fb_grubenv set "next_entry=$FB_PASSIVE_ENTRY"; return; fi
  fb_attach --read-only
  FB_KARGS=$(fb_oem_grubenv third_party_kernel_args)
  fb_detach
  fb_grubenv set "next_entry=$FB_PASSIVE_ENTRY" "third_party_kernel_args=${FB_KARGS:+$FB_KARGS }$FB_MASK"
}
fb_expect_one_shot_cleared() {
  fb_attach --read-only
  local env
  env=$(fb_oem_grubenv next_entry)
  fb_detach
  [ "$env" = "" ] || die "first-boot: grub did not clear the one-shot next_entry (next_entry=$env)"
  [ "$FB_AGENT" = none ] || fb_grubenv set "third_party_kernel_args=$FB_KARGS"
}

# The benchmark: seconds from the kernel's start to the last guard done (the boot report's timing
# line) on the first boot and the second, against the passive boot with the agent masked, where the
# node bootstraps as without hvagent (its multi-user.target waits for the rancherd-ordered bootstrap:
# the network online, the rke2 stand-in answering), as ratios; beside them, the ratios to the last
# of that boot's other units (the baseline before 2026-12-05, which waited for no network and no
# RKE2); written to fb-timing.txt.
fb_benchmark() {
  node --input-type=module -e "
    import { readFileSync, writeFileSync } from 'node:fs';
    const t = (n) => JSON.parse(readFileSync('$OUT/tap-' + n + '.json', 'utf8')).timing ?? {};
    const [b1, b2, b3] = ['fb1', 'fb2', 'fb3'].map(t);
    const base = Number(b3['multi-user']);
    const others = Number(b3['multi-user-others']);
    if (!(base > 0) || !(others > 0) || !(Number(b3.bootstrapped) > 0)) throw new Error('fb3 timing incomplete: ' + JSON.stringify(b3));
    const line = (n, b) => n + ': all guards done ' + b['all-guards-done'] + ' s after the kernel started (READY=1 ' + b['hvagent-ready'] + ' s, network-online.target ' + b['network-online'] + ' s) = ' + (Number(b['all-guards-done']) / base).toFixed(2) + 'x the baseline (' + (Number(b['all-guards-done']) / others).toFixed(2) + 'x its units without the bootstrap)';
    const out = [line('first boot (fb1)', b1), line('second boot (fb2)', b2), 'baseline: the passive boot (fb3) with hvagent masked reached multi-user.target ' + base + ' s after the kernel started (network-online.target ' + b3['network-online'] + ' s, its bootstrap ordered as rancherd saw rke2 answer at ' + b3.bootstrapped + ' s; its other units were up at ' + others + ' s)'].join('\\n') + '\\n';
    writeFileSync('$OUT/$FB_TAG-timing.txt', out);
    process.stdout.write(out);" | sed 's/^/   benchmark: /'
}

firstboot_stage() {
  stage_start firstboot-build
  fb_build
  stage_end firstboot-build
  stage_start firstboot-install
  fb_install
  stage_end firstboot-install
  local agent=run
  [ "$FB_AGENT" = none ] && agent=none
  fb_net
  stage_start firstboot-boot1
  # Under Secure Boot, its link as the baseline's: the benchmark compares fb1 and fb2 with fb3 like
  # for like, and the link held down on purpose (fb_slow_link) is the upgrade chain's first boot's.
  FIRMWARE=sb fb_boot fb1 1 active "$agent"
  expect_line fb1 'secureboot: Secure boot enabled' "the first boot did not run with Secure Boot enforced"
  stage_end firstboot-boot1
  stage_start firstboot-boot2
  FIRMWARE=sb fb_boot fb2 2 active "$agent"
  expect_line fb2 'secureboot: Secure boot enabled' "the second boot did not run with Secure Boot enforced"
  expect_line fb2 'Kernel is locked down from EFI Secure Boot' "the kernel did not lock itself down under Secure Boot"
  say "   fb2: booted with Secure Boot enforced (shim -> grub -> kernel, all signed; kernel locked down)"
  stage_end firstboot-boot2
  stage_start firstboot-passive
  fb_select_passive
  # Under Secure Boot as fb2 is: the baseline is fb2's boot without the agent, not also without the
  # signature checks (shim, grub, the locked-down kernel's modules: 5-6 s of a boot under TCG).
  FIRMWARE=sb fb_boot fb3 3 passive "$([ "$agent" = run ] && echo masked || echo none)"
  expect_line fb3 'secureboot: Secure boot enabled' "the passive boot did not run with Secure Boot enforced"
  fb_expect_one_shot_cleared
  stage_end firstboot-passive
  if [ "$agent" = run ]; then fb_benchmark; fi
  stage_start firstboot-sb-refused
  fb_sb_refused
  stage_end firstboot-sb-refused
}
