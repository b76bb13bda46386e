/** configSecrets: the one list of a config's secrets that every redactor registers. */
import { describe, expect, it } from 'vitest';
import { configSecrets } from '../../../config/index.js';
import { redactConfig } from '../../../config/redact-config.js';
import type { HarvesterConfig } from '../../../config/types.js';

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

describe('secrets that validate --print and the logs showed in clear', () => {
  const backup = JSON.stringify({ type: 's3', endpoint: 'https://s3.example', bucketName: 'bk', bucketRegion: 'us-east-1', accessKeyId: 'AKIAPUBLIC', secretAccessKey: 's3-secret-key-value' });
  const ssl = JSON.stringify({ publicCertificate: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----', privateKey: '-----BEGIN PRIVATE KEY-----\nMIIEsecretkeymaterial\n-----END PRIVATE KEY-----', ca: '' });
  const cfg = {
    os: { hostname: 'n1' },
    systemSettings: { 'backup-target': backup, 'ssl-certificates': ssl },
    install: {
      configUrl: 'https://ops:cfg-pass-9@config.example/node.yaml',
      webhooks: [
        { event: 'STARTED', method: 'POST', url: 'https://h.example/notify?token=query-token-7&event=x', headers: { 'X-Api-Key': ['api-key-value-3'] } },
        { event: 'SUCCEEDED', method: 'POST', url: 'https://hooks.slack.com/services/T0001AAAA/B0002BBBB/slackSecretPart123456' },
        { event: 'FAILED', method: 'POST', url: 'https://h.example/hook?sig=sig-value-5&code=code-value-6' },
      ],
    },
  } as unknown as HarvesterConfig;
  const secret = ['s3-secret-key-value', 'MIIEsecretkeymaterial', 'cfg-pass-9', 'query-token-7', 'api-key-value-3', 'slackSecretPart123456', 'sig-value-5', 'code-value-6'];

  it('every one is in configSecrets', () => {
    const found = configSecrets(cfg).join('\n');
    for (const s of secret) expect(found).toContain(s);
  });

  it('the printed config holds none of them, and keeps what is not secret', () => {
    const printed = JSON.stringify(redactConfig(cfg));
    for (const s of secret) expect(printed).not.toContain(s);
    for (const kept of ['AKIAPUBLIC', 'https://s3.example', 'BEGIN CERTIFICATE', 'config.example', 'h.example/notify', 'event=x']) expect(printed).toContain(kept);
  });
});

