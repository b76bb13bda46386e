/**
 * A copy of a config safe to print or log: every value configSecrets lists scrubbed wherever it
 * appears (webhook headers and URLs, config_url's credentials, …), secret-named keys replaced, and
 * the system settings that hold JSON re-encoded with their secret-named parts redacted whole.
 */
import { Redactor, REDACTED } from '../lib/redact.js';
import { configSecrets } from './secrets.js';
import type { HarvesterConfig } from './types.js';

export function redactConfig(config: HarvesterConfig): HarvesterConfig {
  const redactor = new Redactor().add(...configSecrets(config));
  const copy = redactor.redact(config);
  for (const [name, value] of Object.entries(config.systemSettings ?? {})) {
    if (typeof value !== 'string' || !copy.systemSettings) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      // Not JSON: a containerd-registry that does not parse may still hold credentials.
      if (name === 'containerd-registry') copy.systemSettings[name] = REDACTED;
      continue;
    }
    // Re-encoded with its secret-named parts redacted whole, not only scrubbed.
    if (parsed && typeof parsed === 'object') copy.systemSettings[name] = JSON.stringify(redactor.redact(parsed));
  }
  return copy;
}
