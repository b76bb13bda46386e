/**
 * What an OS image brings that changes how the node is brought up: whether rancherd is there to
 * bootstrap RKE2, Rancher and Harvester (Harvester's own image), or hvagent must drive RKE2 itself.
 * The installer asks this of the source tree at install time, the agent of `/` at every boot; one
 * rule for both so they never disagree about who owns RKE2.
 */
import { Host } from './host.js';

/** Where an image carries rancherd: the binary (Harvester's SL Micro image: /usr/bin/rancherd) or its unit. */
export const RANCHERD_BINARIES = ['/usr/bin/rancherd', '/usr/sbin/rancherd', '/usr/local/bin/rancherd'] as const;
export const RANCHERD_UNITS = ['/usr/lib/systemd/system/rancherd.service', '/lib/systemd/system/rancherd.service', '/etc/systemd/system/rancherd.service'] as const;

export type Bootstrapper = 'rancherd' | 'hvagent';

export interface BootstrapperFacts {
  /** Paths of RANCHERD_BINARIES that exist in the image. */
  binaries: string[];
  /** Paths of RANCHERD_UNITS that exist in the image. */
  units: string[];
}

export interface BootstrapperChoice {
  bootstrapper: Bootstrapper;
  /** One line for `hvagent status`, the plan and the install log. */
  why: string;
}

/** rancherd bootstraps when the image has both its binary and its unit; a half-present rancherd is named. */
export function chooseBootstrapper(facts: BootstrapperFacts): BootstrapperChoice {
  const [bin] = facts.binaries;
  const [unit] = facts.units;
  if (bin && unit) return { bootstrapper: 'rancherd', why: `the image carries rancherd (${bin}, ${unit}): rancherd bootstraps RKE2, Rancher and Harvester` };
  if (bin) return { bootstrapper: 'hvagent', why: `the image has ${bin} but no rancherd.service unit: hvagent drives RKE2 itself` };
  if (unit) return { bootstrapper: 'hvagent', why: `the image has ${unit} but no rancherd binary: hvagent drives RKE2 itself` };
  return { bootstrapper: 'hvagent', why: 'the image carries no rancherd: hvagent drives RKE2 itself' };
}

/** The facts of the image rooted at host.sysroot (a source tree at install time, `/` on the node). */
export async function bootstrapperFacts(host: Host): Promise<BootstrapperFacts> {
  const found = await host.existing([...RANCHERD_BINARIES, ...RANCHERD_UNITS]);
  return { binaries: RANCHERD_BINARIES.filter((p) => found.has(p)), units: RANCHERD_UNITS.filter((p) => found.has(p)) };
}
