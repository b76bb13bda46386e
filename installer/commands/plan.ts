/**
 * `hvinstall plan --config F [--device D] [--source S] [--agent DIR|none] [--system-size MiB] [--facts FILE] [--json]`:
 * prints what an install would do — partition table, images, files, steps — without touching a disk.
 */
import { HvError, ExitCode } from '../../lib/errors.js';
import { formatPlanText } from '../disk/format-plan.js';
import { findDisk, targetInUseProblems } from '../disk/plan.js';
import { prepareInstall } from '../steps/prepare.js';
import { busyHolders } from '../steps/holders.js';
import { resolveAgentArg, type AgentSource } from '../steps/agent-source.js';
import { parseCommandArgs } from './args.js';
import type { OptionDefs } from '../../lib/cli/definition.js';
import type { MachineFacts } from '../preflight/types.js';

export const USAGE = `usage: hvinstall plan --config FILE [--device DISK] [--source DIR|SQUASHFS] [--agent DIR|none] [--system-size MIB]
                     [--facts FACTS.json] [--json]

Prints the partition table (start, size, label, fs, mount), the images, the files and the steps an
install would use, and what it would refuse. Touches no disk.
  --config FILE      the config.yaml (path, http(s) URL or -)
  --device DISK      the install disk when the config does not name it (must match install.device when it does)
  --source S         the OS tree or squashfs, to size active.img (default: Harvester's 3072 MiB), to see
                     who bootstraps it (rancherd or hvagent) and its release versions, and to check it has
                     a place for hvagent
  --agent DIR|none   the hvagent payload (default: the installer's own), as for install
  --system-size MIB  active.img size (elemental's system.size)
  --facts FILE       plan against machine facts captured as JSON (hvinstall preflight --json)
  --json             the plan as JSON
Exit codes: 0 the install could proceed, 1 it would be refused, 2 usage error.`;

/** What the parser accepts: --help, completion and the man page read the same object. */
export const OPTIONS = {
  config: { type: 'string' },
  device: { type: 'string' },
  source: { type: 'string' },
  agent: { type: 'string' },
  'system-size': { type: 'string' },
  facts: { type: 'string' },
  json: { type: 'boolean' },
} as const satisfies OptionDefs;

export default async function plan(argv: string[]): Promise<number> {
  const args = parseCommandArgs(argv, OPTIONS, USAGE);
  if (!args) return ExitCode.ok;
  const { values } = args;
  if (!values.config) throw new HvError('--config is required', { hint: USAGE, exitCode: ExitCode.usage });
  const systemSizeMiB = parseSystemSize(values['system-size']);
  const prepared = await prepareInstall({
    configPath: values.config,
    device: values.device,
    source: values.source,
    requireSource: false,
    systemSizeMiB,
    factsFile: values.facts,
    // Without an explicit --agent, a build without the payload still plans (the install would refuse).
    agent: values.agent !== undefined ? await resolveAgentArg(values.agent) : await resolveAgentArg(undefined).catch((err: Error): AgentSource => ({ kind: 'none', why: err.message })),
  });
  const target = findDisk(prepared.facts, prepared.plan.device)!;
  // Idle LVM/MD/dm holders are deactivated by the install; only busy ones refuse it (on this machine).
  const refusals = targetInUseProblems(target, values.facts ? {} : { busyHolders: await busyHolders(target.inUse.holders) });
  const machine = machineLine(prepared.facts, values.facts);
  if (values.json) {
    process.stdout.write(JSON.stringify({ plan: prepared.plan, refusals, warnings: prepared.warnings, machine }, null, 2) + '\n');
  } else {
    for (const w of prepared.warnings) process.stderr.write(`warning: ${w}\n`);
    process.stdout.write(`Machine: ${machine}\n\n${formatPlanText(prepared.plan)}`);
    if (refusals.length) process.stdout.write(`\nThe install would be refused now:\n${refusals.map((r) => `  - ${r}`).join('\n')}\n`);
  }
  return refusals.length ? ExitCode.checkFailed : ExitCode.ok;
}

/** Whose facts the plan (and the files it renders) used: this machine's unless --facts said otherwise, and what they are. */
export function machineLine(facts: MachineFacts, factsFile: string | undefined): string {
  const nics = facts.nics.filter((n) => !n.loopback && !n.virtual).map((n) => n.name);
  const what = `${facts.cpu.threads} CPUs, ${facts.firmware.uefi ? 'UEFI' : 'legacy BIOS'}, NICs ${nics.join(', ') || '(none)'}`;
  return factsFile ? `the facts in ${factsFile} (${what})` : `this machine (${what}); the node's files use its CPU count and NIC names: pass --facts FILE for another machine`;
}

export function parseSystemSize(v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v) || Number(v) < 64) throw new HvError(`--system-size ${v}: give whole MiB, at least 64`, { exitCode: ExitCode.usage });
  return Number(v);
}
