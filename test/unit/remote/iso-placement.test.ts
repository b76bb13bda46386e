/** Where the automatic install keeps the install ISO, and reading xorriso's listings of it. */
import { describe, expect, it } from 'vitest';
import { decideIsoPlacement, fileRanges, parseLsdl, parseMemAvailable, parseReportLba, partsProblem, RAM_HEADROOM_BYTES } from '../../../installer/remote/iso-placement.js';

const GiB = 1024 ** 3;

describe('decideIsoPlacement', () => {
  it('keeps an ISO that fits beside the headroom in RAM', () => {
    const p = decideIsoPlacement({ isoBytes: 5 * GiB, memAvailableBytes: 6 * GiB, acceptsRanges: true });
    expect(p).toEqual({ where: 'ram', why: 'the ISO (5.0 GiB) fits in the 6.0 GiB of free RAM' });
  });

  it('streams an ISO that fits in RAM only without the headroom', () => {
    const p = decideIsoPlacement({ isoBytes: 5 * GiB, memAvailableBytes: 5 * GiB + RAM_HEADROOM_BYTES - 1, acceptsRanges: true });
    expect(p.where).toBe('persistent');
    expect(p.why).toBe('the ISO (5.0 GiB) does not fit in the 6.0 GiB of free RAM (1.0 GiB kept for the installer): it is streamed to COS_PERSISTENT');
  });

  it('the boundary: exactly the ISO plus the headroom is RAM', () => {
    expect(decideIsoPlacement({ isoBytes: 5 * GiB, memAvailableBytes: 5 * GiB + RAM_HEADROOM_BYTES, acceptsRanges: true }).where).toBe('ram');
  });

  it('tries RAM when the server serves no ranges, saying it cannot stream', () => {
    const p = decideIsoPlacement({ isoBytes: 5 * GiB, memAvailableBytes: 2 * GiB, acceptsRanges: false });
    expect(p.where).toBe('ram');
    expect(p.why).toContain('the server does not serve byte ranges, so it cannot be streamed: trying RAM anyway');
  });

  it('an unknown size or free RAM is Harvester\'s RAM download', () => {
    expect(decideIsoPlacement({ memAvailableBytes: GiB, acceptsRanges: true })).toEqual({ where: 'ram', why: "the ISO's size (no Content-Length) is unknown: the ISO goes to RAM as in Harvester" });
    expect(decideIsoPlacement({ isoBytes: GiB, acceptsRanges: true })).toEqual({ where: 'ram', why: 'the free RAM (no MemAvailable) is unknown: the ISO goes to RAM as in Harvester' });
  });

  it('--iso-to-disk streams even what fits, unless the server serves no ranges', () => {
    expect(decideIsoPlacement({ isoBytes: GiB, memAvailableBytes: 64 * GiB, acceptsRanges: true, forced: true }).where).toBe('persistent');
    expect(decideIsoPlacement({ isoBytes: GiB, memAvailableBytes: 64 * GiB, acceptsRanges: false, forced: true }).where).toBe('ram');
  });
});

describe('partsProblem and parseMemAvailable', () => {
  it('refuses when even the root filesystem image does not fit', () => {
    expect(partsProblem(2 * GiB, 3 * GiB)).toBeUndefined();
    expect(partsProblem(2 * GiB, 3 * GiB - 1)).toMatch(/^even the ISO's root filesystem image \(2\.0 GiB\) does not fit in the 3\.0 GiB of free RAM/);
    expect(partsProblem(2 * GiB, undefined)).toBeUndefined();
  });

  it('reads MemAvailable in bytes', () => {
    expect(parseMemAvailable('MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    8000000 kB\n')).toBe(8_000_000 * 1024);
    expect(parseMemAvailable('MemTotal:       16000000 kB\n')).toBeUndefined();
  });
});

describe('parseReportLba and fileRanges', () => {
  const out = [
    'Report layout: xt , Startlba ,   Blocks , Filesize , ISO image path',
    "File data lba:  0 ,       33 ,        1 ,        3 , '/bundle/a/b/f'",
    "File data lba:  0 ,       34 ,        1 ,        2 , '/bundle/sp ace/it'\"'\"'s'",
    "File data lba:  0 ,      100 ,  2097151 , 5000000000 , '/big'",
    "File data lba:  1 ,  2097251 ,   344256 , 5000000000 , '/big'",
  ].join('\n');

  it('reads files, quoted names and a file split into extents', () => {
    const files = parseReportLba(out);
    expect(files.get('/bundle/a/b/f')).toEqual({ path: '/bundle/a/b/f', size: 3, extents: [{ lba: 33, blocks: 1 }] });
    expect(files.get("/bundle/sp ace/it's")?.size).toBe(2);
    expect(files.get('/big')?.size).toBe(5_000_000_000);
  });

  it('gives the byte ranges in file order, the last cut to the size', () => {
    const big = parseReportLba(out).get('/big')!;
    expect(fileRanges(big)).toEqual([
      { start: 100 * 2048, end: 100 * 2048 + 2097151 * 2048, fileOffset: 0 },
      { start: 2097251 * 2048, end: 2097251 * 2048 + (5_000_000_000 - 2097151 * 2048), fileOffset: 2097151 * 2048 },
    ]);
    expect(fileRanges(parseReportLba(out).get('/bundle/a/b/f')!)).toEqual([{ start: 33 * 2048, end: 33 * 2048 + 3, fileOffset: 0 }]);
  });
});

describe('parseLsdl', () => {
  it('reads kinds, modes (with the special bits) and symlink targets', () => {
    const text = [
      "drwxr-xr-x    1 0        0               0 Dec  1 13:10 '/bundle'",
      "dr-xr-xr-x    1 0        0               0 Dec  1 13:10 '/bundle/a/b'",
      "-rw-------    1 0        0               3 Dec  1 13:10 '/bundle/a/b/f'",
      "lrwxrwxrwx    1 0        0               0 Dec  1 13:10 '/bundle/a/l' -> 'b/f'",
      "-rwsr-sr-T    1 0        0               2 Dec  1 13:10 '/bundle/sp ace/it'\"'\"'s'",
      "crw-r--r--    1 0        0          1,   3 Dec  1 13:10 '/bundle/null'",
    ].join('\n');
    expect(parseLsdl(text)).toEqual([
      { path: '/bundle', kind: 'dir', mode: 0o755 },
      { path: '/bundle/a/b', kind: 'dir', mode: 0o555 },
      { path: '/bundle/a/b/f', kind: 'file', mode: 0o600 },
      { path: '/bundle/a/l', kind: 'symlink', mode: 0o777, target: 'b/f' },
      { path: "/bundle/sp ace/it's", kind: 'file', mode: 0o7754 },
    ]);
  });
});
