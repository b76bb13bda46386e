/**
 * The kernel's own word on a failed write: `I/O error, dev loop3, sector 2048 op 0x1:(WRITE)` (the
 * block layer's message). Tools and filesystems report an I/O error without a place (mkfs "can't
 * write", wipefs nothing at all, ext4 a later EROFS); the kernel log names the device and the
 * sector, so the install's error quotes its first line about the install's disks.
 */
import path from 'node:path';
import { run } from '../../lib/exec.js';

export interface KernelIoError {
  /** The kernel's line, as printed. */
  line: string;
  device: string;
  /** Byte offset on that device (sector × 512: the block layer counts 512-byte sectors). */
  offset: number;
  op: string;
  /** Seconds since boot (dmesg's timestamp). */
  at: number;
}

const IO_ERROR = /^\[\s*(\d+\.\d+)\]\s+(?:blk_update_request: )?(?:critical )?(?:I\/O|medium|target|space allocation) error, dev (\S+?),? sector (\d+)(?: op \S+:\((\w+)\))?.*$/;

/** The block-layer I/O errors in `dmesg` output about these disks (or their partitions), in order. */
export function parseKernelIoErrors(dmesg: string, disks: readonly string[]): KernelIoError[] {
  const names = disks.map((d) => path.basename(d));
  const out: KernelIoError[] = [];
  for (const line of dmesg.split('\n')) {
    const m = IO_ERROR.exec(line.trim());
    if (!m) continue;
    const dev = m[2]!;
    if (!names.some((n) => dev === n || dev.startsWith(n))) continue;
    out.push({ line: line.replace(/^\[\s*[\d.]+\]\s*/, '').trim(), device: `/dev/${dev}`, offset: Number(m[3]) * 512, op: m[4] ?? 'I/O', at: Number(m[1]) });
  }
  return out;
}

/** Seconds since boot now (dmesg's clock), to ask later for what came after. */
export async function kernelClock(): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  return Number((await readFile('/proc/uptime', 'utf8')).split(' ')[0]);
}

/** The first I/O error the kernel logged about these disks since `since` (seconds since boot), if it can be read. */
export async function firstKernelIoError(disks: readonly string[], since: number): Promise<KernelIoError | undefined> {
  const r = await run('dmesg', [], { allowFailure: true, timeoutMs: 30_000 }).catch(() => undefined);
  if (!r || r.exitCode !== 0) return undefined;
  return parseKernelIoErrors(r.stdout, disks).find((e) => e.at >= since);
}

/** "write error at byte N of /dev/X (kernel: …)" */
export function describeKernelIoError(e: KernelIoError): string {
  return `${e.op.toLowerCase()} error at byte ${e.offset} of ${e.device} (kernel: ${e.line})`;
}
