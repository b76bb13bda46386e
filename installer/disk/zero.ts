/**
 * Zeros over a device's first and last MiB, checked: where a disk keeps its partition tables (the
 * protective MBR, both GPT headers and their entry arrays, on 512-byte and 4Kn sectors alike). Tools
 * report success over failed writes, so the zeros are written with O_DIRECT|O_SYNC, fsynced, and
 * read back from the disk.
 */
import { constants, open } from 'node:fs/promises';
import { describeError } from '../../lib/errors.js';
import { alignedSharedBuffer } from '../deploy/aligned-buffer.js';

const MiB = 1024 * 1024;

/** Byte offsets of the first and the last MiB (only the first on a device of a MiB or less). */
export function diskEnds(sizeBytes: number): number[] {
  return sizeBytes > MiB ? [0, sizeBytes - MiB] : [0];
}

/** Writes and reads back zeros over both ends of the device; what went wrong, or nothing. */
export async function zeroEnds(device: string, sizeBytes: number): Promise<string[]> {
  const problems: string[] = [];
  const ends = diskEnds(sizeBytes);
  const zeros = alignedSharedBuffer(MiB);
  try {
    const fh = await open(device, constants.O_RDWR | constants.O_DIRECT | constants.O_SYNC);
    try {
      for (const at of ends) {
        zeros.fill(0);
        await fh.write(zeros, 0, MiB, at).catch((e: unknown) => problems.push(`writing zeros at byte ${at}: ${describeError(e)}`));
      }
      await fh.sync().catch((e: unknown) => problems.push(`fsync: ${describeError(e)}`));
      for (const at of ends) {
        const { bytesRead } = await fh.read(zeros, 0, MiB, at);
        const bad = zeros.subarray(0, bytesRead).findIndex((b) => b !== 0);
        if (bytesRead < Math.min(MiB, sizeBytes)) problems.push(`read back ${bytesRead} of ${MiB} bytes at byte ${at}`);
        else if (bad >= 0) problems.push(`byte ${at + bad} still holds data when read back`);
      }
    } finally {
      await fh.close();
    }
  } catch (e) {
    problems.push(describeError(e));
  }
  return problems;
}
