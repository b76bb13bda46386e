/** The label check's and the ESP directories' pure halves: blkid and mdir output read as the tools write it. */
import { describe, expect, it } from 'vitest';
import { labelledDevices } from '../../../installer/bootloader/labels.js';
import { missingFatDirs } from '../../../installer/bootloader/index.js';

const BLKID = `DEVNAME=/dev/nvme0n1p4
LABEL=COS_STATE
UUID=6db5eae3-5f0f-4c0d-93bb-de293ad89b23
TYPE=ext4

DEVNAME=/dev/nvme0n1p1
LABEL_FATBOOT=COS_GRUB
LABEL=COS_GRUB
TYPE=vfat

DEVNAME=/dev/sdb1
LABEL=COS_STATE
TYPE=ext4

DEVNAME=/dev/nvme0n1p6
TYPE=ext4

DEVNAME=/dev/nvme0n1p2
LABEL=COS_OEM=X
TYPE=ext4
`;

describe('labelledDevices', () => {
  it('names every device of each asked label, sorted, and an empty list for a label nobody carries', () => {
    expect(labelledDevices(BLKID, ['COS_STATE', 'COS_GRUB', 'COS_RECOVERY', 'COS_OEM=X'])).toEqual({
      COS_STATE: ['/dev/nvme0n1p4', '/dev/sdb1'],
      COS_GRUB: ['/dev/nvme0n1p1'],
      COS_RECOVERY: [],
      'COS_OEM=X': ['/dev/nvme0n1p2'],
    });
  });

  it('ignores labels not asked about, LABEL_FATBOOT, and a device listed twice counts once', () => {
    const twice = `${BLKID}\nDEVNAME=/dev/nvme0n1p4\nLABEL=COS_STATE\n`;
    expect(labelledDevices(twice, ['COS_STATE'])).toEqual({ COS_STATE: ['/dev/nvme0n1p4', '/dev/sdb1'] });
    expect(labelledDevices('', ['COS_STATE'])).toEqual({ COS_STATE: [] });
  });
});

describe('missingFatDirs', () => {
  const dirs = ['::/EFI', '::/EFI/BOOT', '::/EFI/hvinstall'];
  it('all of them on an empty ESP (mdir prints nothing), in order, parents first', () => {
    expect(missingFatDirs('', dirs)).toEqual(dirs);
  });
  it('only the missing ones; FAT names compare without case; a file of that name is not a directory', () => {
    const listing = '::/efi/\n::/EFI/boot/\n::/EFI/BOOT/BOOTX64.EFI\n::/EFI/hvinstall\n';
    expect(missingFatDirs(listing, dirs)).toEqual(['::/EFI/hvinstall']);
    expect(missingFatDirs('::/EFI/\n::/EFI/BOOT/\n::/EFI/hvinstall/\n', dirs)).toEqual([]);
  });
});
