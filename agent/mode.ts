/**
 * Who bootstraps this node, as the agent sees it at every start: rancherd when the image carries it
 * (Harvester's), else hvagent itself (lib/image-profile.ts is the one rule, shared with the
 * installer). The `bootstrapper` setting (rancherd | hvagent | auto) overrides the image, for an
 * operator who knows better. In rancherd mode hvagent prepares the node (network-online,
 * registries, image-preload, longhorn-disk) before rancherd starts and then only watches and
 * diagnoses rke2, vip and promotion: rancherd starts RKE2, the harvester chart's kube-vip announces
 * the VIP and Harvester's promote controller promotes.
 */
import { Host } from '../lib/host.js';
import { HvError, ExitCode } from '../lib/errors.js';
import { bootstrapperFacts, chooseBootstrapper, type Bootstrapper } from '../lib/image-profile.js';

export interface BootstrapMode {
  by: Bootstrapper;
  why: string;
}

/** The mode from the setting and the image's facts. Pure over its inputs. */
export function resolveBootstrapMode(setting: unknown, image: BootstrapMode): BootstrapMode {
  if (setting === undefined || setting === 'auto') return image;
  if (setting === 'rancherd' || setting === 'hvagent') {
    return { by: setting, why: `the bootstrapper setting says ${setting} (the image alone would give: ${image.by})` };
  }
  throw new HvError(`bootstrapper must be rancherd, hvagent or auto, got ${JSON.stringify(setting)}`, { where: 'agent settings', exitCode: ExitCode.usage });
}

export async function detectBootstrapMode(rootDir: string, setting: unknown): Promise<BootstrapMode> {
  const choice = chooseBootstrapper(await bootstrapperFacts(new Host(rootDir)));
  return resolveBootstrapMode(setting, { by: choice.bootstrapper, why: choice.why });
}
