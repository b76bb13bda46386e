/**
 * The node's configuration as the installer left it under /oem. The agent runs without one (a
 * guard that needs it says so), but a config that exists and does not load is worth a warning.
 */
import { access } from 'node:fs/promises';
import type { HarvesterConfig, LoadedConfig } from '../config/types.js';
import { configSecrets } from '../config/secrets.js';
import type { Redactor } from '../lib/redact.js';

export interface NodeConfigResult {
  config?: HarvesterConfig;
  source?: string;
  problems: string[];
}

/** The candidate config files from the agent settings, in the order they are tried. */
export function configCandidates(settings: Record<string, unknown>): string[] {
  return [settings.configFile, settings.canonicalConfigFile].filter((c): c is string => typeof c === 'string' && c !== '');
}

/**
 * Tries each candidate path (under root) in order and returns the first that loads: the settings'
 * `configFile` (default /oem/harvester.config, Harvester's lowercase form, the file Harvester's own
 * tools read and people edit), then `canonicalConfigFile` (the renderer's /oem/hvinstall/config.json).
 */
export async function loadNodeConfig(root: (p: string) => string, candidates: string[]): Promise<NodeConfigResult> {
  const problems: string[] = [];
  for (const p of candidates) {
    const file = root(p);
    if (!(await access(file).then(() => true, () => false))) continue;
    try {
      const loaded = await loadConfigFile(file);
      if (!loaded.valid) {
        problems.push(`${p}: ${loaded.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}`);
        // An installed node's config that fails today's rules is still the best description we have.
        return { config: loaded.config, source: p, problems };
      }
      return { config: loaded.config, source: p, problems };
    } catch (err) {
      problems.push(`${p}: ${(err as Error).message}`);
    }
  }
  if (problems.length === 0) problems.push(`no node config found (looked for ${candidates.join(', ')})`);
  return { problems };
}

/**
 * Each file's last load, by its bytes. The registries guard reads the node config at every check
 * (every 5 s, and at each change to registries.yaml) so that a changed source is applied; parsing
 * and validating it cost 0.1–0.2 s of CPU each time on the emulated first boot, a quarter of the
 * agent's busy time there (docs/agent.md, "What it repeats"). Unchanged bytes give the same result.
 */
const lastLoads = new Map<string, { bytes: Buffer; loaded: LoadedConfig }>();

/** loadConfig of an installed node's file, parsed again only when its bytes changed. Each caller gets its own copy. */
async function loadConfigFile(file: string): Promise<LoadedConfig> {
  const { readSource } = await import('../config/load.js');
  const bytes = (await readSource(file)).bytes;
  const last = lastLoads.get(file);
  if (last?.bytes.equals(bytes)) return structuredClone(last.loaded);
  const { loadConfig } = await import('../config/index.js');
  const loaded = await loadConfig(file, { alreadyInstalled: true });
  // Kept only when the file did not change while it was loaded: the result is then the bytes'.
  const after = await readSource(file).then((r) => r.bytes, () => undefined);
  if (after?.equals(bytes)) lastLoads.set(file, { bytes, loaded: structuredClone(loaded) });
  else lastLoads.delete(file);
  return loaded;
}

/** Registers every secret of the config with the redactor (config configSecrets: token, passwords, registry credentials, webhook auth). */
export function registerConfigSecrets(redactor: Redactor, config: HarvesterConfig | undefined): void {
  if (config) redactor.add(...configSecrets(config));
}
