/**
 * The console's install: the config it confirmed is written to a file (0600), a redacted copy goes to
 * the console log, and that file is installed through the same pipeline `hvinstall install --config
 * FILE --yes` runs (prepareInstall, then runInstall with its journal and progress events). So the
 * disk gets exactly the file the operator saw, and a shell can resume it with the same command.
 */
import { stringify } from 'yaml';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import type { Logger } from '../../lib/logger.js';
import { redactConfig } from '../../config/redact-config.js';
import type { HarvesterConfig } from '../../config/types.js';
import type { InstallPlan } from '../disk/types.js';
import { resolveAgentArg } from '../steps/agent-source.js';
import { resolveBundleSource } from '../steps/bundle-source.js';
import { runInstall, type InstallOutcome } from '../steps/pipeline.js';
import { installInputs, prepareInstall } from '../steps/prepare.js';
import { EventBus, type StampedEvent } from '../steps/progress.js';
import { TEST_KILL_ENV } from '../steps/test-faults.js';

/** The config file as the console writes it: canonical keys, YAML 1.1 quoting (as Harvester's yaml.v3 reads it). */
export function configFileText(config: HarvesterConfig, when: Date): string {
  const body = stringify(config, { version: '1.1', lineWidth: 0 });
  return `# Written by hvinstall console on ${when.toISOString()}; installed as it is.\n# Keys are Harvester's canonical (json) spellings; \`hvinstall validate\` reads it.\n${body}`;
}

export async function writeConsoleConfig(file: string, config: HarvesterConfig, log: Logger): Promise<string> {
  const text = configFileText(config, new Date());
  await writeFileAtomic(file, text, { mode: 0o600 });
  log.info('config written', { file, config: redactConfig(config) });
  return text;
}

export interface ConsoleInstallOptions {
  configFile: string;
  source?: string;
  bundle?: string;
  /** --agent DIR|none; default the installer's payload, as for hvinstall install. */
  agent?: string;
  stateDir: string;
  systemSizeMiB?: number;
  log: Logger;
  onEvent(e: StampedEvent): void;
  signal?: AbortSignal;
}

export interface ConsoleInstallResult {
  plan?: InstallPlan;
  outcome?: InstallOutcome;
  /** Refused before the pipeline started (config, source, plan): nothing was touched. */
  refused?: unknown;
}

/** The resume command a shell can run (the same install, from its journal). */
export function resumeCommand(o: Pick<ConsoleInstallOptions, 'configFile' | 'source' | 'bundle' | 'agent' | 'stateDir' | 'systemSizeMiB'>): string {
  return [
    'hvinstall install --config',
    o.configFile,
    ...(o.source ? ['--source', o.source] : []),
    ...(o.bundle ? ['--bundle', o.bundle] : []),
    ...(o.agent ? ['--agent', o.agent] : []),
    ...(o.systemSizeMiB ? ['--system-size', String(o.systemSizeMiB)] : []),
    '--state-dir',
    o.stateDir,
    '--yes',
  ].join(' ');
}

export async function installFromConsole(o: ConsoleInstallOptions): Promise<ConsoleInstallResult> {
  let prepared;
  let bundle;
  let inputs;
  try {
    bundle = await resolveBundleSource(o.bundle);
    const agent = await resolveAgentArg(o.agent);
    prepared = await prepareInstall({ configPath: o.configFile, source: o.source, requireSource: true, systemSizeMiB: o.systemSizeMiB, agent });
    inputs = installInputs(prepared);
  } catch (err) {
    o.log.error('install refused before it started', { error: (err as Error).message });
    return { refused: err };
  }
  for (const w of prepared.warnings) o.log.warn('config warning', { warning: w });
  const bus = new EventBus([{ event: (e) => o.onEvent(e) }], prepared.redactor);
  bus.addSink({ event: (e) => o.log.info('install event', e as unknown as Record<string, unknown>) });
  const outcome = await runInstall({
    ...inputs,
    bundle,
    stateDir: o.stateDir,
    bus,
    signal: o.signal,
    killPoint: process.env[TEST_KILL_ENV] || undefined,
  });
  bus.close();
  return { plan: prepared.plan, outcome };
}
