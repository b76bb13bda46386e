/**
 * Every secret value a config carries, in one place, for every redactor (install log and events,
 * the agent's logs and status, hvpxe, printed configs): whatever sits under a secret-named key
 * (token, passwords, webhook basic auth, Authorization headers), Proxy-Authorization headers, and
 * the credentials inside the containerd-registry setting, which is a JSON string and so invisible to
 * a walk by key name.
 */
import { stringsUnderSecretKeys } from '../lib/redact.js';
import { parseContainerdRegistry, registryCredentials } from './containerd-registry.js';
import type { HarvesterConfig } from './types.js';

export function configSecrets(config: HarvesterConfig): string[] {
  const out = stringsUnderSecretKeys(config);
  for (const w of config.install?.webhooks ?? []) {
    for (const [k, vs] of Object.entries(w.headers ?? {})) if (/^proxy-authorization$/i.test(k)) out.push(...vs);
  }
  const registry = config.systemSettings?.['containerd-registry'];
  if (registry) out.push(...registrySecrets(registry));
  return [...new Set(out)];
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
