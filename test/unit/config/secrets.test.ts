/** configSecrets: the one list of a config's secrets that every redactor registers. */
import { describe, expect, it } from 'vitest';
import { configSecrets } from '../../../config/index.js';
import { redactConfig } from '../../../config/redact-config.js';

const registry = JSON.stringify({
  Mirrors: { 'docker.io': { Endpoints: ['https://m.example'] } },
  Configs: { 'm.example': { Auth: { Username: 'pull-user', Password: 'reg-pass-1', Auth: 'cHVsbDpwYXNz', IdentityToken: 'id-tok-1' } } },
});

describe('configSecrets', () => {
  it('finds the token, passwords, webhook auth and headers, and the credentials inside the containerd-registry JSON', () => {
    const secrets = configSecrets({
      token: 'cluster-token-1',
      os: { password: 'rootpass1' },
      systemSettings: { 'containerd-registry': registry, 'log-level': 'debug' },
      install: {
        webhooks: [
          {
            event: 'STARTED',
            url: 'https://h.example',
            basicAuth: { user: 'hook-user', password: 'hookpass1' },
            headers: { Authorization: ['Bearer hooktoken1'], 'Proxy-Authorization': ['Basic cHJveHk6cHc='], 'X-Trace': ['not-secret-1'] },
          },
        ],
      },
    });
    // basic_auth is secret-named as a whole: its user name is registered too.
    expect(secrets.sort()).toEqual(['Basic cHJveHk6cHc=', 'Bearer hooktoken1', 'cHVsbDpwYXNz', 'cluster-token-1', 'hook-user', 'hookpass1', 'id-tok-1', 'reg-pass-1', 'rootpass1'].sort());
  });

  it('a containerd-registry setting that does not parse still gives what its JSON holds under secret-named keys', () => {
    expect(configSecrets({ systemSettings: { 'containerd-registry': '{"Mirror":{},"Configs":{"h":{"Auth":{"Password":"pw-in-bad-setting"}}}}' } })).toEqual(['pw-in-bad-setting']);
    expect(configSecrets({ systemSettings: { 'containerd-registry': '{not json' } })).toEqual([]);
  });

  it('a printed config shows none of them', () => {
    const cfg = { token: 'cluster-token-1', os: { password: 'rootpass1', hostname: 'n1' }, systemSettings: { 'containerd-registry': registry } };
    const printed = JSON.stringify(redactConfig(cfg));
    for (const s of configSecrets(cfg)) expect(printed).not.toContain(s);
    expect(printed).toContain('n1');
  });
});
