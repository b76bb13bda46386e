import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { formatUpgradePlan, hookAction, planUpgrade, type UpgradeFacts } from '../../../installer/upgrade/plan.js';
import { renderGrubCfg } from '../../../installer/bootloader/index.js';
import { fileKind } from '../../../installer/upgrade/source.js';

const ELEMENTAL_GRUB_CFG = readFileSync(path.resolve(__dirname, '../../../iso-build/systemd-os/files/grub.cfg'), 'utf8');
const facts = (f: Partial<UpgradeFacts> = {}): UpgradeFacts => ({
  stateDevice: '/dev/sda4',
  oemDevice: '/dev/sda2',
  assessment: { hv_assessment_enabled: 'yes', hv_assessment_state: '' },
  grubCfg: ELEMENTAL_GRUB_CFG,
  grubcustom: 'set hv_assessment_dir=""\nsource "${hv_assessment_dir}/hv_assessment.cfg"\n',
  files: { active: true, passive: true, failed: false, transition: false },
  booted: 'active',
  ...f,
});

describe('upgrade plan', () => {
  it('an idle node upgrades and arms the next boot', () => {
    const p = planUpgrade('/srv/v2.squashfs', facts());
    expect(p.refusals).toEqual([]);
    expect(p.arm).toBe(true);
    expect(p.steps.map((s) => s.name)).toEqual(['build', 'switch', 'arm']);
    expect(formatUpgradePlan(p)).toContain('boot assessment: armed');
  });

  it.each([
    ['armed', /has not been booted yet/],
    ['trying', /being tried/],
    ['fallback', /fallback is not committed yet/],
  ])('refuses while the assessment is %s (the next upgrade would move an untried or failed image to passive)', (state, why) => {
    const p = planUpgrade('s', facts({ assessment: { hv_assessment_enabled: 'yes', hv_assessment_state: state } }));
    expect(p.refusals.join('\n')).toMatch(why);
    expect(formatUpgradePlan(p)).toContain('REFUSED');
  });

  it('refuses on a node running passive.img, and on a disk without active.img', () => {
    expect(planUpgrade('s', facts({ booted: 'passive' })).refusals.join()).toMatch(/runs passive.img/);
    expect(planUpgrade('s', facts({ files: { active: false, passive: false, failed: false, transition: false } })).refusals.join()).toMatch(/no cOS\/active.img/);
  });

  it('disabled by the operator: upgrades, does not arm, says why', () => {
    const p = planUpgrade('s', facts({ assessment: { hv_assessment_enabled: 'no', hv_assessment_state: '' } }));
    expect(p.refusals).toEqual([]);
    expect(p.arm).toBe(false);
    expect(p.armWhy).toMatch(/disabled.*hvagent assessment arm/);
  });

  it('a node installed before boot assessment (Harvester\'s installer) gets the hook in grubcustom and is armed', () => {
    const p = planUpgrade('s', facts({ assessment: undefined, grubcustom: 'menuentry "x (debug)" --id debug {\n}\n' }));
    expect(p.hook).toBe('add-to-grubcustom');
    expect(p.arm).toBe(true);
    expect(p.notes.join()).toMatch(/no boot-assessment state yet/);
  });

  it('finds the hook in hvinstall\'s own grub.cfg, and calls an unknown grub.cfg unsupported (not armed)', () => {
    expect(hookAction(renderGrubCfg({}), '')).toBe('present');
    expect(hookAction('menuentry "a" --id x { }\n', '')).toBe('unsupported');
    expect(planUpgrade('s', facts({ assessment: undefined, grubCfg: 'menuentry "a" { }\n', grubcustom: '' })).arm).toBe(false);
  });

  it('names a removed failed image in the notes', () => {
    expect(planUpgrade('s', facts({ files: { active: true, passive: false, failed: true, transition: false } })).notes.join()).toMatch(/failed.img/);
  });
});

describe('upgrade source kinds by magic', () => {
  it('squashfs, ISO 9660 and other', () => {
    expect(fileKind(Buffer.from('hsqs....'))).toBe('squashfs');
    const iso = Buffer.alloc(32774);
    iso.write('CD001', 32769, 'latin1');
    expect(fileKind(iso)).toBe('iso');
    expect(fileKind(Buffer.from('PK\u0003\u0004'))).toBe('other');
  });
});
