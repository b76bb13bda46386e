/**
 * The validation pipeline shared by every entry point: normalise (spellings, coercions) -> merge
 * sources -> schema (precompiled) -> Harvester's rules -> defaults. Pure: no I/O.
 */
import { normaliseRaw, type NormalisedSource, type SourceInfo } from './normalise.js';
import { mergeConfigs } from './merge.js';
import { FindingList, sortFindings, type Origins } from './findings.js';
import { schemaFindings } from './schema-findings.js';
import { checkRules, type RuleContext } from './rules.js';
import { applyDefaults } from './defaults.js';
import type { Finding, HarvesterConfig, ValidationResult } from './types.js';

export interface ValidateOptions extends RuleContext {
  source?: string;
}

/** Validates sources given highest priority first (e.g. kernel command line, then the file). */
export function validateSources(sources: NormalisedSource[], opts: RuleContext = {}, extra: { errors?: Finding[]; warnings?: Finding[] } = {}): ValidationResult {
  let merged: { config: HarvesterConfig; origins: Origins } = { config: {}, origins: new Map() };
  if (sources.length > 0) {
    merged = { config: sources[0].config, origins: sources[0].origins };
    for (const lower of sources.slice(1)) merged = mergeConfigs(merged, lower);
  }
  const out = new FindingList(merged.origins, sources[sources.length - 1]?.origins.get('')?.source);
  for (const f of extra.errors ?? []) out.push(f);
  for (const f of extra.warnings ?? []) out.push(f);
  for (const s of sources) {
    s.errors.forEach((f) => out.push(f));
    s.warnings.forEach((f) => out.push(f));
  }
  const config = structuredClone(merged.config);
  schemaFindings(config, out);
  checkRules(config, out, opts);
  const errors = sortFindings(out.errors);
  const warnings = sortFindings(out.warnings);
  return { valid: errors.length === 0, errors, warnings, config: applyDefaults(config) };
}

/** Normalises and validates one already-parsed object (no positions: findings carry paths only). */
export function validateRawConfig(raw: unknown, opts: ValidateOptions = {}): ValidationResult {
  const src: SourceInfo = { name: opts.source ?? '<config>' };
  return validateSources([normaliseRaw(raw, src)], opts);
}
