#!/usr/bin/env bash
# make demo: installs examples/config-create.yaml onto a sparse 260 GiB raw disk image through a
# loop device, prints the partition table and the files written, detaches, and leaves the image
# (demo-out/disk.raw; HV_DEMO_QCOW2=1 also converts it to demo-out/disk.qcow2).
# Needs root (loop devices, mkfs, mount). `make demo` runs `make deps` and `make build` first.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=${HV_DEMO_DIR:-$REPO/demo-out}
# Harvester's active.img is 3072 MiB; the demo's tiny OS does not need it, and 512 MiB keeps the
# demo to a minute or so on a busy machine. Set HV_DEMO_SYSTEM_SIZE=3072 for Harvester's size.
SYSTEM_SIZE=${HV_DEMO_SYSTEM_SIZE:-512}

if [ "$(id -u)" != 0 ]; then
  echo "demo: needs root (loop devices, mkfs, mount); run: sudo make demo" >&2
  exit 2
fi
for tool in qemu-img losetup sgdisk mkfs.ext4 mkfs.vfat blkid; do
  command -v "$tool" >/dev/null || { echo "demo: $tool is missing; run make deps" >&2; exit 2; }
done

rm -rf "$OUT"
mkdir -p "$OUT"
LOOP=""
MNT=$(mktemp -d)
cleanup() {
  set +e
  for m in "$MNT"/*; do mountpoint -q "$m" 2>/dev/null && umount "$m"; done
  rm -rf "$MNT"
  if [ -n "$LOOP" ]; then
    losetup --detach "$LOOP" && echo "demo: detached $LOOP"
  fi
}
trap cleanup EXIT

echo "== building a small OS tree (Debian busybox-static + os-release)"
node --input-type=module -e "
  const { buildTestOsTree } = await import('$REPO/dist/iso-build/index.js');
  const t = await buildTestOsTree('$OUT/os-tree');
  console.log('demo: OS tree', t.dir, Object.keys(t.files).length, 'files');
"

echo "== creating a sparse 260 GiB raw disk"
qemu-img create -q -f raw "$OUT/disk.raw" 260G
du -h --apparent-size "$OUT/disk.raw"
LOOP=$(losetup --find --show "$OUT/disk.raw")
echo "demo: attached $OUT/disk.raw to $LOOP"

sed "s#^\(  device:\).*#\1 $LOOP#" examples/config-create.yaml > "$OUT/config.yaml"

echo "== hvinstall plan"
bin/hvinstall plan --config "$OUT/config.yaml" --system-size "$SYSTEM_SIZE"

echo "== hvinstall install"
# --device onto a loop device: a disk built here for another machine, so Harvester's hardware gate
# does not judge this one (which may be a small VM with legacy BIOS); pass --facts FILE to judge and
# render for the machine the disk is for.
bin/hvinstall install --config "$OUT/config.yaml" --device "$LOOP" --source "$OUT/os-tree" --yes --progress plain \
  --system-size "$SYSTEM_SIZE" --state-dir "$OUT/state"

echo "== the partition table"
sgdisk --print "$LOOP"
echo
for p in "$LOOP"p*; do
  printf '%-16s %s\n' "$p" "$(blkid -p -o export "$p" | grep -E '^(TYPE|LABEL|UUID)=' | tr '\n' ' ')"
done

echo
echo "== files written"
show() { # label partition
  mkdir -p "$MNT/$1"
  mount -o ro "$2" "$MNT/$1"
  echo "-- $1 ($2)"
  # grub's platform module directories are summarised, not listed file by file
  (cd "$MNT/$1" && find . \( -path ./lost+found -o -name i386-pc -o -name x86_64-efi -o -name fonts -o -name locale \) -prune \
      -o -type f -printf '%m %8s  %p\n' | sort -k3 | sed 's#  \./#  /#')
  (cd "$MNT/$1" && find . -type d \( -name i386-pc -o -name x86_64-efi \) -printf '%p\n' | while read -r d; do
      echo "         $(find "$d" -type f | wc -l) files  ${d#.}/"; done)
  umount "$MNT/$1"
}
part() { for p in "$LOOP"p*; do [ "$(blkid -p -s LABEL -o value "$p")" = "$1" ] && echo "$p"; done; }
show COS_OEM "$(part COS_OEM)"
show COS_STATE "$(part COS_STATE)"
show COS_RECOVERY "$(part COS_RECOVERY)"
show COS_PERSISTENT "$(part COS_PERSISTENT)"
mkdir -p "$MNT/persistent"; mount -o ro "$(part COS_PERSISTENT)" "$MNT/persistent"
echo "         $(find "$MNT/persistent/.state" -mindepth 1 -maxdepth 1 -type d | wc -l) bind directories under /.state"
umount "$MNT/persistent"
ESP=$(part COS_GRUB || true)
if [ -n "$ESP" ]; then echo "-- COS_GRUB ($ESP)"; mdir -/ -b -i "$ESP" ::/EFI; fi

losetup --detach "$LOOP"; echo "demo: detached $LOOP"; LOOP=""
if [ "${HV_DEMO_QCOW2:-0}" = 1 ]; then
  qemu-img convert -O qcow2 "$OUT/disk.raw" "$OUT/disk.qcow2"
  echo "demo: converted to $OUT/disk.qcow2"
fi
echo "== done: $OUT/disk.raw ($(du -h "$OUT/disk.raw" | cut -f1) used of 260 GiB); journal and log in $OUT/state"
