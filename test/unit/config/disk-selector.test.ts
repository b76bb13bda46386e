// Disk selectors as an operator writes them: the keys in every spelling, the command line, and each
// bad rule with its message; then the criteria, sizes and tie-breaks on plain disks.
import { describe, expect, it } from 'vitest';
import { applyTieBreak, parseDiskSize, selectorMisses, withResolvedDisks, type SelectorSubject } from '../../../config/disk-selector.js';
import { toHarvesterConfigYaml } from '../../../config/serialise.js';
import { check, CREATE } from './helpers.js';

const withSelector = (sel: string) => CREATE.replace('  device: /dev/sda\n', sel);

describe('install.device_selector in a config', () => {
  it('stands in for install.device, in snake_case and camelCase, coerced like any key', async () => {
    const r = await check(withSelector('  device_selector:\n    min_size: 500GB\n    maxSize: 600GB\n    transport: nvme\n    rotational: "false"\n    tie_break: largest\n'));
    expect(r.errors).toEqual([]);
    expect(r.config.install?.deviceSelector).toEqual({ minSize: '500GB', maxSize: '600GB', transport: 'nvme', rotational: false, tieBreak: 'largest' });
    expect(r.config.install?.device).toBeUndefined();
  });

  it('is read from the kernel command line', async () => {
    const r = await check(CREATE.replace('  device: /dev/sda\n', ''), { cmdline: 'harvester.install.device_selector.model=SAMSUNG* harvester.install.device_selector.min_size=400Gi' });
    expect(r.errors).toEqual([]);
    expect(r.config.install?.deviceSelector).toEqual({ model: 'SAMSUNG*', minSize: '400Gi' });
  });

  it('refuses a selector beside the path it stands in for, naming both', async () => {
    const r = await check(CREATE.replace('  device: /dev/sda\n', '  device: /dev/sda\n  device_selector: {transport: nvme}\n'));
    expect(r.errors).toEqual([expect.objectContaining({ at: 'config.yaml:10:20', message: 'install.device and install.device_selector both name the install disk' })]);
  });

  it('refuses sizes that are not sizes, out of order, unknown transports and tie-breaks', async () => {
    const r = await check(withSelector('  device_selector:\n    min_size: 500G\n    transport: fibre\n    tie_break: newest\n'));
    expect(r.errors.map((e) => [e.at, e.message])).toEqual([
      ['config.yaml:10:15', '500G is not a size: write a number with a unit, 500GB (10^9 bytes, as disks are sold) or 465Gi (2^30 bytes); a plain number is bytes'],
      ['config.yaml:11:16', 'unknown transport fibre'],
      ['config.yaml:12:16', 'unknown tie_break newest'],
    ]);
    const order = await check(withSelector('  device_selector: {min_size: 1TB, max_size: 500GB}\n'));
    expect(order.errors.map((e) => e.message)).toEqual(['min_size 1TB is above max_size 500GB: no disk can match']);
  });

  it('an empty rule is no rule (Go zero values are dropped); a tie-break alone is one', async () => {
    const empty = await check(withSelector('  device_selector: {model: ""}\n'));
    expect(empty.errors.map((e) => e.message)).toEqual(['no device specified']);
    const tie = await check(withSelector('  device_selector: {tie_break: largest}\n'));
    expect(tie.errors).toEqual([]);
  });

  it('needs no device when a selector is given, and still says "no device specified" without either', async () => {
    const none = await check(CREATE.replace('  device: /dev/sda\n', ''));
    expect(none.errors.map((e) => e.message)).toEqual(['no device specified']);
  });

  it('data_disk_selector beside data_disk is refused; persistent_partition_size with it is a warning', async () => {
    const r = await check(CREATE + '  data_disk: /dev/sdb\n  data_disk_selector: {transport: sata}\n  persistent_partition_size: 200Gi\n');
    expect(r.errors.map((e) => e.message)).toEqual(['install.data_disk and install.data_disk_selector both name the data disk']);
    expect(r.warnings.map((w) => w.message)).toContain('persistent_partition_size is used only when the data partition shares the installation disk');
  });
});

describe('/oem/harvester.config after resolution', () => {
  it('records the plain path and no selector', async () => {
    const r = await check(withSelector('  device_selector: {transport: nvme}\n  data_disk_selector: {transport: sata}\n'));
    const resolved = withResolvedDisks(r.config, { device: '/dev/disk/by-id/nvme-X', dataDisk: '/dev/sdb' });
    const yaml = toHarvesterConfigYaml(resolved);
    expect(yaml).toMatch(/^ {4}device: \/dev\/disk\/by-id\/nvme-X$/m);
    expect(yaml).toMatch(/^ {4}datadisk: \/dev\/sdb$/m);
    expect(yaml).not.toMatch(/selector/);
  });
});

describe('sizes', () => {
  it.each([
    ['500GB', 500e9],
    ['1.92TB', 1.92e12],
    ['465Gi', 465 * 2 ** 30],
    ['465GiB', 465 * 2 ** 30],
    ['512', 512],
    ['10MB', 10e6],
  ])('%s is %d bytes', (text, bytes) => expect(parseDiskSize(text)).toBe(bytes));
  it.each(['500G', '500GBB', '5 00GB', '-1GB', 'GB', '1.GB', '500gb'])('%s is refused', (text) => expect(parseDiskSize(text)).toBeUndefined());
});

