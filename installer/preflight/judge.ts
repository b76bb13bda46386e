/**
 * Which machine an install is judged against, and the verdict. Pure.
 *  - An install that installs the machine it runs on (automatic mode, the console, `install`
 *    without --device) is judged on this machine's facts, by Harvester's gate (gate.ts).
 *  - A disk built here for another machine (`install --device` onto a loop device, `image`) is
 *    judged on that machine's facts when they are given (--facts: `hvinstall preflight --json` run
 *    there), its CPUs, memory, firmware and NICs, not this machine's; without them the verdict says
 *    plainly that no machine was checked.
 */
import type { HarvesterConfig } from '../../config/types.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import type { MachineFacts } from './types.js';
import { runPreflightChecks } from './checks.js';
import type { ImageBootFacts } from './checks/hardware.js';
import { decideInstallGate, gateLines, type GateMode, type InstallGate } from './gate.js';
import type { PreflightReport } from './report.js';
import { THRESHOLDS } from './thresholds.js';

export type GateTarget =
  | { kind: 'this-machine'; mode: GateMode; facts: MachineFacts; aliases?: Record<string, string>; image?: ImageBootFacts; allowLegacyBios?: boolean }
  /** `why`: what makes the disk another machine's (e.g. "--device /dev/loop3 is a loop device"). */
  | { kind: 'other-machine'; why: string; facts?: MachineFacts; factsFrom?: string; allowLegacyBios?: boolean };

export interface GateVerdict {
  /** What was judged: `this machine`, `the facts in F`, or `no machine`. */
  checked: string;
  report?: PreflightReport;
  gate: InstallGate;
  /** The checks, the decision and what would override it, one item a line (log, events, report). */
  lines: string[];
}

const FACTS_HINT = "pass --facts FILE ('hvinstall preflight --json > FILE' on the machine the disk is for) to check it against Harvester's requirements";

export function judgeInstall(target: GateTarget, config: HarvesterConfig): GateVerdict {
  const skipchecks = config.install?.skipchecks === true;
  if (target.kind === 'this-machine') {
    const report = runPreflightChecks(target.facts, { config, profile: 'testing', aliases: target.aliases, image: target.image });
    const gate = decideInstallGate(report, { mode: target.mode, skipchecks, allowLegacyBios: target.allowLegacyBios });
    return { checked: 'this machine', report, gate, lines: gateLines(report, gate) };
  }
  if (!target.facts) {
    const gate: InstallGate = {
      proceed: true,
      needsAcknowledgement: false,
      blocking: [],
      acknowledge: [],
      overridden: [],
      message: `no machine was checked: ${target.why}, so the disk is for another machine and this one's hardware says nothing about it (its management NICs are not matched against any machine and kubelet's reserved CPU is computed for ${THRESHOLDS.testing.cpuCores} CPUs, Harvester's minimum); ${FACTS_HINT}`,
    };
    return { checked: 'no machine', gate, lines: [`decision: ${gate.message}`] };
  }
  const report = runPreflightChecks(target.facts, { config, profile: 'testing', disks: false });
  const gate = decideInstallGate(report, { mode: 'unattended', skipchecks, allowLegacyBios: target.allowLegacyBios });
  const checked = `the facts in ${target.factsFrom ?? '--facts'}`;
  return { checked, report, gate, lines: [`checked: ${checked} (${target.why})`, ...gateLines(report, gate)] };
}

/**
 * The facts the node's files are rendered with when the disk is for another machine: its --facts,
 * or a stand-in knowing nothing of it but Harvester's minimum CPU count (no NICs: names stay as the
 * config gives them, no DHCP address of this machine is recorded). Undefined: this machine's.
 */
export function nodeFactsFor(target: GateTarget): MachineFacts | undefined {
  if (target.kind === 'this-machine') return undefined;
  if (target.facts) return target.facts;
  const cpus = THRESHOLDS.testing.cpuCores;
  return { sysroot: '/', cpu: { cores: cpus, threads: cpus, vmx: false, svm: false, devKvm: false }, memoryBytes: 0, firmware: { uefi: true }, virtualization: { isVm: false }, disks: [], nics: [] };
}

export type GateDecision = 'passed' | 'acknowledged' | 'overridden' | 'unchecked' | 'refused';

/** The verdict in one word, for events and logs. */
export function gateDecision(v: GateVerdict): GateDecision {
  if (!v.gate.proceed) return 'refused';
  if (!v.report) return 'unchecked';
  if (v.gate.needsAcknowledgement) return 'acknowledged';
  return v.gate.overridden.length > 0 ? 'overridden' : 'passed';
}

/** The progress event of a verdict (installer/steps/progress.ts `gate`). */
export function gateEvent(v: GateVerdict): { type: 'gate'; decision: GateDecision; checked: string; lines: string[] } {
  return { type: 'gate', decision: gateDecision(v), checked: v.checked, lines: v.lines };
}

/** The error a refused install ends with: every line of the verdict, exit 1 (a check failed), nothing touched. */
export function gateRefusal(v: GateVerdict): HvError {
  return new HvError(`install refused by Harvester's hardware gate (${v.checked}); no disk was touched:\n${v.lines.map((l) => `  ${l}`).join('\n')}`, {
    where: v.checked,
    hint: v.gate.override,
    exitCode: ExitCode.checkFailed,
  });
}
