/**
 * grub-install on i386-pc reports success over writes the disk failed or stored wrong (it writes
 * through the page cache and its exit status says nothing of what reached the disk). So the install
 * reads the boot sector and the embedded core.img back from the disk, bypassing the cache, and
 * compares them with the boot.img and core.img grub-install left in the boot directory.
 *
 * grub-bios-setup patches a few fields as it writes (grub util/setup.c): in the boot sector the BPB
 * it keeps from the disk, the sector of core.img, the boot drive and its check, and everything from
 * the Windows NT magic on (the partition table it keeps); in core.img's first sector (diskboot) the
 * blocklist's start and length, and in its second sector the Reed-Solomon redundancy length. Every
 * other byte must be the file's, and the pointers must point where core.img is.
 */
import { constants, open, readFile } from 'node:fs/promises';
import path from 'node:path';
import { alignedSharedBuffer, DIRECT_IO_ALIGN } from '../deploy/aligned-buffer.js';
import { ReadBackMismatch } from '../deploy/read-back.js';

const SECTOR = 512;

/** [start, end) byte ranges grub-bios-setup may change, relative to the start of each image. */
const BOOT_SECTOR_PATCHED: readonly (readonly [number, number])[] = [
  [0x03, 0x5a], // the BPB, copied from the disk (boot.h GRUB_BOOT_MACHINE_BPB_START..END)
  [0x5c, 0x64], // KERNEL_SECTOR: where core.img starts
  [0x64, 0x65], // BOOT_DRIVE
  [0x66, 0x68], // DRIVE_CHECK
  [0x1b8, SECTOR], // the Windows NT magic, the partition table and the signature: the disk's
];
const CORE_PATCHED: readonly (readonly [number, number])[] = [
  [SECTOR - 12, SECTOR - 2], // diskboot's blocklist: start (8 bytes) and length (2)
  [SECTOR + 0x10, SECTOR + 0x14], // REED_SOLOMON_REDUNDANCY in the decompressor's header
];

/** The first byte where `got` differs from `want` outside `patched`, or undefined when none does. */
export function firstUnpatchedDifference(want: Uint8Array, got: Uint8Array, patched: readonly (readonly [number, number])[]): number | undefined {
  for (let i = 0; i < want.length; i++) {
    if (i >= got.length) return i;
    if (want[i] !== got[i] && !patched.some(([a, b]) => i >= a && i < b)) return i;
  }
  return undefined;
}

/** What the disk's boot sector and embedded core.img say, judged against grub-install's files. */
export function judgeBiosBoot(files: { bootImg: Uint8Array; coreImg: Uint8Array }, disk: { bootSector: Uint8Array; coreSector: number; core: Uint8Array }): string | undefined {
  const boot = firstUnpatchedDifference(files.bootImg.subarray(0, SECTOR), disk.bootSector, BOOT_SECTOR_PATCHED);
  if (boot !== undefined) return `the boot sector differs from grub's boot.img at byte ${boot}`;
  if (disk.coreSector < 1) return `the boot sector points at sector ${disk.coreSector} for core.img`;
  const core = firstUnpatchedDifference(files.coreImg, disk.core, CORE_PATCHED);
  if (core !== undefined) return `core.img differs from grub's at byte ${core} (disk byte ${disk.coreSector * SECTOR + core})`;
  const blocklistStart = Number(Buffer.from(disk.core).readBigUInt64LE(SECTOR - 12));
  if (blocklistStart !== disk.coreSector + 1) return `core.img's blocklist starts at sector ${blocklistStart}, not at ${disk.coreSector + 1} after its first sector`;
  return undefined;
}

/** Reads `length` bytes at `offset` of a device with O_DIRECT (aligned reads, trimmed). */
async function readDirect(device: string, offset: number, length: number): Promise<Buffer> {
  const start = Math.floor(offset / DIRECT_IO_ALIGN) * DIRECT_IO_ALIGN;
  const span = Math.ceil((offset + length - start) / DIRECT_IO_ALIGN) * DIRECT_IO_ALIGN;
  const buf = alignedSharedBuffer(span);
  const fh = await open(device, constants.O_RDONLY | constants.O_DIRECT);
  try {
    let done = 0;
    while (done < span) {
      const { bytesRead } = await fh.read(buf, done, span - done, start + done);
      if (bytesRead === 0) break;
      done += bytesRead;
    }
    return Buffer.from(buf.subarray(offset - start, Math.min(done, offset - start + length)));
  } finally {
    await fh.close();
  }
}

/** Reads back what grub-install wrote to `device` for BIOS boot; throws ReadBackMismatch naming what differs. */
export async function verifyBiosCore(device: string, bootDir: string): Promise<void> {
  const dir = path.join(bootDir, 'grub', 'i386-pc');
  const [bootImg, coreImg] = await Promise.all([readFile(path.join(dir, 'boot.img')), readFile(path.join(dir, 'core.img'))]);
  const bootSector = await readDirect(device, 0, SECTOR);
  const coreSector = Number(bootSector.readBigUInt64LE(0x5c));
  const core = coreSector >= 1 ? await readDirect(device, coreSector * SECTOR, coreImg.length) : Buffer.alloc(0);
  const problem = judgeBiosBoot({ bootImg, coreImg }, { bootSector, coreSector, core });
  if (problem) throw new ReadBackMismatch(`grub's BIOS boot code read back from ${device}: ${problem}; the disk did not store what grub-install wrote`, 'core.img', undefined);
}
