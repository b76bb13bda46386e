/**
 * A disk rule on the kernel command line (harvester.install.device_selector.*): the disk page
 * pre-selects the disk it chose and says why the others were not taken; a rule that chooses nothing
 * says so and leaves the choice to the operator.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { applyAnswers, answersFrom } from '../../../installer/console/answers.js';
import { KEYS, type Session } from './session.js';
import { fill, startDryRun, TITLES } from './walk.js';

let s: Session | undefined;
let dir = '';
afterEach(() => {
  s?.kill();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function diskPage(cmdline: string): Promise<Session> {
  dir = mkdtempSync('/tmp/hv-console-rule-');
  writeFileSync(`${dir}/cmdline`, `console=ttyS0 ${cmdline}\n`);
  ({ s } = startDryRun({ sysroot: 'raid-rack' }, ['--cmdline-file', `${dir}/cmdline`]));
  await s.page(TITLES.mode);
  await s.keys(KEYS.enter);
  await s.page(TITLES.password);
  await fill(s, 'Passw0rd!');
  await fill(s, 'Passw0rd!');
  await s.page(TITLES.disk);
  return s;
}

describe('hvinstall console: disks chosen by rule', () => {
  it('the rule’s disk is pre-selected, with why each other disk was not taken', async () => {
    const s = await diskPage('harvester.install.device_selector.model=PERC* harvester.install.device_selector.tie_break=first_by_path');
    const text = await s.scrolledText();
    expect(text).toContain('The installation disk was chosen by install.device_selector (model PERC*, tie-break first_by_path): /dev/disk/by-id/scsi-36f4ee0806aa7e9002a7b3c1c0e3a1b20');
    expect(text).toContain('- /dev/sdb: tie-break first_by_path: pci-0000:3b:00.0-scsi-0:2:1:0 is not first');
    expect(text).toContain('- /dev/sde: the boot medium');
    expect(text).toContain('(*) /dev/disk/by-id/scsi-36f4ee0806aa7e9002a7b3c1c0e3a1b20 /dev/sda');
  }, 30_000);

  it('a rule that chooses nothing says so, and the operator chooses', async () => {
    const s = await diskPage('harvester.install.device_selector.model=PERC*');
    const text = await s.scrolledText();
    expect(text).toContain('install.device_selector (model PERC*) matches 2 disks equally: /dev/sda, /dev/sdb: choose the disk below.');
    expect(text).toContain('- /dev/sda: matches, as another disk does (no tie_break)');
    // Harvester's default: the first usable disk of the list, not a guess between the two.
    expect(text).toContain('(*) /dev/disk/by-id/nvme-Dell_Ent_NVMe_CM6_RI_1.92TB_PHAB012300000 /dev/nvme0n1');
  }, 30_000);
});

describe('the config the console writes', () => {
  it('names the disks by path: the command line’s rules are gone', () => {
    const base = { install: { mode: 'create', deviceSelector: { transport: 'nvme' }, dataDiskSelector: { rotational: true } } };
    const a = { ...answersFrom(base), device: '/dev/disk/by-id/nvme-X', dataDisk: '/dev/sdb' };
    const cfg = applyAnswers(base, a) as { install: Record<string, unknown> };
    expect(cfg.install.device).toBe('/dev/disk/by-id/nvme-X');
    expect(cfg.install.dataDisk).toBe('/dev/sdb');
    expect(cfg.install.deviceSelector).toBeUndefined();
    expect(cfg.install.dataDiskSelector).toBeUndefined();
  });
});
