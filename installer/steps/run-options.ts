/** What runInstall takes (installer/steps/pipeline.ts); prepare.ts builds most of it. */
import type { Redactor } from '../../lib/redact.js';
import type { HarvesterConfig } from '../../config/types.js';
import type { OsSource } from '../disk/contracts.js';
import type { InstallPlan } from '../disk/types.js';
import type { MachineFacts } from '../preflight/types.js';
import type { AgentSource } from './agent-source.js';
import type { BundleSource } from './bundle-source.js';
import type { EventBus } from './progress.js';

export interface RunInstallOptions {
  /** hvpxe's node-report grant (automatic installs from hvpxe): the finish step writes it to NODE_REPORT_PATH, root-only. */
  nodeReport?: import('../../config/hvpxe-protocol.js').NodeReportGrant;
  plan: InstallPlan;
  config: HarvesterConfig;
  source: OsSource;
  /** The image bundle for COS_PERSISTENT (install.ts decides: --bundle, the ISO's, the live ISO's, none). */
  bundle: BundleSource;
  /** The hvagent payload (install.ts decides: --agent, the installer's own, none). */
  agent: AgentSource;
  /** Journal and log live here on the host (default /var/lib/hvinstall). */
  stateDir: string;
  /** Mounts and scratch (default /run/hvinstall/<disk>). */
  runDir?: string;
  bus: EventBus;
  redactor: Redactor;
  /**
   * The machine the node is for when it is not this one (a disk built here for another machine:
   * its --facts, or a stand-in that knows nothing of it): the render uses it instead of this machine's.
   */
  nodeFacts?: MachineFacts;
  /** The machine as it is now, for the guard (default: this machine's). */
  gatherFacts?: () => Promise<MachineFacts>;
  preserveOnError?: boolean;
  signal?: AbortSignal;
  /** Test-only: HVINSTALL_TEST_SIGKILL_AT. */
  killPoint?: string;
  /** Call the install webhooks (default true). */
  webhooks?: boolean;
}
