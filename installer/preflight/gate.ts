/**
 * What the install does with a preflight report (Harvester's skipchecks semantics, harvester/harvester-installer pkg/console/install_panels.go
 * and pkg/preflight/checks.go). Pure.
 *  - Hard failures (missing/mounted/boot-medium disk, legacy BIOS, unknown NIC) always stop it.
 *  - Other failures: automatic mode aborts unless install.skipchecks; the console asks the
 *    operator to acknowledge them (continuing counts as acknowledgement) unless skipchecks.
 *  - Warnings never stop an install.
 */
import type { PreflightCheck, PreflightReport } from './report.js';

export interface GateInput {
  automatic: boolean;
  skipchecks: boolean;
}

export interface InstallGate {
  /** The install may go on (in interactive mode: after acknowledgement if `needsAcknowledgement`). */
  proceed: boolean;
  needsAcknowledgement: boolean;
  /** Failures that stop the install. */
  blocking: PreflightCheck[];
  /** Failures let through by install.skipchecks (log them). */
  overridden: PreflightCheck[];
  message: string;
}

function names(cs: PreflightCheck[]): string {
  return cs.map((c) => (c.subject ? `${c.id} (${c.subject})` : c.id)).join(', ');
}

export function decideInstallGate(report: PreflightReport, input: GateInput): InstallGate {
  const fails = report.checks.filter((c) => c.result === 'fail');
  const hard = fails.filter((c) => !c.skippable);
  const soft = fails.filter((c) => c.skippable);
  if (hard.length > 0) {
    return {
      proceed: false,
      needsAcknowledgement: false,
      blocking: [...hard, ...(input.skipchecks ? [] : soft)],
      overridden: [],
      message: `preflight failed: ${names(hard)}; install.skipchecks cannot override these`,
    };
  }
  if (soft.length === 0) {
    return { proceed: true, needsAcknowledgement: false, blocking: [], overridden: [], message: 'preflight passed' };
  }
  if (input.skipchecks) {
    return {
      proceed: true,
      needsAcknowledgement: false,
      blocking: [],
      overridden: soft,
      message: `preflight failures overridden by install.skipchecks: ${names(soft)}`,
    };
  }
  if (input.automatic) {
    return {
      proceed: false,
      needsAcknowledgement: false,
      blocking: soft,
      overridden: [],
      message: `preflight failed in automatic mode: ${names(soft)}; set install.skipchecks: true (or harvester.install.skipchecks=true) to install anyway`,
    };
  }
  return {
    proceed: true,
    needsAcknowledgement: true,
    blocking: [],
    overridden: [],
    message: `preflight failures need the operator's acknowledgement: ${names(soft)}`,
  };
}
