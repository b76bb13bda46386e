/**
 * hvpxe's one departure from the validator's severities: a placeholder is a warning for one install
 * (Harvester installs the text as written) but refused by a server that would serve it to a fleet.
 */
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../../config/index.js';
import { renderAndValidateConfigs } from '../../../pxe/state.js';
import { buildCatalog, parseProfiles } from '../../../pxe/profiles.js';
import type { Validator } from '../../../pxe/state.js';
import { profilesText } from './helpers.js';

const validate: Validator = (raw, opts) => validateConfig(raw, opts);

async function catalogWith(token: string) {
  return buildCatalog(await parseProfiles(profilesText().replace('token: tok-${cluster}', `token: ${token}`)));
}

describe('hvpxe and placeholders', () => {
  it('the validator only warns about a change-me token, with the placeholder kind', async () => {
    const r = await validateConfig({ scheme_version: 1, token: 'change-me-cluster-token', os: { hostname: 'n1', password: 'a-real-password-9c1e' }, install: { mode: 'create', device: '/dev/sda', vip: '10.0.0.100', vip_mode: 'static', management_interface: { interfaces: [{ name: 'ens3' }], method: 'dhcp' } } }, {});
    expect(r.errors).toEqual([]);
    expect(r.warnings.filter((w) => w.kind === 'placeholder').map((w) => w.path)).toEqual(['token']);
  });

  it('a served config with a placeholder is refused, naming the machine and the field; a real token is served', async () => {
    const bad = await renderAndValidateConfigs(await catalogWith('change-me-cluster-token'), 'http://10.0.0.1:8080', validate);
    // Every machine and the default group would get it: each is named.
    expect(bad.errors.filter((e) => /: token: "change-me-cluster-token" looks like a placeholder/.test(e)).map((e) => e.split(':')[0])).toEqual([
      'machine node-1 (group rack1)', 'machine node-2 (group rack1)', 'machine node-3 (group rack1)', 'machine node-4 (group named)', expect.stringMatching(/^default group spare/),
    ]);
    const good = await renderAndValidateConfigs(await catalogWith('a-real-cluster-token-7f3a'), 'http://10.0.0.1:8080', validate);
    // (The fixture's other machines have problems of their own; none is about the token.)
    expect(good.errors.filter((e) => /token|placeholder/.test(e))).toEqual([]);
    expect(good.errors.some((e) => e.startsWith('machine node-1 '))).toBe(false);
    expect(good.configs.get('node-1')).toContain('a-real-cluster-token-7f3a');
  });
});
