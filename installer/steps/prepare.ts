/** What both `hvinstall plan` and `hvinstall install` do first: config, machine facts, plan. */
import { readFile } from 'node:fs/promises';
import { HvError, ExitCode } from '../../lib/errors.js';
import { Host } from '../../lib/host.js';
import { Redactor } from '../../lib/redact.js';
import { configSecrets, loadConfig } from '../../config/index.js';
import type { HarvesterConfig } from '../../config/types.js';
import type { OsSource } from '../disk/contracts.js';
import { findDisk, planInstall } from '../disk/plan.js';
import type { InstallPlan } from '../disk/types.js';
import type { MachineFacts } from '../preflight/types.js';
import { formatDiskChoice, gatherMachineFacts, selectDisks, type DiskSelection } from '../preflight/index.js';
import { resolveSource, sourceSizeBytes } from './source.js';
import { withRenderedFileList } from './content-steps.js';
import { agentForImage, withAgentPlan, type AgentSource } from './agent-source.js';
import { imageFactsOf } from './image-facts.js';
import type { RunInstallOptions } from './run-options.js';
import { inspectBootChain } from '../bootloader/image-chain-source.js';

export interface PrepareOptions {
  configPath: string;
  /** An already loaded and validated config (automatic mode fetched it); configPath then only names it. */
  loaded?: { config: HarvesterConfig; warnings: string[] };
  device?: string;
  /** --source; when absent the live root (install) or no source at all (plan). */
  source?: string;
  requireSource: boolean;
  systemSizeMiB?: number;
  /** Plan against captured facts (JSON) instead of this machine. */
  factsFile?: string;
  /** The hvagent from --agent (resolveAgentArg): checked against the image here, before any disk is touched. */
  agent?: AgentSource;
  /** The ISO root's harvester-release.yaml (automatic mode), read with the source's own. */
  isoRelease?: string;
  /** The machine the node is for when it is not this one (RunInstallOptions.nodeFacts): the render uses it. */
  nodeFacts?: MachineFacts;
}

export interface Prepared {
  config: HarvesterConfig;
  warnings: string[];
  facts: MachineFacts;
  plan: InstallPlan;
  source?: OsSource;
  redactor: Redactor;
  /** The agent this install puts on the node (undefined when none was asked about). */
  agent?: AgentSource;
  nodeFacts?: MachineFacts;
}

/**
 * What runInstall takes from an install's preparation: the plan, the config, the redactor, and the
 * OS source and agent decision an install is prepared with (requireSource, resolveAgentArg).
 */
export function installInputs(p: Prepared): Pick<RunInstallOptions, 'plan' | 'config' | 'source' | 'agent' | 'redactor' | 'nodeFacts'> {
  if (!p.source || !p.agent) {
    throw new HvError(`the install of ${p.plan.device} was prepared without ${p.source ? 'an agent decision' : 'an OS source'}`, {
      where: 'installer/steps/prepare.ts',
      hint: 'prepare an install with requireSource: true and the agent from resolveAgentArg',
      exitCode: ExitCode.installFailed,
    });
  }
  return { plan: p.plan, config: p.config, source: p.source, agent: p.agent, redactor: p.redactor, nodeFacts: p.nodeFacts };
}

export async function loadInstallConfig(configPath: string): Promise<{ config: HarvesterConfig; warnings: string[] }> {
  const loaded = await loadConfig(configPath);
  const fmt = (f: { path: string; message: string; line?: number; column?: number; source?: string }) =>
    `${f.source ?? configPath}${f.line ? `:${f.line}${f.column ? `:${f.column}` : ''}` : ''}: ${f.path ? `${f.path}: ` : ''}${f.message}`;
  if (!loaded.valid) {
    throw new HvError(`the config is not valid:\n${loaded.errors.map((e) => `  - ${fmt(e)}`).join('\n')}`, {
      where: loaded.source,
      hint: 'run `hvinstall validate` on it and fix what it reports',
      exitCode: ExitCode.checkFailed,
    });
  }
  return { config: loaded.config, warnings: loaded.warnings.map(fmt) };
}

export async function gatherFacts(factsFile?: string): Promise<MachineFacts> {
  if (factsFile) return JSON.parse(await readFile(factsFile, 'utf8')) as MachineFacts;
  return gatherMachineFacts(new Host('/'));
}

/**
 * The config's disk rules resolved on this machine: the config names the chosen disks by path (as
 * /oem/harvester.config records them). A rule that chooses nothing refuses with every disk and why.
 */
export function resolveDiskRules(config: HarvesterConfig, facts: MachineFacts): DiskSelection {
  const selection = selectDisks(config, facts, (name) => findDisk(facts, name));
  const refused = selection.choices.filter((c) => !c.path);
  if (refused.length) {
    throw new HvError(`no disk was chosen, and none was touched:\n${refused.flatMap(formatDiskChoice).map((l) => `  ${l}`).join('\n')}`, {
      where: refused.map((c) => c.key).join(', '),
      hint: 'change the rule (a tie_break picks one of several matches) or name the disk by path',
      exitCode: ExitCode.checkFailed,
    });
  }
  return selection;
}

export async function prepareInstall(opts: PrepareOptions): Promise<Prepared> {
  const loaded = opts.loaded ?? (await loadInstallConfig(opts.configPath));
  const warnings = loaded.warnings;
  const given = loaded.config.install;
  // A device given only on the command line is recorded in the config, as the node will read it.
  const named: HarvesterConfig = given?.device || given?.deviceSelector || !opts.device ? loaded.config : { ...loaded.config, install: { ...given, device: opts.device } };
  const redactor = new Redactor().add(...configSecrets(named));
  const source = opts.source || opts.requireSource ? await resolveSource(opts.source) : undefined;
  const facts = await gatherFacts(opts.factsFile);
  const selection = resolveDiskRules(named, facts);
  const config = selection.config;
  // Read before any disk is touched: an image with rancherd but no versions fails the render here.
  const image = source ? await imageFactsOf(source, { isoRelease: opts.isoRelease }) : undefined;
  const rendered = withRenderedFileList(
    config,
    opts.nodeFacts ?? facts,
    planInstall(config, facts, {
      device: opts.device,
      systemSizeMiB: opts.systemSizeMiB,
      sourceSizeBytes: source ? await sourceSizeBytes(source) : undefined,
    }),
    image,
  );
  const agent = opts.agent && source ? await agentForImage(opts.agent, source, rendered.persistentStatePaths) : opts.agent;
  const plan = agent ? withAgentPlan(rendered, agent, !!source) : rendered;
  if (selection.choices.length) plan.diskChoices = selection.choices;
  // Also before any disk is touched: an incomplete chain or a grub.cfg that does not parse refuses here.
  if (source) plan.bootChain = await inspectBootChain(source, plan.firmware);
  return { config, warnings, facts, plan, source, redactor, agent, nodeFacts: opts.nodeFacts };
}
