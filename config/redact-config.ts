/**
 * A copy of a config safe to print or log: token, passwords and webhook basic auth by key name,
 * Authorization-like webhook headers, and credentials inside the containerd-registry setting's JSON.
 */
import { Redactor, REDACTED } from '../lib/redact.js';
import { configSecrets } from './secrets.js';
import type { HarvesterConfig } from './types.js';

export function redactConfig(config: HarvesterConfig): HarvesterConfig {
  const redactor = new Redactor().add(...configSecrets(config));
  const copy = redactor.redact(config);
  const registry = copy.systemSettings?.['containerd-registry'];
  if (registry !== undefined && copy.systemSettings) {
    try {
      // Re-encoded with its secret-named parts redacted whole (user names too), not only scrubbed.
      copy.systemSettings['containerd-registry'] = JSON.stringify(redactor.redact(JSON.parse(registry) as unknown));
    } catch {
      copy.systemSettings['containerd-registry'] = REDACTED;
    }
  }
  return copy;
}
