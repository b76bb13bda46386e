import { describe, expect, it } from 'vitest';
import { judgeLonghornDisk, parseDumpe2fs, parseMountInfo, type LonghornDiskFacts } from '../../../agent/longhorn/disk.js';

const base: LonghornDiskFacts = { label: 'HARV_LH_DEFAULT', mountPoint: '/var/lib/harvester/defaultdisk', devices: ['/dev/sdb'], fsType: 'ext4', fsState: 'clean', deviceMajorMinor: '8:16' };
const mounted = { majorMinor: '8:16', mountPoint: '/var/lib/harvester/defaultdisk', fsType: 'ext4', source: '/dev/sdb', options: ['rw', 'relatime'] };

describe('judgeLonghornDisk', () => {
  it('mounts a healthy unmounted disk and is ok once mounted', () => {
    expect(judgeLonghornDisk(base)).toEqual({ action: 'mount', device: '/dev/sdb' });
    expect(judgeLonghornDisk({ ...base, mounted, capacity: { totalBytes: 2 ** 40, freeBytes: 2 ** 39 } })).toEqual({
      action: 'ok',
      detail: '/dev/sdb (HARV_LH_DEFAULT, ext4 clean) on /var/lib/harvester/defaultdisk, 1024.0 GiB, 512.0 GiB free',
    });
  });
  it('a mounted ext4 may read "not clean" (journal in use) and still be fine', () => {
    expect(judgeLonghornDisk({ ...base, fsState: 'not clean', mounted }).action).toBe('ok');
    expect(judgeLonghornDisk({ ...base, fsState: 'not clean' })).toMatchObject({ action: 'fail', diagnosis: 'ext4 on /dev/sdb (HARV_LH_DEFAULT) is not healthy: state "not clean"' });
  });
  it('retries while no device has the label, fails on two', () => {
    expect(judgeLonghornDisk({ ...base, devices: [] })).toMatchObject({ action: 'retry' });
    expect(judgeLonghornDisk({ ...base, devices: ['/dev/sdb', '/dev/sdc1'] })).toMatchObject({ action: 'fail', diagnosis: '2 devices labelled HARV_LH_DEFAULT: /dev/sdb, /dev/sdc1; the Longhorn default disk must be exactly one' });
  });
  it('fails on errors, the wrong filesystem, a foreign mount and a read-only mount', () => {
    expect(judgeLonghornDisk({ ...base, fsErrorCount: 3, mounted })).toMatchObject({ action: 'fail', diagnosis: 'ext4 on /dev/sdb (HARV_LH_DEFAULT) is not healthy: state "clean", 3 errors recorded' });
    expect(judgeLonghornDisk({ ...base, fsType: undefined })).toMatchObject({ diagnosis: '/dev/sdb (HARV_LH_DEFAULT) is not a recognised filesystem, not ext4' });
    expect(judgeLonghornDisk({ ...base, mounted: { ...mounted, majorMinor: '0:55', source: 'tmpfs', fsType: 'tmpfs' } })).toMatchObject({ diagnosis: '/var/lib/harvester/defaultdisk has tmpfs (tmpfs) mounted, not /dev/sdb (HARV_LH_DEFAULT)' });
    expect(judgeLonghornDisk({ ...base, mounted: { ...mounted, options: ['ro'] } })).toMatchObject({ diagnosis: expect.stringMatching(/mounted read-only/) });
  });
});

describe('parsers', () => {
  it('parses mountinfo with escaped paths', () => {
    expect(parseMountInfo('43 27 7:0 / /tmp/a\\040b rw,relatime shared:1 - ext4 /dev/loop0 rw\n')).toEqual([{ majorMinor: '7:0', mountPoint: '/tmp/a b', options: ['rw', 'relatime'], fsType: 'ext4', source: '/dev/loop0' }]);
  });
  it('parses dumpe2fs state and error count', () => {
    expect(parseDumpe2fs('Filesystem state:         clean with errors\nFS Error count:           2\n')).toEqual({ state: 'clean with errors', errorCount: 2 });
    expect(parseDumpe2fs('Filesystem state:         clean\n')).toEqual({ state: 'clean', errorCount: undefined });
  });
});
