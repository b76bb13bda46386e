import { describe, expect, it } from 'vitest';
import { judgeBiosBoot } from '../../../installer/bootloader/bios-core-check.js';

/** Deterministic non-zero bytes, so any copy that moved or lost a byte differs. */
function bytes(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed * 7 + 1) % 251;
  return b;
}

/** What grub-bios-setup leaves on a GPT disk whose bios_grub partition starts at sector 2048 (measured with Debian 12's grub-install 2.06 on a loop device). */
function installed(coreSector = 2048) {
  const bootImg = bytes(512, 1);
  const coreImg = bytes(26936, 2);
  const bootSector = Buffer.from(bootImg);
  bootSector.writeBigUInt64LE(BigInt(coreSector), 0x5c);
  bootSector[0x64] = 0x80;
  bootSector.writeUInt16LE(0x9090, 0x66);
  bootSector.fill(0, 0x03, 0x5a); // the disk's BPB: zeros after sgdisk
  bootSector.fill(0xee, 0x1be, 0x1ce); // the protective MBR entry
  const core = Buffer.from(coreImg);
  core.writeBigUInt64LE(BigInt(coreSector + 1), 500);
  core.writeUInt16LE(52, 508);
  core.writeUInt32LE(0x1234, 512 + 0x10);
  return { files: { bootImg, coreImg }, disk: { bootSector, coreSector, core } };
}

describe('judgeBiosBoot', () => {
  it('accepts what grub-bios-setup wrote: its patched fields differ from the files, nothing else', () => {
    const { files, disk } = installed();
    expect(judgeBiosBoot(files, disk)).toBeUndefined();
  });

  it('names the core.img byte and the disk byte of a flip anywhere outside the patched fields', () => {
    for (const at of [0, 499, 510, 511, 512 + 0x0f, 512 + 0x14, 26935]) {
      const { files, disk } = installed();
      disk.core[at] = disk.core[at]! ^ 0x01;
      expect(judgeBiosBoot(files, disk), `byte ${at}`).toBe(`core.img differs from grub's at byte ${at} (disk byte ${2048 * 512 + at})`);
    }
  });

  it('finds a core.img that was cut short on the disk', () => {
    const { files, disk } = installed();
    expect(judgeBiosBoot(files, { ...disk, core: disk.core.subarray(0, 4096) })).toBe(`core.img differs from grub's at byte 4096 (disk byte ${2048 * 512 + 4096})`);
  });

  it("finds a flipped byte in the boot sector's code, not in its BPB or partition table", () => {
    for (const at of [0, 2, 0x5a, 0x65, 0x68, 0x1b7]) {
      const { files, disk } = installed();
      disk.bootSector[at] = disk.bootSector[at]! ^ 0x40;
      expect(judgeBiosBoot(files, disk), `byte ${at}`).toBe(`the boot sector differs from grub's boot.img at byte ${at}`);
    }
    const { files, disk } = installed();
    disk.bootSector[0x10] = 7;
    disk.bootSector[0x1c0] = 7;
    expect(judgeBiosBoot(files, disk)).toBeUndefined();
  });

  it('refuses a boot sector that does not point at core.img, and a blocklist that does not follow it', () => {
    const { files, disk } = installed();
    expect(judgeBiosBoot(files, { ...disk, coreSector: 0 })).toBe('the boot sector points at sector 0 for core.img');
    disk.core.writeBigUInt64LE(2048n, 500);
    expect(judgeBiosBoot(files, disk)).toBe("core.img's blocklist starts at sector 2048, not at 2049 after its first sector");
  });
});
