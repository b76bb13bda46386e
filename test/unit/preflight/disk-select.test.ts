// Disk rules on captured machines: raid-rack (two identical PERC logical drives, an NVMe, a SATA SSD
// and HDD, the live medium on a USB stick) and old-install (disks mounted, swapping, held by LVM).
// Each case pins the disk taken and the reason given for every other disk.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { chooseDisk, formatPreflightReport, runPreflightChecks, selectDisks, decideInstallGate, gateLines, type MachineFacts } from '../../../installer/preflight/index.js';
import { findDisk } from '../../../installer/disk/plan.js';
import { main } from '../../../installer/cli.js';
import type { DiskSelector, HarvesterConfig } from '../../../config/types.js';
import { check as checkConfig, CREATE } from '../config/helpers.js';
import { fixtureFacts } from './helpers.js';

let rack: MachineFacts;
let old: MachineFacts;
beforeAll(async () => {
  rack = await fixtureFacts('raid-rack');
  old = await fixtureFacts('old-install');
});

const verdicts = (sel: DiskSelector, facts = rack) => chooseDisk('device', sel, facts).candidates.map((c) => `${c.taken ? '*' : '-'} ${c.path}: ${c.why}`);

describe('the disk a rule takes, and why not the others', () => {
  it('gathers what a rule looks at: vendor, model, serial, transport, rotational, by-path', () => {
    const sda = rack.disks.find((d) => d.name === 'sda')!;
    expect(sda).toMatchObject({ vendor: 'DELL', model: 'PERC H755 Front', serial: '6f4ee0806aa7e9002a7b3c1c0e3a1b20', transport: 'scsi', rotational: true, sizeBytes: 959656755200 });
    expect(sda.links).toContain('/dev/disk/by-path/pci-0000:3b:00.0-scsi-0:2:0:0');
    expect(rack.disks.find((d) => d.name === 'sdc')).toMatchObject({ vendor: 'ATA', transport: 'sata', rotational: false });
    expect(rack.disks.find((d) => d.name === 'sde')).toMatchObject({ transport: 'usb', inUse: expect.objectContaining({ bootMedium: true }) });
  });

  it('transport nvme: the one NVMe, recorded by its by-id name', () => {
    const c = chooseDisk('device', { transport: 'nvme' }, rack);
    expect(c.path).toBe('/dev/nvme0n1');
    expect(c.recorded).toBe('/dev/disk/by-id/nvme-Dell_Ent_NVMe_CM6_RI_1.92TB_PHAB012300000');
    expect(verdicts({ transport: 'nvme' })).toEqual([
      '* /dev/nvme0n1: the only disk that matches',
      '- /dev/sda: transport scsi, not nvme',
      '- /dev/sdb: transport scsi, not nvme',
      '- /dev/sdc: transport sata, not nvme',
      '- /dev/sdd: transport sata, not nvme',
      '- /dev/sde: the boot medium',
    ]);
  });

  it('two identical logical drives: refused without a tie-break, and under largest; first_by_path takes the first', () => {
    const none = chooseDisk('device', { vendor: 'DELL', model: 'PERC*' }, rack);
    expect(none.path).toBeUndefined();
    expect(none.problem).toBe('install.device_selector (model PERC*, vendor DELL) matches 2 disks equally: /dev/sda, /dev/sdb');
    expect(verdicts({ model: 'PERC*' })).toEqual([
      '- /dev/nvme0n1: model "Dell Ent NVMe CM6 RI 1.92TB" is not PERC*',
      '- /dev/sda: matches, as another disk does (no tie_break)',
      '- /dev/sdb: matches, as another disk does (no tie_break)',
      '- /dev/sdc: model "MZ7LH480HBHQ0D3" is not PERC*',
      '- /dev/sdd: model "ST4000NM000A-2HZ100" is not PERC*',
      '- /dev/sde: the boot medium',
    ]);
    expect(chooseDisk('device', { model: 'PERC*', tieBreak: 'largest' }, rack).problem).toMatch(/matches 2 disks equally/);
    expect(chooseDisk('device', { model: 'PERC*', tieBreak: 'first_by_path' }, rack)).toMatchObject({ path: '/dev/sda', recorded: '/dev/disk/by-id/scsi-36f4ee0806aa7e9002a7b3c1c0e3a1b20' });
    expect(chooseDisk('device', { byPathPrefix: 'pci-0000:3b:00.0-scsi-0:2:1' }, rack).path).toBe('/dev/sdb');
  });

  it('"flash, the smallest" and "the biggest"', () => {
    expect(verdicts({ rotational: false, tieBreak: 'smallest' })).toEqual([
      '- /dev/nvme0n1: tie-break smallest: 1.92 TB vs 480 GB',
      '- /dev/sda: rotational (a spinning disk), not flash',
      '- /dev/sdb: rotational (a spinning disk), not flash',
      '* /dev/sdc: matches; chosen by tie-break smallest',
      '- /dev/sdd: rotational (a spinning disk), not flash',
      '- /dev/sde: the boot medium',
    ]);
    expect(chooseDisk('device', { tieBreak: 'largest' }, rack).path).toBe('/dev/sdd');
    expect(chooseDisk('device', { minSize: '900GB', maxSize: '1TB', tieBreak: 'first_by_path' }, rack).path).toBe('/dev/sda');
  });

  it('never the boot stick, even when the rule names it', () => {
    const c = chooseDisk('device', { transport: 'usb' }, rack);
    expect(c.path).toBeUndefined();
    expect(c.problem).toBe('install.device_selector (transport usb) matches no disk here');
  });

  it('never a disk mounted, swapping or held, whatever it matches', () => {
    expect(verdicts({ model: 'MTFDDAK*' }, old)).toEqual([
      '- /dev/nvme0n1: model "SAMSUNG MZQL2960HCJR-00A07" is not MTFDDAK*',
      '- /dev/sda: matches, as another disk does (no tie_break)',
      '- /dev/sdb: matches, as another disk does (no tie_break)',
      '- /dev/sdc: held by dm-0 (LVM, MD or device-mapper)',
      '- /dev/sdd: mounted at /mnt/scratch',
      '- /dev/sr0: the boot medium',
    ]);
    expect(chooseDisk('device', { model: 'MTFDDAK240*' }, old).problem).toMatch(/matches no disk here/);
  });
});

