import { describe, expect, it } from 'vitest';
import { describeKernelIoError, kernelIoNote, lastKernelStamp, parseKernelIoErrors, parseSuppressedIoReports } from '../../../installer/disk/kernel-errors.js';

const DMESG = `[  865.064684] EXT4-fs (loop6p2): mounted filesystem fd3c212b r/w with ordered data mode.
[  895.545612] I/O error, dev loop1, sector 2048 op 0x1:(WRITE) flags 0xc800 phys_seg 128 prio class 2
[ 2881.687350] operation not supported error, dev loop1, sector 48469888 op 0x9:(WRITE_ZEROES) flags 0x20000800 phys_seg 0 prio class 2
[ 2900.000001] I/O error, dev loop12, sector 8 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2
[ 2901.100000] blk_update_request: I/O error, dev sda, sector 123 op 0x1:(WRITE) flags 0x0 phys_seg 1 prio class 0
[ 2902.000000] Buffer I/O error on dev loop1p4, logical block 0, lost async page write
`;

describe('parseKernelIoErrors', () => {
  it("keeps the block layer's I/O errors of the given disks, with the byte offset (512-byte sectors)", () => {
    const got = parseKernelIoErrors(DMESG, ['/dev/loop1']);
    expect(got[0]).toEqual({ line: 'I/O error, dev loop1, sector 2048 op 0x1:(WRITE) flags 0xc800 phys_seg 128 prio class 2', device: '/dev/loop1', offset: 1048576, op: 'WRITE', at: 895.545612 });
    // the buffer cache's line about a partition of it, after
    expect(got.slice(1)).toMatchObject([{ device: '/dev/loop1p4', op: 'WRITE' }]);
    expect(describeKernelIoError(got[0]!)).toBe('write error at byte 1048576 of /dev/loop1 (kernel: I/O error, dev loop1, sector 2048 op 0x1:(WRITE) flags 0xc800 phys_seg 128 prio class 2)');
  });
  it('another disk whose name starts alike is not ours unless it is a partition of it', () => {
    expect(parseKernelIoErrors(DMESG, ['/dev/loop1']).some((e) => e.device === '/dev/loop12')).toBe(false);
  });
  it('reads the older blk_update_request form', () => {
    expect(parseKernelIoErrors(DMESG, ['/dev/sda'])).toMatchObject([{ device: '/dev/sda', offset: 123 * 512, op: 'WRITE' }]);
  });
});

describe('when the block layer was rate-limited', () => {
  const FS = `[ 3704.876579] JBD2: I/O error when updating journal superblock for loop9p5-8.
[ 3704.891212] EXT4-fs (loop9p5): I/O error while writing superblock
[ 3705.000000] Buffer I/O error on dev loop9p5, logical block 0, lost async page write
[ 3705.100000] Buffer I/O error on dev loop19p5, logical block 0, lost async page write
`;
  it("the filesystems' and buffer cache's lines name the partition, without a byte", () => {
    const got = parseKernelIoErrors(FS, ['/dev/loop9']);
    expect(got.map((e) => e.device)).toEqual(['/dev/loop9p5', '/dev/loop9p5', '/dev/loop9p5']);
    expect(got[0]!.offset).toBeUndefined();
    expect(describeKernelIoError(got[1]!)).toBe('write error on /dev/loop9p5 (kernel: EXT4-fs (loop9p5): I/O error while writing superblock)');
  });
});

describe('parseSuppressedIoReports', () => {
  const LIMITED = `[21100.854461] buffer_io_error: 2 callbacks suppressed
[21101.107675] blk_print_req_error: 25 callbacks suppressed
[21106.000000] EXT4-fs unmount: 37 callbacks suppressed
[21107.476532] blk_print_req_error: 29 callbacks suppressed
`;
  it("keeps the I/O error reporters' notices at or after the run's start, not other subsystems'", () => {
    expect(parseSuppressedIoReports(LIMITED, 21101)).toEqual(['blk_print_req_error: 25 callbacks suppressed', 'blk_print_req_error: 29 callbacks suppressed']);
    expect(parseSuppressedIoReports(LIMITED, 0)[0]).toBe('buffer_io_error: 2 callbacks suppressed');
    expect(parseSuppressedIoReports(LIMITED, 21200)).toEqual([]);
  });
});

describe('kernelIoNote', () => {
  const block = { line: 'I/O error, dev loop1, sector 2048 op 0x1:(WRITE) flags 0x0', device: '/dev/loop1', offset: 1048576, op: 'WRITE', at: 1 };
  const buffer = { line: 'Buffer I/O error on dev loop1p4, logical block 7, async page read', device: '/dev/loop1p4', op: 'READ', at: 2 };
  it("quotes the block layer's line with its byte", () => {
    expect(kernelIoNote({ error: block, suppressed: [] }, ['/dev/loop1'], 'mkfs failed')).toBe(
      '\nthe first I/O error of this run: write error at byte 1048576 of /dev/loop1 (kernel: I/O error, dev loop1, sector 2048 op 0x1:(WRITE) flags 0x0)',
    );
  });
  it('adds nothing when the error already quotes the line, or when the kernel said nothing', () => {
    expect(kernelIoNote({ error: block, suppressed: [] }, ['/dev/loop1'], `failed (kernel: ${block.line})`)).toBe('');
    expect(kernelIoNote(undefined, ['/dev/loop1'], 'x')).toBe('');
  });
  it("without a byte, quotes the kernel's notices of dropped lines", () => {
    expect(kernelIoNote({ error: buffer, suppressed: ['blk_print_req_error: 25 callbacks suppressed'] }, ['/dev/loop1'], 'x')).toBe(
      '\nthe first I/O error of this run: read error on /dev/loop1p4 (kernel: Buffer I/O error on dev loop1p4, logical block 7, async page read) (no byte: the kernel rate-limited its lines with the sector: blk_print_req_error: 25 callbacks suppressed)',
    );
  });
  it('without a byte and before any notice, says the kernel logged no line with the sector about these disks', () => {
    expect(kernelIoNote({ error: buffer, suppressed: [] }, ['/dev/loop1', '/dev/loop2'], 'x')).toBe(
      '\nthe first I/O error of this run: read error on /dev/loop1p4 (kernel: Buffer I/O error on dev loop1p4, logical block 7, async page read) (no byte: the kernel logged no line with the sector about /dev/loop1, /dev/loop2 in this run; it rate-limits those lines across all disks)',
    );
  });
  it('with nothing about these disks left, names the notices', () => {
    expect(kernelIoNote({ suppressed: ['blk_print_req_error: 3 callbacks suppressed'] }, ['/dev/loop1'], 'x')).toBe(
      '\nthe kernel logged no I/O error line about /dev/loop1 in this run: it rate-limited them (blk_print_req_error: 3 callbacks suppressed); dmesg around the failure may still show the device',
    );
  });
});

describe('lastKernelStamp', () => {
  it("is the newest line's time, past unstamped continuation lines and the trailing newline", () => {
    const dmesg = '[   12.500000] loop1: detected capacity change\n[65198.557432] I/O error, dev loop355, sector 0 op 0x1:(WRITE) flags 0xc800\n  continuation without a stamp\n\n';
    expect(lastKernelStamp(dmesg)).toBe(65198.557432);
  });

  it('is undefined for a log with no stamped line', () => {
    expect(lastKernelStamp('')).toBeUndefined();
    expect(lastKernelStamp('dmesg: read kernel buffer failed: Operation not permitted\n')).toBeUndefined();
  });
});
