# Sourced by test/e2e/run.sh after install-pxe.sh (uses pxe_profiles, pxe_serve, pxe_machines, pxe_check_events,
# time_to_line, run_qemu, expect_line, say, die, PIDS, OUT, REPO).
# TPM 2.0 attestation, the pxe-bios path with a TPM in each guest (QEMU's tpm-tis backed by swtpm,
# `-tpmdev emulator`). profiles.yaml enrolls the machine by its TPM's endorsement key: the sha256
# of the EK's public key, taken from the enrolled swtpm with tpm2-tools as an operator would, before
# any guest runs. Two guests with the same MAC and SMBIOS UUID, each with its own swtpm, boot in
# turn:
#   1. the other TPM: the live installer's attestation (hvinstall.attest_url) is refused, it gets no
#      config, powers off with the reason on its console, its disk untouched; hvpxe records the
#      refusal (the EK it saw) where the operator sees it (hvpxe machines);
#   2. the enrolled TPM: credential activation succeeds, hvpxe releases the config, the install
#      runs to its end and reports SUCCEEDED.

# tpm_ek_sha256 STATE: the sha256 of the endorsement key of the TPM whose state is STATE, as an
# operator takes it: tpm2_createek -f der, then sha256sum (swtpm on a loopback port pair meanwhile).
tpm_ek_sha256() {
  local state=$1 port pid der
  port=$(node -e 'const n=require("net");(function f(){const a=n.createServer().listen(0,"127.0.0.1",()=>{const p=a.address().port;const b=n.createServer().once("error",()=>{a.close();f()}).listen(p+1,"127.0.0.1",()=>{console.log(p);a.close();b.close()})})})()')
  swtpm socket --tpm2 --tpmstate dir="$state" --server type=tcp,port="$port",bindaddr=127.0.0.1 \
    --ctrl type=tcp,port=$((port + 1)),bindaddr=127.0.0.1 --flags not-need-init,startup-clear > "$state.log" 2>&1 &
  pid=$!
  der="$state.ek.der"
  local tries=0
  until TPM2TOOLS_TCTI="swtpm:host=127.0.0.1,port=$port" tpm2_createek -G rsa -c "$state.ek.ctx" -u "$der" -f der > /dev/null 2>&1; do
    tries=$((tries + 1))
    [ "$tries" -lt 50 ] || { kill "$pid"; die "pxe-tpm: swtpm on $state did not answer tpm2_createek"; }
    sleep 0.2
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
  sha256sum "$der" | cut -d' ' -f1
}

# tpm_guest NAME STATE DISK: one PXE boot of the machine (its MAC and UUID) with a TPM on STATE
# (a swtpm for this guest, which ends with it).
tpm_guest() {
  local name=$1 state=$2 disk=$3 i
  rm -f "$state/ctrl.sock"
  swtpm socket --tpm2 --tpmstate dir="$state" --ctrl type=unixio,path="$state/ctrl.sock" --terminate > "$state.$name.log" 2>&1 &
  PIDS+=($!)
  for i in $(seq 50); do [ -S "$state/ctrl.sock" ] && break; sleep 0.1; done
  [ -S "$state/ctrl.sock" ] || die "$name: swtpm did not start (see $state.$name.log)"
  truncate -s 260G "$disk"
  FIRMWARE=bios run_qemu "$name" "$INSTALL_TIMEOUT" \
    -boot n -uuid "$TPM_UUID" \
    -chardev socket,id=chrtpm,path="$state/ctrl.sock" -tpmdev emulator,id=tpm0,chardev=chrtpm -device tpm-tis,tpmdev=tpm0 \
    -netdev "user,id=n0,restrict=on,tftp=$TPM_DIR/tftp,bootfile=start.ipxe,guestfwd=tcp:$GUEST_SERVER:80-cmd:socat - TCP:127.0.0.1:$TPM_PORT" \
    -device virtio-net-pci,netdev=n0,mac=$TPM_MAC \
    -drive file="$disk",if=none,format=raw,id=d0,cache=unsafe -device nvme,serial=HVE2E0007,drive=d0 \
    || die "$name: QEMU exited with status $?"
}

