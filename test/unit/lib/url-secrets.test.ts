/** lib/url-secrets.ts: the credentials of a URL, found, redacted, and sent as credentials. */
import { describe, expect, it } from 'vitest';
import { redactUrl, redactUrlsIn, urlSecrets, withoutUserinfo } from '../../../lib/url-secrets.js';
import { Redactor } from '../../../lib/redact.js';

const SLACK = 'https://hooks.slack.com/services/T0001AAAA/B0002BBBB/xoxbSecretPart1234567890';
const DISCORD = 'https://discord.com/api/webhooks/123456789012345678/AbCdEf_GhIjKl-MnOpQrStUvWxYz0123456789';
const TEAMS = 'https://contoso.webhook.office.com/webhookb2/1111-2222@3333-4444/IncomingWebhook/abcdef0123456789abcdef0123456789/5555-6666';

describe('redactUrl', () => {
  it.each([
    ['a password', 'https://ops:s3cr3t-pw@config.example/node.yaml', 'https://ops:<redacted>@config.example/node.yaml'],
    ['?token= and sig= and code=, other parameters kept', 'https://h.example/hook?token=abc123&sig=deadbeef&code=9876&event=STARTED', 'https://h.example/hook?token=<redacted>&sig=<redacted>&code=<redacted>&event=STARTED'],
    ['an S3 presigned URL', 'https://b.s3.example/k?X-Amz-Credential=AKIA%2F20260101&X-Amz-Signature=abcdef', 'https://b.s3.example/k?X-Amz-Credential=<redacted>&X-Amz-Signature=<redacted>'],
    ["Slack's path", SLACK, 'https://hooks.slack.com/services/<redacted>'],
    ["Discord's token", DISCORD, 'https://discord.com/api/webhooks/123456789012345678/<redacted>'],
    ["Teams' IncomingWebhook", TEAMS, 'https://contoso.webhook.office.com/webhookb2/<redacted>'],
    ["Mattermost's /hooks/<key>", 'https://chat.example/hooks/x1y2z3a4b5c6d7e8f9g0h1i2', 'https://chat.example/hooks/<redacted>'],
    ['nothing secret: unchanged, byte for byte', 'http://10.0.0.5:8080/artifacts/harvester-v1.8.0-amd64.iso?x=1', 'http://10.0.0.5:8080/artifacts/harvester-v1.8.0-amd64.iso?x=1'],
    ['not a URL', 'not a url at all', 'not a url at all'],
  ])('%s', (_name, url, want) => {
    expect(redactUrl(url)).toBe(want);
  });

  it('in a text: every URL, the sentence punctuation left outside', () => {
    expect(redactUrlsIn(`webhook failed: got 500 status code from ${SLACK}. Retrying (${DISCORD}).`)).toBe(
      'webhook failed: got 500 status code from https://hooks.slack.com/services/<redacted>. Retrying (https://discord.com/api/webhooks/123456789012345678/<redacted>).',
    );
  });

  it('a Redactor redacts them with nothing registered (logs, errors)', () => {
    const line = new Redactor().redactString(`POST https://h.example/x?sig=abcdef123 and ${SLACK}`);
    expect(line).not.toContain('abcdef123');
    expect(line).not.toContain('xoxbSecretPart');
  });
});

describe('urlSecrets', () => {
  it('the password, secret query values, a service path secret; token-like segments only when asked', () => {
    expect(urlSecrets('https://u:pa%40ss@h.example/p?token=tok-1&x=public').sort()).toEqual(['pa%40ss', 'pa@ss', 'tok-1']);
    expect(urlSecrets(SLACK)).toEqual(['T0001AAAA', 'B0002BBBB', 'xoxbSecretPart1234567890']);
    const custom = 'https://alerts.example/api/v2/inbound/Zx9Qw8Er7Ty6Ui5Op4As3Df2';
    expect(urlSecrets(custom)).toEqual([]);
    expect(urlSecrets(custom, { tokenSegments: true })).toEqual(['Zx9Qw8Er7Ty6Ui5Op4As3Df2']);
    // Words and short ids are not tokens.
    expect(urlSecrets('https://h.example/harvester/install/events/node-1', { tokenSegments: true })).toEqual([]);
  });
});

describe('withoutUserinfo', () => {
  it('takes user:pass@ out as a Basic Authorization header (percent-decoded, as Go sends it)', () => {
    expect(withoutUserinfo('https://ops:p%40ss@config.example/node.yaml')).toEqual({ url: 'https://config.example/node.yaml', authorization: `Basic ${Buffer.from('ops:p@ss').toString('base64')}` });
    expect(withoutUserinfo('https://config.example/node.yaml')).toEqual({ url: 'https://config.example/node.yaml' });
  });
});
