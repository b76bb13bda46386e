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
  /** Byte offset on that device (sector × 512: the block layer counts 512-byte sectors); undefined when the line names none. */
  offset?: number;
  op: string;
  /** Seconds since boot (dmesg's timestamp). */
  at: number;
}

const STAMP = /^\[\s*(\d+\.\d+)\]\s+(.*)$/;
/** The block layer's own line, with the sector. */
const BLOCK_LAYER = /^(?:blk_update_request: )?(?:critical )?(?:I\/O|medium|target|space allocation) error, dev (\S+?),? sector (\d+)(?: op \S+:\((\w+)\))?/;
/** A filesystem's or the buffer cache's line about an I/O error on a device (no offset in bytes). */
const FS_DEVICE = /(?:on dev(?:ice)? |\(device |for |EXT4-fs \()([a-z]\w*?)(?:-\d+)?[,):.\s]/;

/**
 * The I/O errors in `dmesg` output about these disks (or their partitions), in order. The block
 * layer's lines carry the sector; the kernel rate-limits them, so the filesystems' and the buffer
 * cache's lines (`Buffer I/O error on dev sda4`, `JBD2: I/O error … for sda4-8`) count too.
 */
export function parseKernelIoErrors(dmesg: string, disks: readonly string[]): KernelIoError[] {
  const names = disks.map((d) => path.basename(d));
  const ours = (dev: string): boolean => names.some((n) => dev === n || isPartitionOf(dev, n));
  const out: KernelIoError[] = [];
  for (const raw of dmesg.split('\n')) {
    const stamped = STAMP.exec(raw.trim());
    if (!stamped) continue;
    const [at, line] = [Number(stamped[1]), stamped[2]!.trim()];
    const b = BLOCK_LAYER.exec(line);
    if (b && ours(b[1]!)) {
      out.push({ line, device: `/dev/${b[1]}`, offset: Number(b[2]) * 512, op: b[3] ?? 'I/O', at });
      continue;
    }
    const f = b || !line.includes('I/O error') ? undefined : FS_DEVICE.exec(line);
    if (f && ours(f[1]!)) out.push({ line, device: `/dev/${f[1]}`, op: /writ/i.test(line) ? 'WRITE' : /read/i.test(line) ? 'READ' : 'I/O', at });
  }
  return out;
}

/** sda1 of sda, loop1p4 of loop1 (kernel naming: a `p` after a name ending in a digit); not loop12 of loop1. */
function isPartitionOf(dev: string, disk: string): boolean {
  const rest = dev.startsWith(disk) ? dev.slice(disk.length) : undefined;
  if (rest === undefined) return false;
  return /\d$/.test(disk) ? /^p\d+$/.test(rest) : /^\d+$/.test(rest);
}

/** Seconds since boot now (dmesg's clock), to ask later for what came after. */
export async function kernelClock(): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  return Number((await readFile('/proc/uptime', 'utf8')).split(' ')[0]);
}

/** The I/O error reporters' rate-limit notices (`blk_print_req_error: 25 callbacks suppressed`) since `since`. */
export function parseSuppressedIoReports(dmesg: string, since: number): string[] {
  const out: string[] = [];
  for (const raw of dmesg.split('\n')) {
    const stamped = STAMP.exec(raw.trim());
    if (stamped && Number(stamped[1]) >= since && SUPPRESSED.test(stamped[2]!)) out.push(stamped[2]!.trim());
  }
  return out;
}

const SUPPRESSED = /^(?:blk_print_req_error|print_req_error|buffer_io_error|blk_update_request): \d+ callbacks suppressed/;

/** What the kernel said about I/O errors on these disks since `since`: the first error, or why there is none. */
export type KernelIoReport = { error: KernelIoError; suppressed: string[] } | { error?: undefined; suppressed: string[] };

/** The last timestamp in `dmesg` output (seconds since boot), or undefined when no line has one. Pure. */
export function lastKernelStamp(dmesg: string): number | undefined {
  const lines = dmesg.trimEnd().split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const stamped = STAMP.exec(lines[i]!.trim());
    if (stamped) return Number(stamped[1]);
  }
  return undefined;
}

/** One read of the kernel log: what it said about the disks (undefined: nothing), and the last timestamp it held. */
export interface KernelLogRead {
  report?: KernelIoReport;
  /** The newest line's timestamp: lines logged after the read have later ones. */
  readTo?: number;
}

/**
 * The first I/O error the kernel logged about these disks since `since` (seconds since boot): the
 * block layer's (which has the byte) when there is one, else the first other. The kernel
 * rate-limits those lines across all devices (ten per five seconds); when it dropped some and none
 * about our disks is left, or none with the byte, the report carries the kernel's notices.
 * Undefined when the log cannot be read.
 */
export async function firstKernelIoError(disks: readonly string[], since: number): Promise<KernelLogRead | undefined> {
  const r = await run('dmesg', [], { allowFailure: true, timeoutMs: 30_000 }).catch(() => undefined);
  if (!r || r.exitCode !== 0) return undefined;
  const errors = parseKernelIoErrors(r.stdout, disks).filter((e) => e.at >= since);
  const first = errors.find((e) => e.offset !== undefined) ?? errors[0];
  const suppressed = parseSuppressedIoReports(r.stdout, since);
  const readTo = lastKernelStamp(r.stdout);
  if (first) return { report: { error: first, suppressed }, readTo };
  return { report: suppressed.length ? { suppressed } : undefined, readTo };
}

/** "write error at byte N of /dev/X (kernel: …)", or "write error on /dev/X (kernel: …)" without a byte. */
export function describeKernelIoError(e: KernelIoError): string {
  const op = e.op === 'I/O' ? 'I/O' : e.op.toLowerCase();
  return `${op} error ${e.offset === undefined ? 'on' : `at byte ${e.offset} of`} ${e.device} (kernel: ${e.line})`;
}

/**
 * What the install's error adds from the kernel's log: the first I/O error on its disks, with the
 * byte when the block layer logged one; nothing when the error already quotes that line. Without a
 * byte it says why: the kernel's notices of dropped lines, or, before any notice (the kernel prints
 * one only with its next line after the limit), that the kernel logged no line with the sector.
 */
export function kernelIoNote(report: KernelIoReport | undefined, disks: readonly string[], errorMessage: string): string {
  if (!report) return '';
  if (!report.error) {
    return `\nthe kernel logged no I/O error line about ${disks.join(', ')} in this run: it rate-limited them (${report.suppressed.join('; ')}); dmesg around the failure may still show the device`;
  }
  if (errorMessage.includes(report.error.line)) return '';
  const noByte =
    report.error.offset !== undefined
      ? ''
      : report.suppressed.length
        ? ` (no byte: the kernel rate-limited its lines with the sector: ${report.suppressed.join('; ')})`
        : ` (no byte: the kernel logged no line with the sector about ${disks.join(', ')} in this run; it rate-limits those lines across all disks)`;
  return `\nthe first I/O error of this run: ${describeKernelIoError(report.error)}${noByte}`;
}
