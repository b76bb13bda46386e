/**
 * The hardware gate's effects for `hvinstall install` and `hvinstall image`: which machine the disk
 * is for, the verdict (installer/preflight/judge.ts, pure), and where it goes: the progress stream
 * (the install log on COS_OEM, hvpxe) and, when it refuses, the error the command ends with.
 */
import { readFile, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { ExitCode, HvError } from '../../lib/errors.js';
import { Host } from '../../lib/host.js';
import type { HarvesterConfig } from '../../config/types.js';
import { gateEvent, gateRefusal, judgeInstall, resolveConfigAliases, type GateMode, type GateTarget, type GateVerdict, type MachineFacts } from '../preflight/index.js';
import type { EventBus } from '../steps/progress.js';

/** The --facts file: a MachineFacts (what `hvinstall preflight --json` prints). */
export async function readFactsFile(file: string | undefined): Promise<{ facts: MachineFacts; from: string } | undefined> {
  if (file === undefined) return undefined;
  const text = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    throw new HvError(`--facts ${file}: ${err.code ?? err.message}`, { where: '--facts', exitCode: ExitCode.usage });
  });
  let facts: MachineFacts;
  try {
    facts = JSON.parse(text) as MachineFacts;
  } catch (err) {
    throw new HvError(`--facts ${file} is not JSON: ${(err as Error).message}`, { where: '--facts', hint: "write it with 'hvinstall preflight --json > FILE' on the machine the disk is for", exitCode: ExitCode.usage });
  }
  if (!facts || typeof facts !== 'object' || typeof facts.cpu?.threads !== 'number' || !Array.isArray(facts.nics) || typeof facts.firmware?.uefi !== 'boolean') {
    throw new HvError(`--facts ${file} is not a machine's facts (no cpu.threads, nics or firmware.uefi)`, { where: '--facts', hint: "write it with 'hvinstall preflight --json > FILE' on the machine the disk is for", exitCode: ExitCode.usage });
  }
  return { facts, from: file };
}

/** A loop device (or a path resolving to one): a disk made here from a file, not this machine's disk. */
export async function isLoopDevice(device: string): Promise<boolean> {
  const real = await realpath(device).catch(() => device);
  const name = path.basename(real);
  if (/^loop\d+$/.test(name)) return true;
  return stat(`/sys/block/${name}/loop`).then(() => true, () => false);
}

/**
 * Which machine `install` installs: this one, unless --device names a loop device (a disk built here
 * for another machine, judged by --facts when given). `image` always builds for another machine.
 */
export type InstallTarget = Extract<GateTarget, { kind: 'other-machine' }> | { kind: 'this-machine'; allowLegacyBios?: boolean };

export async function installTargetOf(device: string | undefined, facts: { facts: MachineFacts; from: string } | undefined, allowLegacyBios: boolean): Promise<InstallTarget> {
  if (device && (await isLoopDevice(device))) {
    return { kind: 'other-machine', why: `--device ${device} is a loop device`, facts: facts?.facts, factsFrom: facts?.from, allowLegacyBios };
  }
  if (facts) throw new HvError(`--facts is for a disk built here for another machine, and --device ${device} is not a loop device: it is this machine's disk`, { where: '--facts', exitCode: ExitCode.usage });
  return { kind: 'this-machine', allowLegacyBios };
}

/**
 * The verdict for a prepared install: this machine's facts (those the plan was made with) for this
 * machine, else the other machine's. Throws the refusal (exit 1) when the gate says no.
 */
export async function judgeTarget(target: InstallTarget, config: HarvesterConfig, here: MachineFacts, mode: GateMode): Promise<GateVerdict> {
  const full: GateTarget =
    target.kind === 'this-machine' ? { kind: 'this-machine', mode, facts: here, aliases: await resolveConfigAliases(here, config, new Host('/')), allowLegacyBios: target.allowLegacyBios } : target;
  const verdict = judgeInstall(full, config);
  if (!verdict.gate.proceed) throw gateRefusal(verdict);
  return verdict;
}

/** The verdict into the progress stream, so the install log and hvpxe keep it with the install. */
export function emitGate(bus: EventBus, verdict: GateVerdict): void {
  bus.emit(gateEvent(verdict));
}
