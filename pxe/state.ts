/**
 * What `hvpxe serve` serves, built in one go from profiles.yaml and --root: the catalogue, every
 * machine's rendered config (validated with the one validator), and the checked artifacts.
 * Built at start-up and on SIGHUP; a state that fails to build never replaces a working one.
 */
import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { stringify } from 'yaml';
import { HvError, ExitCode } from '../lib/errors.js';
import { Redactor } from '../lib/redact.js';
import type { ValidationResult } from '../config/types.js';
import { configSecrets } from '../config/secrets.js';
import { bootChainOf, buildCatalog, defaultMachine, readProfiles, type Catalog, type Machine } from './profiles.js';
import { checkSignedChain } from './signed-chain.js';
import { asInstallSees, renderMachineConfig, RenderError } from './render-config.js';
import { checkRequestPath, openInsideRoot, servedPrivatePaths } from './safe-path.js';
import { fleetConflicts, fleetFacts, type FleetFacts } from './fleet-conflicts.js';

export type Validator = (raw: unknown, opts: { source?: string }) => Promise<ValidationResult>;

export interface ServedState {
  catalog: Catalog;
  serverUrl: string;
  rootReal: string;
  /** Rendered config YAML of every explicit machine, by machine name. */
  configs: Map<string, string>;
  /** Declared artifacts by their path under the root; `origin`: not under the root, fetched from --artifacts-origin. */
  artifactsByPath: Map<string, { name: string; sha256: string; size: number; origin?: boolean }>;
  /** Every secret in any served config, for log redaction. */
  redactor: Redactor;
  loadedAt: string;
}

export interface LoadStateOptions {
  root: string;
  profilesPath: string;
  serverUrl: string;
  validate: Validator;
  /** Skip hashing artifacts (tests of unrelated behaviour); the CLI always verifies. */
  verifyArtifacts?: boolean;
  /** Files and directories that must not be under the root (profiles.yaml, keys, the history). */
  notServed?: Array<{ what: string; path: string }>;
  /** --artifacts-origin: a declared artifact missing under the root is fetched from there (artifact-origin.ts). */
  origin?: boolean;
}

/** Placeholder MAC used to render and validate a default group's template at start-up. */
export const SAMPLE_MAC = '02:00:00:00:00:01';

const hashCache = new Map<string, { key: string; sha256: string }>();

async function sha256File(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 })) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** sha256 of a file, cached by (dev, ino, size, mtime) so a reload does not re-read unchanged ISOs. */
export async function cachedSha256(file: string): Promise<string> {
  const s = await stat(file);
  const key = `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}`;
  const hit = hashCache.get(file);
  if (hit?.key === key) return hit.sha256;
  const sha256 = await sha256File(file);
  hashCache.set(file, { key, sha256 });
  return sha256;
}

export function serialiseServedConfig(m: Machine, cfg: Record<string, unknown>): string {
  return `# Rendered by hvpxe for machine ${m.name} (group ${m.group}, profile ${m.profile}).\n${stringify(cfg, { lineWidth: 0 })}`;
}

/**
 * The validator's errors, and its placeholder warnings: Harvester installs a `change-me` token as
 * written, but a server handing it to every machine that boots would build a fleet on it.
 */
function formatFindings(prefix: string, r: ValidationResult): string[] {
  return [...r.errors, ...r.warnings.filter((f) => f.kind === 'placeholder')].map((f) => `${prefix}: ${f.path ? `${f.path}: ` : ''}${f.message}${f.hint ? ` (${f.hint})` : ''}`);
}

/** Throws (exit 2) when profiles.yaml, a key or the state directory is under the served root. */
export async function refuseServedPrivatePaths(root: string, notServed: Array<{ what: string; path: string }>): Promise<void> {
  const rootReal = await realpath(root).catch(() => undefined);
  const exposed = rootReal ? await servedPrivatePaths(rootReal, notServed) : [];
  if (exposed.length > 0) throw new HvError(exposed.join('\n'), { where: root, hint: 'keep profiles.yaml, TLS keys, the admin token and --state-dir outside --root', exitCode: ExitCode.usage });
}