pxe_tpm_stage() {
  TPM_MAC=52:54:00:e2:e0:07 TPM_UUID=4b2a9e10-7c1d-4f0e-9a55-0c2de2e00007 TPM_DIR="$OUT/pxe-tpm"
  local dir=$TPM_DIR ek
  mkdir -p "$dir/tftp" "$dir/tpm-enrolled" "$dir/tpm-other"
  pxe_profiles "$dir" "$TPM_MAC" "http://$GUEST_SERVER" hvinstall.legacy_bios # a BIOS guest, as pxe-bios: Harvester v1.8 refuses legacy BIOS
  ek=$(tpm_ek_sha256 "$dir/tpm-enrolled")
  say "   enrolled TPM: endorsement key sha256 $ek"
  sed -i "s|- { hostname: hv-e2e-pxe, mac: \"$TPM_MAC\" }|- { hostname: hv-e2e-pxe, mac: \"$TPM_MAC\", uuid: \"$TPM_UUID\", tpm_ek_sha256: \"$ek\" }|" "$dir/profiles.yaml"
  grep -q "tpm_ek_sha256: \"$ek\"" "$dir/profiles.yaml" || die "pxe-tpm: could not enroll the machine in $dir/profiles.yaml"
  printf '#!ipxe\necho hvinstall e2e: chaining to hvpxe\nchain http://%s/boot.ipxe || shell\n' "$GUEST_SERVER" > "$dir/tftp/start.ipxe"
  TPM_PORT=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
  pxe_serve "$dir" "127.0.0.1:$TPM_PORT" "http://$GUEST_SERVER" "http://127.0.0.1:$TPM_PORT/healthz"

  say "   1. the same MAC and UUID with another TPM"
  tpm_guest pxe-tpm-other "$dir/tpm-other" "$OUT/disk-tpm-other.raw"
  expect_line pxe-tpm-other "hvpxe refused the TPM attestation \\(challenge\\): HTTP 403: refused: the machine's TPM has endorsement key sha256 [0-9a-f]{64}, not the enrolled $ek" \
    "the live installer with another TPM was not refused by hvpxe"
  if has_line pxe-tpm-other '^installed /dev/'; then die "pxe-tpm-other: the machine with another TPM installed"; fi
  [ "$(head -c 4194304 "$OUT/disk-tpm-other.raw" | tr -d '\0' | wc -c)" = 0 ] || die "pxe-tpm-other: its disk was written to"
  rm -f "$OUT/disk-tpm-other.raw"
  PXE_LOCAL_URL="http://127.0.0.1:$TPM_PORT" pxe_machines "$dir" "$dir/machines-other.json"
  node -e '
    const m = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).machines.find((x) => x.name === "hv-e2e-pxe");
    const r = (m.refusals ?? []).find((x) => x.what === "attest");
    if (!r || !/endorsement key sha256 [0-9a-f]{64}, not the enrolled/.test(r.reason)) { console.error(JSON.stringify(m.refusals)); process.exit(1); }
    if (m.installed || m.fetched.config) { console.error("installed or given its config"); process.exit(1); }
  ' "$dir/machines-other.json" || die "pxe-tpm: hvpxe machines does not show the refused attestation (see $dir/machines-other.json)"

  say "   2. the enrolled TPM"
  time_to_line pxe-tpm-install '^HV-LIVE: hvinstall install ' "$dir/to-install-start"
  tpm_guest pxe-tpm-install "$dir/tpm-enrolled" "$OUT/disk-tpm.raw"
  expect_line pxe-tpm-install 'TPM attestation accepted' "the enrolled TPM's attestation was not accepted"
  expect_line pxe-tpm-install '^installed /dev/nvme0n1' "the installer did not report a completed install"
  expect_line pxe-tpm-install '^automatic install: poweroff' "the automatic install did not power off by itself"
  PXE_LOCAL_URL="http://127.0.0.1:$TPM_PORT" pxe_machines "$dir" "$dir/machines.json"
  pxe_check_events "$dir/machines.json"
  node -e '
    const m = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).machines.find((x) => x.name === "hv-e2e-pxe");
    if (!m.installed || !(m.credentials ?? []).some((c) => c.attestedAt && c.configAt)) { console.error(JSON.stringify(m)); process.exit(1); }
  ' "$dir/machines.json" || die "pxe-tpm: hvpxe machines does not show the attested boot that installed (see $dir/machines.json)"
  rm -f "$OUT/disk-tpm.raw"
}
