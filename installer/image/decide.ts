/**
 * `hvinstall image`'s decisions, pure: the output format from --out's name, the image size from
 * --size against Harvester's install-disk minimum (config/disk-sizes.ts), the scratch names
 * next to --out, and which config keys cannot apply to a one-disk image.
 */
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import type { HarvesterConfig } from '../../config/types.js';
import { GiB, installDiskMinGiB, wholeGiB } from '../../config/disk-sizes.js';

export type ImageFormat = 'qcow2' | 'raw';

export function imageFormatOf(out: string): ImageFormat {
  const ext = path.extname(out).toLowerCase();
  if (ext === '.qcow2') return 'qcow2';
  if (ext === '.raw' || ext === '.img') return 'raw';
  throw new HvError(`--out ${out}: name the image NAME.qcow2 or NAME.raw (the extension picks the format)`, { exitCode: ExitCode.usage });
}

const UNITS: Record<string, number> = { '': 1, K: 1024, M: 1024 ** 2, G: GiB, T: 1024 * GiB };

/** --size: bytes, or a number with K/M/G/T (binary; KiB, MiB, GiB, TiB and Harvester's Mi/Gi accepted). */
export function parseImageSize(v: string): number {
  const m = /^(\d+)\s*([KMGT]?)(?:i?B|i)?$/i.exec(v.trim());
  if (!m) throw new HvError(`--size ${v}: give bytes or a whole number with K, M, G or T (for example 260G)`, { exitCode: ExitCode.usage });
  return Number(m[1]) * UNITS[m[2]!.toUpperCase()]!;
}

/**
 * The image's size in bytes: --size, or Harvester's minimum for the config's role. Below the
 * minimum is refused here with the minimum named, before any file is made.
 */
export function imageSizeBytes(config: HarvesterConfig, size: string | undefined): number {
  const minGiB = installDiskMinGiB({ separateDataDisk: false, witness: config.install?.role === 'witness' });
  if (size === undefined) return minGiB * GiB;
  const bytes = parseImageSize(size);
  if (wholeGiB(bytes) < minGiB) {
    throw new HvError(`--size ${size} is below Harvester's minimum install disk of ${minGiB} GiB${config.install?.role === 'witness' ? ' for the witness role' : ''}`, {
      hint: `give --size ${minGiB}G or more (the image file is sparse: its size costs no space until written)`,
      exitCode: ExitCode.usage,
    });
  }
  return bytes;
}

/** Config keys that name other disks: an image is one disk. */
export function oneDiskProblems(config: HarvesterConfig): string[] {
  const problems: string[] = [];
  if (config.install?.dataDisk) problems.push(`install.data_disk (${config.install.dataDisk}): an image is a single disk; leave data_disk out`);
  if (config.install?.dataDiskSelector) problems.push('install.data_disk_selector: an image is a single disk; leave data_disk_selector out');
  if (config.install?.wipeDisksList?.length) problems.push('install.wipe_disks_list: an image is a single disk; there is nothing else to wipe');
  return problems;
}

/** The scratch files beside --out (same filesystem, so the final rename is atomic). */
export function scratchPaths(out: string): { work: string; partial: string } {
  const dir = path.dirname(out);
  const base = path.basename(out);
  return { work: path.join(dir, `.${base}.hvinstall-work.raw`), partial: path.join(dir, `.${base}.hvinstall-partial`) };
}

/** qemu-img's arguments: raw in, the chosen format out; zeroed areas are left unallocated. */
export function convertArgs(work: string, partial: string, format: ImageFormat): string[] {
  return ['convert', '-f', 'raw', '-O', format, ...(format === 'raw' ? ['-S', '4k'] : []), work, partial];
}
