/** profiles.yaml's `boot:` (the network boot chain): ipxe by default, grub-signed, nothing else. */
import { describe, expect, it } from 'vitest';
import { bootChainOf, parseProfiles } from '../../../pxe/profiles.js';
import { profilesText } from './helpers.js';

const withBoot = (v: string): string => profilesText().replace('    kernel_args:', `    boot: ${v}\n    kernel_args:`);

describe('profiles.yaml boot:', () => {
  it('defaults to ipxe and takes grub-signed', async () => {
    expect(bootChainOf((await parseProfiles(profilesText())).profiles.hv)).toBe('ipxe');
    expect(bootChainOf((await parseProfiles(withBoot('grub-signed'))).profiles.hv)).toBe('grub-signed');
    expect(bootChainOf((await parseProfiles(withBoot('ipxe'))).profiles.hv)).toBe('ipxe');
  });
  it('refuses anything else with the line, what was given and what is allowed', async () => {
    await expect(parseProfiles(withBoot('secureboot'), 'p.yaml')).rejects.toThrow(
      'p.yaml: 1 problem:\n  - /profiles/hv/boot (line 14): must be equal to one of the allowed values ("secureboot" given; one of "ipxe", "grub-signed")',
    );
  });
});
