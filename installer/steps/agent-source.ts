/**
 * Which hvagent the install puts on the node (`--agent DIR|none`), decided before any disk is touched:
 * the payload directory and its manifest, or none and why. Default: the payload the installer
 * carries (`make build` writes it to build/hvagent-payload next to the installer's package.json; the
 * live system carries the same directory under /opt/hvinstall).
 *
 * The image must have a usable slot for it (agent-slot.ts). An explicit `--agent DIR` that does not
 * fit the image refuses the install. The default refuses too, with one exception: an image without
 * systemd at all (and nothing else wrong) gets no agent, said loudly — nothing could start the unit
 * there, and such an image is not Harvester's (this project's busybox test OS is one).
 */
import { existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { MANIFEST_FILE, payloadSize, readPayloadManifest, releaseId, type PayloadManifest } from '../../node/payload-layout.js';
import { formatBytes } from '../../config/disk-sizes.js';
import type { OsSource } from '../disk/contracts.js';
import type { InstallPlan } from '../disk/types.js';
import { agentPlannedFiles } from './agent-deploy.js';
import { scanTree } from './bundle-copy.js';
import { imageReader, judgeAgentSlot, readAgentSlotFacts, type AgentSlotFacts } from './agent-slot.js';

export type AgentSource =
  | { kind: 'payload'; dir: string; origin: '--agent' | 'the installer'; manifest: PayloadManifest }
  | { kind: 'none'; why: string };

/** The installer's own root: the nearest directory above this module holding package.json. */
export function installerRoot(from = import.meta.dirname): string {
  let dir = from;
  while (!existsSync(path.join(dir, 'package.json'))) {
    const up = path.dirname(dir);
    if (up === dir) return from;
    dir = up;
  }
  return dir;
}

export const defaultAgentPayloadDir = (): string => path.join(installerRoot(), 'build/hvagent-payload');

/** What the payload directory holds that its manifest does not name, and what it lacks. Pure. */
export function payloadTreeProblems(manifest: PayloadManifest, entries: Array<{ rel: string; kind: string; size: number; mode: number }>): string[] {
  const files = new Map(manifest.files.map((f) => [f.path, f]));
  const problems: string[] = [];
  for (const e of entries) {
    if (e.kind === 'dir') continue;
    if (e.rel === MANIFEST_FILE) continue;
    const f = files.get(e.rel);
    if (!f) problems.push(`${e.rel} is not in its manifest`);
    else if (e.kind !== 'file') problems.push(`${e.rel} is a ${e.kind}, the manifest lists a file`);
    else if (e.size !== f.size) problems.push(`${e.rel} is ${e.size} bytes, the manifest says ${f.size}`);
    else if (e.mode !== f.mode) problems.push(`${e.rel} has mode ${e.mode.toString(8)}, the manifest says ${f.mode.toString(8)}`);
  }
  for (const f of manifest.files) if (!entries.some((e) => e.rel === f.path)) problems.push(`${f.path} is missing`);
  return problems;
}

/** `--agent DIR|none` before the image is known: a wrong DIR is a usage error (exit 2). */
export async function resolveAgentArg(arg: string | undefined, opts: { defaultDir?: string } = {}): Promise<AgentSource> {
  if (arg === 'none') return { kind: 'none', why: '--agent none' };
  const dir = path.resolve(arg ?? opts.defaultDir ?? defaultAgentPayloadDir());
  const st = await stat(dir).catch(() => undefined);
  if (!st?.isDirectory()) {
    throw new HvError(arg ? `--agent ${arg} ${st ? 'is not a directory' : 'does not exist'}` : `the installer carries no hvagent payload: ${dir} does not exist`, {
      hint: arg ? 'pass the payload directory `make build` writes (build/hvagent-payload), or --agent none' : 'run make build (it writes the payload), pass --agent DIR, or install without the agent: --agent none',
      exitCode: ExitCode.usage,
    });
  }
  const manifest = await readPayloadManifest(dir);
  const problems = payloadTreeProblems(manifest, await scanTree(dir));
  if (problems.length) {
    throw new HvError(`${dir} does not match its ${MANIFEST_FILE}: ${problems.slice(0, 5).join('; ')}${problems.length > 5 ? ` (and ${problems.length - 5} more)` : ''}`, {
      where: dir,
      hint: 'rebuild the payload (make build) or pass another --agent',
      exitCode: ExitCode.usage,
    });
  }
  return { kind: 'payload', dir, origin: arg ? '--agent' : 'the installer', manifest };
}

/**
 * The agent for this image: the payload when the image has a usable slot; otherwise a refusal
 * (exit 1), or — default payload, image without systemd — none with the reason.
 */
export async function agentForImage(agent: AgentSource, source: OsSource, persistentStatePaths: string[], facts?: AgentSlotFacts): Promise<AgentSource> {
  if (agent.kind === 'none') return agent;
  const slotFacts = facts ?? (await readAgentSlotFacts(await imageReader(source)));
  const verdict = judgeAgentSlot(slotFacts, agent.manifest, persistentStatePaths, source.path);
  if (verdict.problems.length === 0) return agent;
  if (agent.origin === 'the installer' && verdict.onlyNoSystemd) {
    return { kind: 'none', why: `${verdict.problems[0]} (pass --agent DIR to require it)` };
  }
  throw new HvError(
    `hvagent ${releaseId(agent.manifest)} (${agent.origin === '--agent' ? `--agent ${agent.dir}` : 'the installer\'s payload'}) has no usable place on this image:\n${verdict.problems.map((p) => `  - ${p}`).join('\n')}`,
    {
      where: source.path,
      hint: 'install an image that fits (Harvester\'s does), or install without the agent: --agent none',
      exitCode: ExitCode.checkFailed,
    },
  );
}

/** One line for the plan, the install log and the step's message. */
export function describeAgent(agent: AgentSource): string {
  if (agent.kind === 'none') return `no hvagent: ${agent.why}`;
  const s = payloadSize(agent.manifest);
  return `hvagent ${agent.manifest.version} (${releaseId(agent.manifest)}, node ${agent.manifest.node}, ${agent.manifest.arch.name}) from ${agent.origin} ${agent.dir}: ${s.files} files, ${formatBytes(s.bytes)}`;
}

/** The plan with the agent's files on COS_PERSISTENT and a note saying which agent (or none and why). Pure. */
export function withAgentPlan(plan: InstallPlan, agent: AgentSource, checked: boolean): InstallPlan {
  const note = `${describeAgent(agent)}${agent.kind === 'payload' && !checked ? ' (the image was not checked for a place for it: no --source)' : ''}`;
  return {
    ...plan,
    files: agent.kind === 'payload' ? [...plan.files, ...agentPlannedFiles(agent.manifest, plan.persistentStatePaths)] : plan.files,
    notes: [...plan.notes, note],
  };
}
