/**
 * The confirmation page's facts: the whole config through the validator (every finding at once),
 * the machine through preflight with that config, the install gate (what Harvester lets an operator
 * acknowledge and what nothing can override), and the plan's list of what will be destroyed. Pure
 * but for the validator's lazy import.
 */
import type { Finding, HarvesterConfig } from '../../config/types.js';
import type { InstallPlan } from '../disk/types.js';
import { decideInstallGate, runPreflightChecks, type PreflightCheck } from '../preflight/index.js';
import { validateAnswers, type CheckContext } from './checks.js';

export interface Summary {
  config: HarvesterConfig;
  errors: Finding[];
  warnings: Finding[];
  /** Preflight checks that did not pass, each with what to do. */
  checks: PreflightCheck[];
  /** Failures nothing in this run can override (the install cannot go on). */
  blocking: PreflightCheck[];
  /** Failures that continuing acknowledges (Harvester's "Do you wish to proceed?"). */
  acknowledge: PreflightCheck[];
  /** Failures let through by install.skipchecks. */
  overridden: PreflightCheck[];
  plan?: InstallPlan;
  planProblems: string[];
  /** Everything the install will destroy, as the plan lists it. */
  destroys: string[];
  canInstall: boolean;
}

export async function summarise(ctx: CheckContext, passwordAs?: (clear: string) => string): Promise<Summary> {
  const v = await validateAnswers(ctx, passwordAs);
  const config = v.config;
  const report = runPreflightChecks(ctx.facts, { config, profile: 'testing' });
  const skipchecks = config.install?.skipchecks === true || ctx.skipchecks;
  const gate = decideInstallGate(report, { mode: 'interactive', skipchecks, allowLegacyBios: ctx.allowLegacyBios });
  const { blocking, acknowledge } = gate;
  let plan: InstallPlan | undefined;
  const planProblems: string[] = [];
  if (v.valid) {
    const { planInstall, PlanRefusedError } = await import('../disk/plan.js');
    try {
      plan = planInstall(config, ctx.facts);
    } catch (err) {
      if (!(err instanceof PlanRefusedError)) throw err;
      planProblems.push(...err.problems);
    }
  }
  return {
    config,
    errors: v.errors,
    warnings: v.warnings,
    checks: report.checks.filter((c) => c.result !== 'pass'),
    blocking,
    acknowledge,
    overridden: gate.overridden,
    plan,
    planProblems,
    destroys: plan?.destroys ?? [],
    canInstall: v.valid && blocking.length === 0 && planProblems.length === 0 && !!plan,
  };
}
