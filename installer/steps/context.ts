/** What every install step gets: the plan, the config, where to mount, how to report. */
import type { HarvesterConfig } from '../../config/types.js';
import type { OsSource } from '../disk/contracts.js';
import type { SourceDigests } from '../deploy/index.js';
import type { InstallPlan, StepName } from '../disk/types.js';
import type { MachineFacts } from '../preflight/types.js';
import type { Logger } from '../../lib/logger.js';
import type { Redactor } from '../../lib/redact.js';
import type { AgentSource } from './agent-source.js';
import type { BundleSource } from './bundle-source.js';
import type { EventBus } from './progress.js';
import { killAtBytes } from './test-faults.js';

export interface InstallContext {
  plan: InstallPlan;
  config: HarvesterConfig;
  source: OsSource;
  /** The image bundle to copy to COS_PERSISTENT (persistent step), or none and why. */
  bundle: BundleSource;
  /** The hvagent payload for COS_PERSISTENT (agent step), or none and why. */
  agent: AgentSource;
  /** Mount points and scratch space of this install (e.g. /run/hvinstall/loop3). */
  runDir: string;
  bus: EventBus;
  log: Logger;
  redactor: Redactor;
  signal?: AbortSignal;
  /** Fresh machine facts (re-gathered by the guard). */
  facts: () => Promise<MachineFacts>;
  /** The machine the node is for when it is not this one (RunInstallOptions.nodeFacts). */
  nodeFacts?: MachineFacts;
  /** Test-only fault injection (HVINSTALL_TEST_SIGKILL_AT), see pipeline.ts. */
  killPoint?: string;
  /** The OS source's content digests, taken by the guard before any disk is touched. */
  sourceDigests?: SourceDigests;
  /** What an earlier (or this) run recorded for a step in the journal. */
  recorded?: (step: StepName) => Record<string, unknown> | undefined;
}

export interface Step {
  name: StepName;
  /** Does the work; idempotent (a re-run after a crash redoes it cleanly). Returns journal detail. */
  run(ctx: InstallContext): Promise<Record<string, unknown> | void>;
  /**
   * For a step an earlier run completed: why its result no longer holds (then it and every later
   * step run again), or undefined when it can be kept. No check: a completed step is kept.
   */
  check?(ctx: InstallContext, detail: Record<string, unknown> | undefined): Promise<string | undefined>;
}

/**
 * The `onProgress` of a step's copy: each count of bytes goes to the progress bus, and to the
 * test-only kill point `<step>-bytes:<n>` (test-faults.ts).
 */
export function copyProgress(ctx: Pick<InstallContext, 'bus' | 'killPoint'>, step: 'deploy' | 'persistent' | 'agent'): (done: number, total: number) => void {
  const killAt = killAtBytes(step, ctx.killPoint);
  return (done, total) => {
    ctx.bus.bytes(step, done, total);
    killAt(done);
  };
}
