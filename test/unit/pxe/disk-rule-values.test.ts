// A disk rule in a group's values: one rule for a whole rack (a by-id path names one machine's disk,
// a rule names the right disk on each), substituted as a whole value and checked by the one validator.
import { describe, expect, it } from 'vitest';
import { buildCatalog, machineByName, parseProfiles } from '../../../pxe/profiles.js';
import { renderMachineConfig } from '../../../pxe/render-config.js';
import { renderAndValidateConfigs } from '../../../pxe/state.js';
import { validateConfig } from '../../../config/index.js';
import { profilesText } from './helpers.js';

const URL_ = 'http://10.0.0.1:8080';
const withRule = (rule: string, use = 'device_selector: ${disk_rule}') =>
  profilesText()
    .replace('        device: /dev/disk/by-id/${disk}', `        ${use}`)
    .replace('values: { cluster: alpha, disk: nvme-1 }', `values: { cluster: alpha, disk: nvme-1, disk_rule: ${rule} }`)
    .replace(/values: \{ cluster: alpha, disk: (sdb|any) \}/g, `values: { cluster: alpha, disk: $1, disk_rule: ${rule} }`)
    .replace('values: { disk: sda }', 'values: { disk: sda }');

describe('a disk rule in group values', () => {
  it('is substituted as the whole value, a mapping in every machine’s config', async () => {
    const cat = buildCatalog(await parseProfiles(withRule('{ transport: nvme, min_size: 1TB, tie_break: largest }')));
    const cfg = renderMachineConfig(cat, machineByName(cat, 'node-1')!, URL_) as { install: Record<string, unknown> };
    expect(cfg.install.device_selector).toEqual({ transport: 'nvme', min_size: '1TB', tie_break: 'largest' });
    expect(cfg.install.device).toBeUndefined();
  });

  it('every servable config with the rule passes the one validator', async () => {
    const cat = buildCatalog(await parseProfiles(withRule('{ transport: nvme, min_size: 1TB, tie_break: largest }')));
    const r = await renderAndValidateConfigs(cat, URL_, (raw) => validateConfig(raw));
    // (node-3 and node-4 of the shared fixture lack a NIC and a mode: nothing about disks.)
    expect(r.errors.filter((e) => /device|disk/.test(e))).toEqual([]);
    expect(r.errors.filter((e) => /node-[12]/.test(e))).toEqual([]);
    expect(r.configs.get('node-2')).toMatch(/device_selector:\n\s+transport: nvme\n\s+min_size: 1TB\n\s+tie_break: largest/);
  });

  it('a bad rule is refused at load for every machine, with the validator’s message', async () => {
    const cat = buildCatalog(await parseProfiles(withRule('{ transport: fibre }')));
    const r = await renderAndValidateConfigs(cat, URL_, (raw) => validateConfig(raw));
    expect(r.errors).toContain('machine node-1 (group rack1): install.device_selector.transport: unknown transport fibre (use one of nvme, sata, sas, scsi, usb, virtio, mmc)');
  });

  it('a mapping inside a longer string is refused, saying how to write it', async () => {
    const cat = buildCatalog(await parseProfiles(withRule('{ transport: nvme }', 'device: /dev/${disk_rule}')));
    expect(() => renderMachineConfig(cat, machineByName(cat, 'node-1')!, URL_)).toThrow('install.device: ${disk_rule} is a mapping (a disk rule): write it as the whole value, e.g. device_selector: ${disk_rule}');
  });

  it('profiles.yaml refuses a value nested deeper than a mapping of scalars', async () => {
    await expect(parseProfiles(withRule('{ size: { min: 1TB } }'))).rejects.toThrow(/must be string,number,boolean/);
  });
});
