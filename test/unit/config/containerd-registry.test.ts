/**
 * system_settings.containerd-registry: `hvinstall validate` and the renderer of registries.yaml must
 * agree on every setting, or a config passes validate and the install fails after the disk was
 * partitioned. Where Harvester's own decoder rejects the setting, Harvester's message is kept.
 */
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../../config/index.js';
import { renderRegistriesFile } from '../../../installer/render/index.js';

const base = {
  scheme_version: 1,
  token: 'token-rancher-123',
  os: { hostname: 'node1', password: 'rancher' },
  install: { mode: 'create', management_interface: { interfaces: [{ name: 'ens5' }], method: 'dhcp' }, device: '/dev/sda', vip: '10.10.0.20', vip_mode: 'static' },
};

async function registryErrors(setting: string) {
  const r = await validateConfig({ ...base, system_settings: { 'containerd-registry': setting } });
  return r.errors.filter((e) => e.path === 'system_settings.containerd-registry').map((e) => ({ message: e.message, hint: e.hint }));
}

function renders(setting: string): boolean {
  try {
    renderRegistriesFile(setting);
    return true;
  } catch {
    return false;
  }
}

const SETTINGS: string[] = [
  '',
  'null',
  '{}',
  '{"Mirrors":{}}',
  '{"Mirror":{}}',
  '{"mirrors":{"docker.io":{"endpoint":["https://m.example"],"rewrite":{"^a/(.*)":"b/$1"}}}}',
  '{"Mirrors":{"docker.io":{"Endpoints":["https://m.example"]}},"Configs":{"m.example":{"Auth":{"Username":"u","Password":"p"},"TLS":{"InsecureSkipVerify":true}}}}',
  '{not json',
  '[]',
  '"a string"',
  '{"Mirrors":[]}',
  '{"Mirrors":{"docker.io":[]}}',
  '{"Mirrors":{"docker.io":{"Endpoints":"https://x"}}}',
  '{"Mirrors":{"docker.io":{"Endpoints":["ftp://x"]}}}',
  '{"Mirrors":{"docker.io":{"Endpoints":[],"Rewrites":{"(":"x"}}}}',
  '{"Mirrors":{"docker.io":{"Endpoints":[],"Rewrites":{"a":1}}}}',
  '{"Mirrors":{"docker.io":{"Endpoints":[],"endpoint":[]}}}',
  '{"Mirrors":{"docker.io":{"Endpoint":["https://m"],"Mirrors":1}}}',
  '{"Configs":{"h":{"Auth":{"Password":"p"}}}}',
  '{"Configs":{"h":{"Auth":{"Username":1}}}}',
  '{"Configs":{"h":{"Auth":{"Username":"u","Token":"t"}}}}',
  '{"Configs":{"h":{"TLS":{"CertFile":"/c.pem"}}}}',
  '{"Configs":{"h":{"TLS":{"InsecureSkipVerify":"yes"}}}}',
  '{"Configs":{"h":{"TLS":{"CAFile":7}}}}',
  '{"Configs":[]}',
];

describe('containerd-registry: validate and render agree', () => {
  it.each(SETTINGS)('%s', async (setting) => {
    const errors = await registryErrors(setting);
    expect(errors.length > 0, JSON.stringify(errors)).toBe(!renders(setting));
  });

  it('{"Mirror":{}} (a misspelt Mirrors: the node would pull without its mirror) is refused by validate, naming the key', async () => {
    expect(await registryErrors('{"Mirror":{}}')).toEqual([{ message: 'containerd-registry: unknown key "Mirror"', hint: 'allowed: Mirrors, Configs' }]);
  });

  it("what Harvester's JSON decoder rejects keeps Harvester's message, with the reason in the hint", async () => {
    expect(await registryErrors('{"Mirrors":{"docker.io":{"Endpoints":"https://m"}}}')).toEqual([
      { message: 'could not parse containerd-registry as JSON', hint: 'Mirrors.docker.io.Endpoints must be a list of URLs' },
    ]);
    expect(await registryErrors('{not json')).toEqual([{ message: 'could not parse containerd-registry as JSON', hint: expect.stringMatching(/^not JSON: /) }]);
    expect(await registryErrors('{"Configs":{"h":{"TLS":{"InsecureSkipVerify":"yes"}}}}')).toEqual([
      { message: 'could not parse containerd-registry as JSON', hint: 'Configs.h.TLS.InsecureSkipVerify must be true or false' },
    ]);
  });

  it('checks beyond Harvester say what is wrong in the message itself', async () => {
    expect(await registryErrors('{"Mirrors":{"docker.io":{"Endpoints":["ftp://x"]}}}')).toEqual([
      { message: 'Mirrors.docker.io.Endpoints: "ftp://x" is not an http(s) URL', hint: 'write endpoints as https://host[:port][/path]' },
    ]);
    expect(await registryErrors('{"Configs":{"h":{"Auth":{"Password":"sup3r-secret"}}}}')).toEqual([{ message: 'Configs.h.Auth: a Password needs a Username', hint: undefined }]);
  });
});
