/**
 * The one config front door (docs/architecture.md): the CLI, the console, the PXE server and the
 * agent all load and validate through these functions and print the same findings.
 * Implementation: load.ts, normalise.ts, cmdline.ts, validate.ts, serialise.ts.
 */
export type * from './types.js';
import type { HarvesterConfig, LoadedConfig, LoadOptions, ValidationResult } from './types.js';
/** Prints a finding compiler style (`file:line:col: error: path: message` and a hint line); pure. */
export { formatFinding } from './format.js';
/** Every secret value of a config, for redactors. */
export { configSecrets } from './secrets.js';

/** Loads a path, an http(s) URL or `-` (stdin), merges the command line, normalises and validates. */
export async function loadConfig(source: string | undefined, opts: LoadOptions = {}): Promise<LoadedConfig> {
  const { loadConfig: impl } = await import('./load.js');
  return impl(source, opts);
}

/** Normalises (spellings, coercions) and validates an already-parsed object. Pure. */
export async function validateConfig(raw: unknown, opts: { source?: string; alreadyInstalled?: boolean } = {}): Promise<ValidationResult> {
  const { validateRawConfig } = await import('./validate.js');
  return validateRawConfig(raw, opts);
}

/** Serialises a config as Harvester writes /oem/harvester.config (yaml.v3 lowercase keys). */
export async function serialiseHarvesterConfig(config: HarvesterConfig): Promise<string> {
  const { toHarvesterConfigYaml } = await import('./serialise.js');
  return toHarvesterConfigYaml(config);
}

/** A layer of validateLayers: an object (what the console typed) or YAML text (a remote config, with positions). */
export type ConfigLayer = { raw: unknown; source: string } | { text: string; source: string };

/**
 * Validates layers given highest priority first (what the console typed, then a remote config it
 * merges), merged as Harvester merges them, with the same findings `validate` prints; a finding's
 * `source` says which layer it is about. Pure.
 */
export async function validateLayers(layers: ConfigLayer[], opts: { alreadyInstalled?: boolean } = {}): Promise<ValidationResult> {
  const [{ normaliseRaw }, { validateSources }, { normaliseYamlText }] = await Promise.all([import('./normalise.js'), import('./validate.js'), import('./load.js')]);
  const sources = [];
  const errors: import('./types.js').Finding[] = [];
  const warnings: import('./types.js').Finding[] = [];
  for (const l of layers) {
    if ('raw' in l) {
      sources.push(normaliseRaw(l.raw, { name: l.source }));
      continue;
    }
    const n = normaliseYamlText(l.text, l.source);
    errors.push(...n.errors);
    warnings.push(...n.warnings);
    if (n.source) sources.push(n.source);
  }
  return validateSources(sources, opts, { errors, warnings });
}

/**
 * Reads a config's text from a path or an http(s) URL as `validate` does (retries, size limit),
 * and says why it is not a config when the bytes cannot be one (binary, HTML, not UTF-8). Throws
 * an HvError when it cannot be read at all.
 */
export async function readConfigText(source: string, opts: LoadOptions = {}): Promise<{ name: string; text?: string; error?: import('./types.js').Finding }> {
  const { readSource, decodeConfigText } = await import('./load.js');
  const raw = await readSource(source, opts);
  const d = decodeConfigText(raw);
  return { name: raw.name, text: d.text, error: d.error };
}

/**
 * The `harvester.*` keys of a kernel command line as a (partial, unvalidated) config, with what is
 * wrong with the keys themselves; config_url is not followed. The console pre-fills its pages from it.
 */
export async function cmdlineConfig(text: string, source = '<cmdline>'): Promise<{ config: HarvesterConfig; errors: import('./types.js').Finding[]; warnings: import('./types.js').Finding[] }> {
  const [{ parseCmdline }, { normaliseRaw }] = await Promise.all([import('./cmdline.js'), import('./normalise.js')]);
  const parsed = parseCmdline(text, source);
  const n = normaliseRaw(parsed.raw, { name: source, cmdline: true, positions: parsed.positions });
  return { config: n.config, errors: [...parsed.errors, ...n.errors], warnings: [...parsed.warnings, ...n.warnings] };
}
