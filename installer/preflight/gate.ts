/**
 * What an install does with a preflight report: Harvester's hardware gate (harvester/harvester-installer
 * pkg/console/install_panels.go, pkg/preflight/checks.go), one decision for every front end. Pure.
 *  - Hard failures (legacy BIOS since v1.8, a missing, mounted or boot-medium disk, an unknown NIC)
 *    stop every install; nothing overrides them.
 *  - Other failures: an install nobody watches (automatic mode, `install --config --yes`) stops
 *    unless install.skipchecks; the console asks the operator to acknowledge the hardware ones
 *    (continuing counts as acknowledgement), while a disk too small for the layout still needs
 *    install.skipchecks there.
 *  - Warnings never stop an install.
 * `gateLines` words the decision once, for the log, the events and the failed-install report.
 */
import { formatDiskChoice } from './disk-select.js';
import type { PreflightCheck, PreflightReport } from './report.js';

/** Who is there to answer: the console's operator, or nobody (automatic mode, a command line). */
export type GateMode = 'automatic' | 'interactive' | 'unattended';

export interface GateInput {
  mode: GateMode;
  skipchecks: boolean;
  /**
   * This run consents to a legacy-BIOS install (hvinstall.legacy_bios on the kernel command line,
   * `install --legacy-bios`): what Harvester up to v1.7 did; v1.8 refuses it, and a config cannot ask.
   */
  allowLegacyBios?: boolean;
}

/** The check Harvester v1.8 made fatal (harvester-installer commit 360e7833, "drop BIOS support"). */
export const LEGACY_BIOS_CHECK = 'firmware.uefi';

/** Where this run consents to legacy BIOS, for each mode. */
const LEGACY_BIOS_WHERE: Record<GateMode, string> = {
  automatic: 'hvinstall.legacy_bios=true on the kernel command line',
  unattended: '--legacy-bios',
  interactive: 'hvinstall.legacy_bios=true on the kernel command line',
};

export interface InstallGate {
  /** The install may go on (interactive: after the operator acknowledges `acknowledge`). */
  proceed: boolean;
  needsAcknowledgement: boolean;
  /** Failures that stop the install. */
  blocking: PreflightCheck[];
  /** Failures the console's operator may acknowledge (Harvester's "Do you wish to proceed?"). */
  acknowledge: PreflightCheck[];
  /** Failures let through by install.skipchecks (log them). */
  overridden: PreflightCheck[];
  /** The decision in one line. */
  message: string;
  /** What would let a stopped install go on, or why nothing can; undefined when it goes on. */
  override?: string;
}

function names(cs: PreflightCheck[]): string {
  return cs.map((c) => (c.subject ? `${c.id} (${c.subject})` : c.id)).join(', ');
}

/** Where install.skipchecks is set for each mode, in the operator's words. */
const SKIPCHECKS_WHERE: Record<GateMode, string> = {
  automatic: 'harvester.install.skipchecks=true on the kernel command line (or install.skipchecks: true in the config)',
  unattended: 'install.skipchecks: true in the config',
  interactive: 'install.skipchecks: true in the config (or harvester.install.skipchecks=true on the kernel command line)',
};

/** Harvester's console lets an operator go past the hardware checks, not past a disk too small for the layout. */
function acknowledgeable(c: PreflightCheck): boolean {
  return !c.id.endsWith('.size');
}

const base = { needsAcknowledgement: false, blocking: [], acknowledge: [], overridden: [] };

export function decideInstallGate(report: PreflightReport, input: GateInput): InstallGate {
  const fails = report.checks.filter((c) => c.result === 'fail');
  const consented = input.allowLegacyBios ? fails.filter((c) => c.id === LEGACY_BIOS_CHECK) : [];
  const hard = fails.filter((c) => !c.skippable && !consented.includes(c));
  const soft = input.skipchecks ? [] : fails.filter((c) => c.skippable);
  const skipped = input.skipchecks ? fails.filter((c) => c.skippable) : [];
  const overridden = [...consented, ...skipped];
  // Only the console's operator can acknowledge, and not a disk below the minimum.
  const acknowledge = input.mode === 'interactive' ? soft.filter(acknowledgeable) : [];
  const blockingSoft = soft.filter((c) => !acknowledge.includes(c));
  const decided = { ...base, acknowledge, overridden };
  if (hard.length > 0) {
    return {
      ...decided,
      proceed: false,
      blocking: [...hard, ...blockingSoft],
      message: `preflight failed: ${names(hard)}; install.skipchecks cannot override these`,
      override: hardOverride(hard, input.mode),
    };
  }
  if (blockingSoft.length > 0) {
    const why = input.mode === 'automatic' ? 'automatic mode' : input.mode === 'unattended' ? 'nobody to acknowledge it' : "only install.skipchecks lets a disk below Harvester's minimum through";
    return { ...decided, proceed: false, blocking: blockingSoft, message: `preflight failed (${why}): ${names(blockingSoft)}`, override: `set ${SKIPCHECKS_WHERE[input.mode]} to install anyway` };
  }
  if (acknowledge.length > 0) {
    return { ...decided, proceed: true, needsAcknowledgement: true, message: `preflight failures need the operator's acknowledgement: ${names(acknowledge)}` };
  }
  if (overridden.length > 0) {
    const by = [...(consented.length ? [`preflight failures overridden by ${LEGACY_BIOS_WHERE[input.mode]}: ${names(consented)}`] : []), ...(skipped.length ? [`preflight failures overridden by install.skipchecks: ${names(skipped)}`] : [])];
    return { ...decided, proceed: true, message: by.join('; ') };
  }
  return { ...decided, proceed: true, message: 'preflight passed' };
}

/** Why nothing in the config overrides a hard failure, and, for legacy BIOS, what this run could say. */
function hardOverride(hard: PreflightCheck[], mode: GateMode): string {
  const text = `nothing overrides ${names(hard)}: ${hard.map((c) => c.whatToDo || c.message).join(' ')}`;
  if (!hard.every((c) => c.id === LEGACY_BIOS_CHECK)) return text;
  return `${text} (Harvester v1.8 refuses legacy BIOS; ${LEGACY_BIOS_WHERE[mode]} installs anyway, as Harvester v1.7 did)`;
}

/** One line a check, as the log, the events and the failed-install report show it. */
function checkLine(c: PreflightCheck): string {
  const threshold = c.threshold ? ` (needs ${c.threshold})` : '';
  return `${c.result === 'fail' ? 'FAIL' : 'WARN'} ${c.id}${c.subject ? ` ${c.subject}` : ''}: ${c.measured}${threshold}: ${c.message}`;
}

/** The checks that did not pass, the decision and what would override it, one item a line. */
export function gateLines(report: PreflightReport, gate: InstallGate): string[] {
  const lines = report.checks.filter((c) => c.result !== 'pass').map(checkLine);
  // A disk rule says which disk it took (or why none) and why each other disk was not taken: an
  // unattended install shows it where the operator watches (the console, the log, hvpxe's events).
  for (const c of report.diskChoices ?? []) lines.push(...formatDiskChoice(c));
  lines.push(`decision: ${gate.message}`);
  if (gate.override) lines.push(`to go on: ${gate.override}`);
  return lines;
}
