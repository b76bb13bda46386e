/**
 * The validation pipeline shared by every entry point: normalise (spellings, coercions) -> merge
 * sources -> schema (precompiled) -> Harvester's rules -> defaults. Pure: no I/O.
 */
import { normaliseRaw, type NormalisedSource, type SourceInfo } from './normalise.js';
import { mergeConfigs } from './merge.js';
import { FindingList, sortFindings, type Origins } from './findings.js';
import { schemaFindings } from './schema-findings.js';
import { checkRules, type RuleContext } from './rules.js';
import { normaliseServerUrl } from './server-url.js';
import { applyDefaults } from './defaults.js';
import { completeNoProxy } from './no-proxy.js';
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
  let config = structuredClone(merged.config);
  if (sources.some((s) => s.fatal) || (extra.errors ?? []).length > 0 && sources.length === 0) {
    // Not a config at all (a list, a scalar): the rules would only list everything as missing.
    return { valid: false, errors: sortFindings(out.errors), warnings: sortFindings(out.warnings), config: {} };
  }
  schemaFindings(config, out);
  config = normaliseServerUrl(config, out);
  const earlier = out.errors.map((e) => e.path);
  const firstRule = out.errors.length;
  checkRules(config, out, opts);
  // A rule error about a value already reported (or about its parent/child) says the same thing twice.
  const related = (p: string, q: string) => p === q || p.startsWith(q + '.') || p.startsWith(q + '[') || q.startsWith(p + '.') || q.startsWith(p + '[');
  const ruleErrors = out.errors.splice(firstRule).filter((e) => !earlier.some((p) => related(e.path, p)));
  out.errors.push(...ruleErrors);
  // What the node needs beyond the file, added and said (a warning each): no_proxy's own addresses.
  completeNoProxy(config, out);
  const errors = sortFindings(out.errors);
  const warnings = sortFindings(out.warnings);
  return { valid: errors.length === 0, errors, warnings, config: applyDefaults(config) };
}

/** Normalises and validates one already-parsed object (no positions: findings carry paths only). */
export function validateRawConfig(raw: unknown, opts: ValidateOptions = {}): ValidationResult {
  const src: SourceInfo = { name: opts.source ?? '<config>' };
  return validateSources([normaliseRaw(raw, src)], opts);
}