const disk = (path: string, sizeBytes: number, more: Partial<SelectorSubject> = {}): SelectorSubject => ({ path, sizeBytes, transport: 'sata', rotational: false, byPath: [], ...more });

describe('criteria', () => {
  const d = disk('/dev/sda', 960e9, { model: 'SAMSUNG MZ7LH960HAJR', vendor: 'ATA     ', serial: 'S45NNA0M', byPath: ['pci-0000:3b:00.0-scsi-0:2:0:0'] });

  it('a disk meeting every criterion has no misses', () => {
    expect(selectorMisses({ minSize: '900GB', maxSize: '1TB', model: 'samsung mz7*', vendor: 'ATA', serial: 's45nna0m', transport: 'sata', rotational: false, byPathPrefix: '/dev/disk/by-path/pci-0000:3b:00.0-scsi-0:2:' }, d)).toEqual([]);
  });

  it('names each criterion it misses', () => {
    expect(selectorMisses({ minSize: '1TB', model: 'INTEL*', vendor: 'DELL', serial: 'X1', transport: 'nvme', rotational: true, byPathPrefix: 'pci-0000:5e' }, d)).toEqual([
      '960 GB is below min_size 1TB',
      'model "SAMSUNG MZ7LH960HAJR" is not INTEL*',
      'vendor "ATA" is not DELL',
      'serial "S45NNA0M" is not X1',
      'transport sata, not nvme',
      'flash, not rotational',
      'by-path pci-0000:3b:00.0-scsi-0:2:0:0 does not start with pci-0000:5e',
    ]);
    expect(selectorMisses({ maxSize: '500GB' }, d)).toEqual(['960 GB is above max_size 500GB']);
    expect(selectorMisses({ model: 'X?' }, disk('/dev/sdb', 1))).toEqual(['model unknown (wanted X?)']);
    expect(selectorMisses({ byPathPrefix: 'pci' }, disk('/dev/sdb', 1))).toEqual(['no by-path name (wanted pci…)']);
  });

  it('a glob is anchored, and its other characters are literal', () => {
    expect(selectorMisses({ model: 'SAMSUNG' }, d)).toHaveLength(1);
    expect(selectorMisses({ model: 'SAMSUNG.MZ7*' }, d)).toHaveLength(1);
    expect(selectorMisses({ model: '*960HAJ?' }, d)).toEqual([]);
  });
});

describe('tie-breaks', () => {
  const a = disk('/dev/sda', 480e9, { byPath: ['pci-0000:3b:00.0-scsi-0:2:1:0'] });
  const b = disk('/dev/sdb', 960e9, { byPath: ['pci-0000:3b:00.0-scsi-0:2:0:0'] });
  const twin = disk('/dev/sdc', 960e9, { byPath: ['pci-0000:3b:00.0-scsi-0:2:2:0'] });

  it('one match needs none', () => expect(applyTieBreak(undefined, [a]).chosen).toBe(a));
  it('several without a tie-break are all level', () => expect(applyTieBreak(undefined, [a, b])).toEqual({ setAside: [], level: [a, b] }));
  it('smallest and largest', () => {
    expect(applyTieBreak('smallest', [b, a])).toEqual({ chosen: a, setAside: [{ disk: b, why: 'tie-break smallest: 960 GB vs 480 GB' }], level: [] });
    expect(applyTieBreak('largest', [a, b]).chosen).toBe(b);
  });
  it('two identical disks stay level under largest, and first_by_path decides them', () => {
    expect(applyTieBreak('largest', [a, b, twin])).toEqual({ setAside: [{ disk: a, why: 'tie-break largest: 480 GB vs 960 GB' }], level: [b, twin] });
    expect(applyTieBreak('first_by_path', [twin, a, b]).chosen).toBe(b);
  });
  it('disks without a by-path name cannot be ordered by it', () => {
    const x = disk('/dev/sdx', 1);
    const y = disk('/dev/sdy', 1);
    expect(applyTieBreak('first_by_path', [x, y]).level).toEqual([x, y]);
    expect(applyTieBreak('first_by_path', [x, a]).chosen).toBe(a);
  });
});

describe('merging a rule and a path', () => {
  it('a path on the command line replaces the file’s rule, and a rule replaces the file’s path', async () => {
    const ruleInFile = await check(withSelector('  device_selector: {transport: nvme}\n'), { cmdline: 'harvester.install.device=/dev/sdb' });
    expect(ruleInFile.errors).toEqual([]);
    expect(ruleInFile.config.install).toMatchObject({ device: '/dev/sdb' });
    expect(ruleInFile.config.install?.deviceSelector).toBeUndefined();
    const pathInFile = await check(CREATE, { cmdline: 'harvester.install.device_selector.transport=nvme' });
    expect(pathInFile.errors).toEqual([]);
    expect(pathInFile.config.install?.device).toBeUndefined();
    expect(pathInFile.config.install?.deviceSelector).toEqual({ transport: 'nvme' });
  });

  it('both in one source is still refused', async () => {
    const r = await check(CREATE, { cmdline: 'harvester.install.device=/dev/sdb harvester.install.device_selector.transport=nvme' });
    expect(r.errors.map((e) => e.message)).toEqual(['install.device and install.device_selector both name the install disk']);
  });
});
