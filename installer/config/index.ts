/**
 * The one config front door (docs/architecture.md): the CLI, the console, the PXE server and the
 * agent all load and validate through these functions and print the same findings.
 * Implementation: load.ts, normalise.ts, cmdline.ts, validate.ts, serialise.ts.
 */
export type * from './types.js';
import type { HarvesterConfig, ValidationResult } from './types.js';
/** Prints a finding compiler style (`file:line:col: error: path: message` and a hint line); pure. */
export { formatFinding } from './format.js';

export interface LoadOptions {
  /** Kernel command line text (`harvester.*` parameters merged over the file). */
  cmdline?: string;
  /** Read the command line from a file (e.g. /proc/cmdline). */
  cmdlineFile?: string;
  /** For http(s) sources: extra CA bundle (PEM file), expected sha256 of the body, per-attempt timeout and attempts. */
  caFile?: string;
  /** Where caFile came from, for messages: the kernel command line's hvinstall.ca_file (set by loadConfig). */
  caFileFrom?: 'option' | 'cmdline';
  sha256?: string;
  timeoutMs?: number;
  attempts?: number;
  retryDelayMs?: number;
  /** On the already-installed path some rules (iso_url in automatic mode) do not apply. */
  alreadyInstalled?: boolean;
  /** DHCP pools of the management network, when the operator knows them: the VIP must be outside. */
  dhcpRanges?: Array<{ first: string; last: string }>;
}

export interface LoadedConfig extends ValidationResult {
  /** What was read: a path, a URL, `<stdin>`, or `<cmdline>` when only the command line was given. */
  source: string;
}

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
