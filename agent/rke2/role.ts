/** Pure decisions about which RKE2 role this node runs and what its config must contain. */
import type { HarvesterConfig } from '../../config/types.js';

export type Rke2Role = 'server' | 'agent';

/** Marker written once a join node has been promoted, so restarts keep the server role. */
// Under /var/lib/rancher: one of cOS's PERSISTENT_STATE_PATHS, so it survives a reboot of the A/B image.
export const PROMOTED_MARKER = '/var/lib/rancher/hvagent/promoted';

/**
 * Create nodes are servers (cluster-init); join nodes start as agents until promoted
 * (harvester/harvester pkg/controller/master/node/promote_controller.go). The install-only mode never starts RKE2.
 */
export function desiredRole(config: HarvesterConfig, promoted: boolean): Rke2Role | undefined {
  const mode = (config.install?.mode ?? '').toLowerCase();
  if (mode === 'create') return 'server';
  if (mode === 'join') return promoted ? 'server' : 'agent';
  return undefined;
}

export function isWitness(config: HarvesterConfig): boolean {
  return (config.install?.role ?? '').toLowerCase() === 'witness';
}

/**
 * The supervisor address a joining node registers with: Harvester's server_url is
 * https://<vip>:443 (Rancher); RKE2's supervisor listens on 9345 (harv-update-rke2-server-url).
 */
export function supervisorUrl(serverUrl: string): string | undefined {
  const host = serverUrlHost(serverUrl);
  return host ? `https://${host}:9345` : undefined;
}

/** The host (the VIP) of Harvester's server_url, with or without its scheme. */
export function serverUrlHost(serverUrl: string | undefined): string | undefined {
  if (!serverUrl) return undefined;
  const s = serverUrl.trim();
  try {
    return new URL(/^https?:\/\//.test(s) ? s : `https://${s}`).hostname;
  } catch {
    return undefined;
  }
}

/** The node name the cluster knows this node by. */
export function nodeNameOf(config: HarvesterConfig | undefined, hostName: string, override?: string): string {
  return override ?? (config?.os?.hostname || hostName);
}
