/**
 * Settings shared by the rke2, vip and promotion guards, with RKE2's real paths as defaults.
 * Tests (and unusual installs) override them through the agent settings file.
 */
export interface Rke2Settings {
  /** The rke2 executable when supervising without systemd. */
  binary: string;
  /** 'auto' uses systemd when it is PID 1, else supervises the process itself. */
  supervisor: 'auto' | 'systemd' | 'process';
  apiServerUrl: string;
  kubeletHealthzUrl: string;
  serverTlsDir: string;
  adminKubeconfig: string;
  kubeletKubeconfig: string;
  podManifestsDir: string;
  configDir: string;
  /** How long one reconcile pass waits for readiness before reporting "not yet" to the runner. */
  probeWindowMs: number;
  probeIntervalMs: number;
  /** How often the promotion watch polls the Node object. */
  pollIntervalMs: number;
  /** Override the node name (default: os.hostname from the config, else the host name). */
  nodeName?: string;
  /** Override the URL the VIP is checked on (default https://<vip>:6443/readyz). */
  vipUrl?: string;
  /** Extra environment for the supervised rke2 process. */
  env?: Record<string, string>;
  /** Restarts of a crashing supervised process before the guard gives up. */
  maxCrashes: number;
}

export const RKE2_DEFAULTS: Rke2Settings = {
  // Harvester installs RKE2 under /opt/rke2 (/usr is read-only in the A/B image).
  binary: '/opt/rke2/bin/rke2',
  supervisor: 'auto',
  apiServerUrl: 'https://127.0.0.1:6443',
  kubeletHealthzUrl: 'http://127.0.0.1:10248/healthz',
  serverTlsDir: '/var/lib/rancher/rke2/server/tls',
  adminKubeconfig: '/etc/rancher/rke2/rke2.yaml',
  kubeletKubeconfig: '/var/lib/rancher/rke2/agent/kubelet.kubeconfig',
  podManifestsDir: '/var/lib/rancher/rke2/agent/pod-manifests',
  configDir: '/etc/rancher/rke2/config.yaml.d',
  probeWindowMs: 60_000,
  probeIntervalMs: 1_000,
  pollIntervalMs: 10_000,
  maxCrashes: 5,
};

/** Merges a guard's raw settings over the defaults, keeping only well-typed values. */
export function rke2Settings(raw: Record<string, unknown> | undefined): Rke2Settings {
  const out: Rke2Settings = { ...RKE2_DEFAULTS };
  if (!raw) return out;
  for (const [k, def] of Object.entries(RKE2_DEFAULTS) as Array<[keyof Rke2Settings, unknown]>) {
    const v = raw[k];
    if (v !== undefined && typeof v === typeof def) (out as unknown as Record<string, unknown>)[k] = v;
  }
  // The agent's common settings name the binary `rke2Binary`; a guard-level `binary` wins.
  if (typeof raw.binary !== 'string' && typeof raw.rke2Binary === 'string') out.binary = raw.rke2Binary;
  if (typeof raw.nodeName === 'string') out.nodeName = raw.nodeName;
  if (typeof raw.vipUrl === 'string') out.vipUrl = raw.vipUrl;
  if (raw.env && typeof raw.env === 'object') out.env = raw.env as Record<string, string>;
  if (!['auto', 'systemd', 'process'].includes(out.supervisor)) out.supervisor = 'auto';
  return out;
}