export async function loadState(opts: LoadStateOptions): Promise<ServedState> {
  const file = await readProfiles(opts.profilesPath);
  const catalog = buildCatalog(file, opts.profilesPath);
  let rootReal: string;
  try {
    rootReal = await realpath(opts.root);
    if (!(await stat(rootReal)).isDirectory()) throw new Error('not a directory');
  } catch (err) {
    throw new HvError(`--root ${opts.root} is not a readable directory: ${(err as Error).message}`, { where: opts.root });
  }
  await refuseServedPrivatePaths(rootReal, opts.notServed ?? []);
  const errors: string[] = [];
  const artifactsByPath: ServedState['artifactsByPath'] = new Map();
  for (const [name, a] of Object.entries(file.artifacts)) {
    const where = `artifacts.${name} (${a.path})`;
    const check = checkRequestPath(a.path);
    if (!check.ok) {
      errors.push(`${where}: path not servable: ${check.reason}`);
      continue;
    }
    const opened = await openInsideRoot(rootReal, check.segments);
    if (!opened && opts.origin) {
      // Verified against its sha256 when it is fetched; never served otherwise.
      artifactsByPath.set(check.segments.join('/'), { name, sha256: a.sha256.toLowerCase(), size: -1, origin: true });
      continue;
    }
    if (!opened) {
      errors.push(`${where}: no such regular file under ${opts.root} (or it resolves outside it)`);
      continue;
    }
    await opened.fh.close();
    if (opts.verifyArtifacts !== false) {
      const actual = await cachedSha256(opened.real);
      if (actual !== a.sha256.toLowerCase()) errors.push(`${where}: sha256 mismatch: profiles.yaml says ${a.sha256.toLowerCase()}, the file has ${actual}`);
    }
    artifactsByPath.set(check.segments.join('/'), { name, sha256: a.sha256.toLowerCase(), size: opened.stat.size });
  }

  const signed = Object.entries(file.profiles).filter(([, p]) => bootChainOf(p) === 'grub-signed').map(([n]) => n);
  if (signed.length > 0) errors.push(...(await checkSignedChain(rootReal)).map((e) => `profile${signed.length === 1 ? '' : 's'} ${signed.join(', ')} (boot: grub-signed): ${e}`));

  const rendered = await renderAndValidateConfigs(catalog, opts.serverUrl, opts.validate);
  errors.push(...rendered.errors);
  const { configs, redactor } = rendered;
  if (errors.length > 0) {
    throw new HvError(`${opts.profilesPath}: ${errors.length} problem${errors.length === 1 ? '' : 's'} in what hvpxe would serve:\n${errors.map((e) => `  - ${redactor.redactString(e)}`).join('\n')}`, {
      where: opts.profilesPath,
      hint: 'fix the profile, machine or artifact named above; the validator is the same one `hvinstall validate` uses',
      exitCode: ExitCode.checkFailed,
    });
  }
  return { catalog, serverUrl: opts.serverUrl, rootReal, configs, artifactsByPath, redactor, loadedAt: new Date().toISOString() };
}

/** Renders every config hvpxe can serve (each explicit machine, the default group for a sample MAC) and validates it. */
export async function renderAndValidateConfigs(
  catalog: Catalog,
  serverUrl: string,
  validate: Validator,
): Promise<{ configs: Map<string, string>; errors: string[]; redactor: Redactor }> {
  const errors: string[] = [];
  const configs = new Map<string, string>();
  const redactor = new Redactor();
  const facts: FleetFacts[] = [];
  const toCheck: Array<{ m: Machine; label: string }> = catalog.machines.map((m) => ({ m, label: `machine ${m.name} (group ${m.group})` }));
  if (catalog.defaultGroup) {
    toCheck.push({ m: defaultMachine(catalog.defaultGroup, SAMPLE_MAC), label: `default group ${catalog.defaultGroup.name} (rendered for sample MAC ${SAMPLE_MAC})` });
  }
  for (const { m, label } of toCheck) {
    let cfg: Record<string, unknown>;
    try {
      cfg = renderMachineConfig(catalog, m, serverUrl);
    } catch (err) {
      if (err instanceof RenderError) {
        errors.push(`${label}: ${err.message}`);
        continue;
      }
      throw err;
    }
    let result: ValidationResult;
    try {
      result = await validate(asInstallSees(cfg), { source: `${label}` });
    } catch (err) {
      throw new HvError(`cannot validate configs: ${(err as Error).message}`, { exitCode: ExitCode.usage });
    }
    redactor.add(...configSecrets(result.config));
    errors.push(...formatFindings(label, result));
    if (!m.viaDefault) {
      configs.set(m.name, serialiseServedConfig(m, cfg));
      facts.push(fleetFacts(m.name, result.config));
    }
  }
  errors.push(...fleetConflicts(facts));
  return { configs, errors, redactor };
}
