/**
 * Who owns /etc/rancher/rke2/registries.yaml. Since Rancher 2.7.5 the cluster does: Harvester's
 * settings controller copies the containerd-registry setting into the local cluster's
 * provisioning.cattle.io Cluster (spec.rkeConfig.registries), and rancher-system-agent writes the
 * file from it with every machine plan (harvester/harvester#4156, PR #4286) — an empty setting gives
 * an absent or empty file. Restoring the install-time copy over it would fight the controller, and
 * lose: a hand-written file is recycled (167 B -> 0 B) on the next plan.
 *
 * How hvagent knows: the cluster owns the file once the image is bootstrapped by rancherd and this
 * node's rancher-system-agent takes remote plans from Rancher — /etc/rancher/agent/config.yaml says
 * `remoteEnabled: true` and the `connectionInfoFile` it names exists (rancher/system-agent
 * install.sh generate_config writes both; the connection info is what lets Rancher reach the node).
 * Until then (first boot, before rancherd) and on images without rancherd, hvagent keeps the file
 * as the install declared it. The `owner` setting (agent | cluster | auto) overrides the judgement.
 */
import { access, readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import type { Bootstrapper } from '../../lib/image-profile.js';
import { classifyDrift, type CurrentFile, type DesiredRegistries } from './registries-file.js';

export const SYSTEM_AGENT_CONFIG = '/etc/rancher/agent/config.yaml';

export type RegistriesOwner = 'agent' | 'cluster';

export interface OwnershipFacts {
  bootstrapper: Bootstrapper;
  /** The owner setting, when set (agent, cluster); auto or unset: judge. */
  setting?: unknown;
  /** rancher-system-agent's config, when the node has one. */
  systemAgent?: { remoteEnabled: boolean; connectionInfoFile?: string; connectionInfoExists: boolean };
}

export interface Ownership {
  owner: RegistriesOwner;
  why: string;
}

/** Pure. */
export function registriesOwner(f: OwnershipFacts): Ownership {
  if (f.setting === 'agent' || f.setting === 'cluster') return { owner: f.setting, why: `the registries owner setting says ${f.setting}` };
  if (f.bootstrapper !== 'rancherd') return { owner: 'agent', why: 'no rancherd on this image: nothing else writes registries.yaml, hvagent keeps it as installed' };
  const sa = f.systemAgent;
  if (!sa) return { owner: 'agent', why: `rancherd has not set up rancher-system-agent yet (no ${SYSTEM_AGENT_CONFIG}): hvagent keeps the install-time file for RKE2's first start` };
  if (!sa.remoteEnabled) return { owner: 'agent', why: `rancher-system-agent takes no remote plans (${SYSTEM_AGENT_CONFIG}: remoteEnabled is not true): hvagent keeps the install-time file` };
  if (!sa.connectionInfoExists) {
    const missing = sa.connectionInfoFile ? `${sa.connectionInfoFile} missing` : `${SYSTEM_AGENT_CONFIG} names no connectionInfoFile`;
    return { owner: 'agent', why: `rancher-system-agent is not connected to Rancher yet (${missing}): hvagent keeps the install-time file` };
  }
  return {
    owner: 'cluster',
    why: `rancher-system-agent takes plans from Rancher (${SYSTEM_AGENT_CONFIG}, ${sa.connectionInfoFile}): since Rancher 2.7.5 it writes registries.yaml from the cluster's containerd-registry setting, so hvagent follows the cluster and only reports drift`,
  };
}

export async function readOwnershipFacts(root: (p: string) => string, bootstrapper: Bootstrapper, setting: unknown): Promise<OwnershipFacts> {
  const text = await readFile(root(SYSTEM_AGENT_CONFIG), 'utf8').catch(() => undefined);
  if (text === undefined) return { bootstrapper, setting };
  let doc: Record<string, unknown> = {};
  try {
    doc = (parseYaml(text) ?? {}) as Record<string, unknown>;
  } catch {
    // An unparsable config takes no remote plans.
  }
  const connectionInfoFile = typeof doc.connectionInfoFile === 'string' ? doc.connectionInfoFile : undefined;
  const connectionInfoExists = connectionInfoFile ? await access(root(connectionInfoFile)).then(() => true, () => false) : false;
  return { bootstrapper, setting, systemAgent: { remoteEnabled: doc.remoteEnabled === true || doc.remoteEnabled === 'true', connectionInfoFile, connectionInfoExists } };
}

export interface ClusterFileFacts {
  current: CurrentFile;
  /** What the install-time setting renders to (undefined: nothing was declared at install). */
  installTime?: DesiredRegistries;
  /** The size the file had when hvagent last looked, if it changed since. */
  previousSize?: number;
  /** Where the file lives, for messages. */
  shown: string;
}

export interface ClusterFileReport {
  detail: string;
  /** Set when the file differs from the install-time declaration (logged once per change). */
  drift?: string;
}

const size = (c: CurrentFile): number => Buffer.byteLength(c.content ?? '');

/**
 * What the cluster-owned file says, in words an operator needs to see; the 167 B -> 0 B recycle
 * is named for what it is. Pure.
 */
export function explainClusterFile(f: ClusterFileFacts): ClusterFileReport {
  const change = f.previousSize !== undefined && f.previousSize !== size(f.current) ? ` (was ${f.previousSize} B)` : '';
  const how = 'set Harvester\'s containerd-registry setting to change it; a hand-written file is replaced on the next plan';
  if (f.current.content === undefined) {
    return {
      detail: `${f.shown} is absent${change}: owned by the cluster, whose containerd-registry setting is empty (rancher-system-agent writes or removes it); ${how}`,
      drift: f.installTime ? `${f.shown} is absent while the install declared mirrors: the cluster's setting is empty` : undefined,
    };
  }
  if (f.current.content.trim() === '') {
    return {
      detail: `${f.shown} is ${size(f.current)} B${change}: written by rancher-system-agent from the cluster's empty containerd-registry setting; ${how}`,
      drift: f.installTime || change ? `${f.shown} is ${size(f.current)} B${change}: recycled by the cluster from its empty containerd-registry setting` : undefined,
    };
  }
  if (!f.installTime) return { detail: `${f.shown} (${size(f.current)} B${change}) follows the cluster's containerd-registry setting; ${how}` };
  const d = classifyDrift(f.current, f.installTime);
  if (d === 'none') return { detail: `${f.shown} (${size(f.current)} B) matches the install-time setting and is now owned by the cluster` };
  return {
    detail: `${f.shown} (${size(f.current)} B${change}) differs from the install-time setting (${d}): the cluster's containerd-registry setting wins, hvagent leaves it; ${how}`,
    drift: `${f.shown} differs from the install-time setting (${d}); left to the cluster`,
  };
}
