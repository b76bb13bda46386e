/**
 * Every secret value a config carries, in one place, for every redactor (install log and events,
 * the agent's logs and status, hvpxe, printed configs): whatever sits under a secret-named key
 * (token, passwords, webhook basic auth), webhook headers that carry a credential (Authorization,
 * X-Api-Key, X-Auth-Token, Cookie, …), the credentials in its URLs (config_url's and iso_url's
 * `user:pass@`; a webhook's password, `?token=`/`sig=`/`code=` and the path of a Slack, Discord or
 * Teams webhook or any token-like segment), and what system settings hold as JSON under secret-named
 * keys (containerd-registry's auth, backup-target's secretAccessKey, ssl-certificates' privateKey),
 * which a walk of the config by key name cannot see inside a string.
 */
import { stringsUnderSecretKeys } from '../lib/redact.js';
import { isSecretHeader, urlSecrets } from '../lib/url-secrets.js';
import { parseContainerdRegistry, registryCredentials } from './containerd-registry.js';
import type { HarvesterConfig } from './types.js';

export function configSecrets(config: HarvesterConfig): string[] {
  const out = stringsUnderSecretKeys(config);
  for (const w of config.install?.webhooks ?? []) {
    for (const [k, vs] of Object.entries(w.headers ?? {})) if (isSecretHeader(k)) out.push(...(vs ?? []).map(String));
    if (typeof w.url === 'string') out.push(...urlSecrets(w.url, { tokenSegments: true }));
  }
  for (const url of [config.install?.configUrl, config.install?.isoUrl]) if (typeof url === 'string') out.push(...urlSecrets(url));
  for (const [name, value] of Object.entries(config.systemSettings ?? {})) {
    if (typeof value === 'string') out.push(...(name === 'containerd-registry' ? registrySecrets(value) : jsonSecrets(value)));
  }
  return [...new Set(out)];
}

/** What a setting's JSON value holds under secret-named keys; nothing when it is not JSON. */
export function jsonSecrets(value: string): string[] {
  try {
    return stringsUnderSecretKeys(JSON.parse(value));
  } catch {
    return [];
  }
}

/** The setting's credentials; one that does not parse (an unvalidated config) still gives what its JSON holds under secret-named keys. */
function registrySecrets(setting: string): string[] {
  try {
    return registryCredentials(parseContainerdRegistry(setting));
  } catch {
    try {
      return stringsUnderSecretKeys(JSON.parse(setting));
    } catch {
      return [];
    }
  }
}