describe('both disks of a config', () => {
  const locate = (facts: MachineFacts) => (n: string) => findDisk(facts, n);
  const cfg = (install: HarvesterConfig['install']): HarvesterConfig => ({ schemeVersion: 1, install: { mode: 'create', ...install } });

  it('the data disk is never the install disk, chosen by rule or by path', () => {
    const s = selectDisks(cfg({ deviceSelector: { model: 'PERC*', tieBreak: 'first_by_path' }, dataDiskSelector: { model: 'PERC*' } }), rack, locate(rack));
    expect(s.config.install).toMatchObject({ device: '/dev/disk/by-id/scsi-36f4ee0806aa7e9002a7b3c1c0e3a1b20', dataDisk: '/dev/disk/by-id/scsi-36f4ee0806aa7e9002a7b3c1c0e3a1b21' });
    expect(s.config.install?.deviceSelector).toBeUndefined();
    expect(s.config.install?.dataDiskSelector).toBeUndefined();
    expect(s.choices[1]!.candidates.find((c) => c.path === '/dev/sda')!.why).toBe('the install disk');
    const byPath = selectDisks(cfg({ device: '/dev/sdc', dataDiskSelector: { rotational: false } }), rack, locate(rack));
    expect(byPath.config.install?.dataDisk).toBe('/dev/disk/by-id/nvme-Dell_Ent_NVMe_CM6_RI_1.92TB_PHAB012300000');
  });

  it('a config without rules is returned as it is', () => {
    const c = cfg({ device: '/dev/sda' });
    expect(selectDisks(c, rack, locate(rack))).toEqual({ config: c, choices: [] });
  });

  it('a witness takes no data disk, so its data rule is not resolved', () => {
    const s = selectDisks(cfg({ role: 'witness', deviceSelector: { transport: 'nvme' }, dataDiskSelector: { transport: 'sata' } }), rack, locate(rack));
    expect(s.choices.map((c) => c.role)).toEqual(['device']);
    expect(s.config.install?.dataDisk).toBeUndefined();
  });
});

describe('preflight and the gate with a rule', () => {
  it('a rule that takes a disk is a passing row, and the install disk is checked as if named', () => {
    const report = runPreflightChecks(rack, { profile: 'production', config: cfg({ transport: 'nvme' }) });
    expect(report.installDevice).toBe('/dev/nvme0n1');
    const row = report.checks.find((c) => c.id === 'device.selector')!;
    expect(row).toMatchObject({ result: 'pass', subject: '/dev/nvme0n1', measured: '1 of 6 disks match', message: 'install.device_selector chose /dev/nvme0n1 (/dev/disk/by-id/nvme-Dell_Ent_NVMe_CM6_RI_1.92TB_PHAB012300000).' });
    expect(report.checks.find((c) => c.id === 'device.size')?.subject).toBe('/dev/nvme0n1');
    expect(formatPreflightReport(report)).toContain('Disk rules (* taken):\n  install.device_selector (transport nvme): /dev/nvme0n1 (recorded as /dev/disk/by-id/nvme-Dell_Ent_NVMe_CM6_RI_1.92TB_PHAB012300000)\n    * /dev/nvme0n1');
  });

  it("an unattended install's gate says which disk the rule took and why not the others", () => {
    const report = runPreflightChecks(rack, { profile: 'production', config: cfg({ transport: 'nvme' }) });
    const lines = gateLines(report, decideInstallGate(report, { mode: 'automatic', skipchecks: true }));
    expect(lines).toContain('install.device_selector (transport nvme): /dev/nvme0n1 (recorded as /dev/disk/by-id/nvme-Dell_Ent_NVMe_CM6_RI_1.92TB_PHAB012300000)');
    expect(lines).toContain('  * /dev/nvme0n1 (1.92 TB, nvme, Dell Ent NVMe CM6 RI 1.92TB, serial PHAB012300000): the only disk that matches');
    expect(lines).toContain('  - /dev/sdc (480 GB, sata, MZ7LH480HBHQ0D3, serial SSDC002): transport sata, not nvme');
  });

  it('a rule that takes nothing fails the gate, which names every disk; no "no device specified" beside it', () => {
    const report = runPreflightChecks(rack, { profile: 'production', config: cfg({ model: 'PERC*' }) });
    expect(report.checks.filter((c) => c.result === 'fail').map((c) => c.id)).toEqual(['device.selector']);
    const gate = decideInstallGate(report, { mode: 'automatic', skipchecks: false });
    expect(gate.proceed).toBe(false);
    const lines = gateLines(report, gate);
    expect(lines[0]).toBe('FAIL device.selector: 2 of 6 disks match (needs model PERC*): install.device_selector (model PERC*) matches 2 disks equally: /dev/sda, /dev/sdb.');
    expect(lines).toContain('  - /dev/sde (64 GB, usb, SanDisk, Ultra Fit, serial 4C530001230911115260): the boot medium');
  });

  function cfg(sel: DiskSelector): HarvesterConfig {
    return { schemeVersion: 1, install: { mode: 'create', deviceSelector: sel } };
  }
});

describe('hvinstall plan with a rule', () => {
  let dir = '';
  let out = '';
  afterEach(async () => {
    vi.restoreAllMocks();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function plan(selector: string): Promise<{ code: number; out: string }> {
    dir = await mkdtemp(path.join(os.tmpdir(), 'hv-plan-sel-'));
    await writeFile(path.join(dir, 'facts.json'), JSON.stringify(rack));
    const text = CREATE.replace('  device: /dev/sda\n', selector).replace('name: ens5', 'name: eno12399np0');
    expect((await checkConfig(text)).errors).toEqual([]);
    await writeFile(path.join(dir, 'config.yaml'), text);
    out = '';
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      out += String(chunk);
      return true;
    });
    const code = await main(['plan', '--config', path.join(dir, 'config.yaml'), '--facts', path.join(dir, 'facts.json'), '--agent', 'none']);
    return { code, out };
  }

  it('shows the disk the rule picked and why, and plans onto it', async () => {
    const r = await plan('  device_selector: {min_size: 1TB, rotational: false}\n  data_disk_selector: {model: PERC*, tie_break: first_by_path}\n');
    expect(r.code).toBe(0);
    expect(r.out).toContain('Target /dev/nvme0n1:');
    expect(r.out).toContain('Disks chosen by rule (* taken):\n  install.device_selector (size 1TB..any, not rotational): /dev/nvme0n1 (recorded as /dev/disk/by-id/nvme-Dell_Ent_NVMe_CM6_RI_1.92TB_PHAB012300000)\n    * /dev/nvme0n1 (1.92 TB, nvme, Dell Ent NVMe CM6 RI 1.92TB, serial PHAB012300000): the only disk that matches\n');
    expect(r.out).toContain('    - /dev/sdc (480 GB, sata, MZ7LH480HBHQ0D3, serial SSDC002): 480 GB is below min_size 1TB\n');
    expect(r.out).toMatch(/Data disk \/dev\/sda \(/);
  });

  it('refuses a rule that chooses nothing, with every disk, exit 1', async () => {
    await expect(plan('  device_selector: {model: PERC*}\n')).rejects.toMatchObject({
      exitCode: 1,
      message: expect.stringContaining('no disk was chosen, and none was touched:\n  install.device_selector (model PERC*) matches 2 disks equally: /dev/sda, /dev/sdb\n    - /dev/nvme0n1'),
    });
  });
});
