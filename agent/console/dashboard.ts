/**
 * What the node's console shows after the install, as Harvester's console does
 * (harvester/harvester-installer pkg/console/dashboard_panels.go): the management URL
 * (https://<VIP>), the node's role, the node and cluster state, and here also each hvagent guard's
 * phase with its diagnosis, from /run/hvagent/status.json (agent/status.ts). Pure.
 */
import type { HarvesterConfig } from '../../config/types.js';
import type { GuardStatus, StatusDocument } from '../guard.js';

export interface DashboardInput {
  config?: HarvesterConfig;
  /** Why the node config could not be read, when it could not. */
  configProblem?: string;
  status?: StatusDocument;
  /** Why the status document could not be read (hvagent not started yet, say). */
  statusProblem?: string;
  /** The process that wrote the status document still runs. */
  alive: boolean;
  hostname: string;
  /** The node's IPv4 addresses with their interface, e.g. "mgmt-br 10.0.0.11/24". */
  addresses: string[];
  now: number;
  /** The boot assessment's line when an operator must know it (a fallback, an attempt judged now). */
  assessment?: string;
}

export interface GuardRow {
  name: string;
  phase: string;
  /** The diagnosis (last error) or what it is doing (detail). */
  text: string;
  hint?: string;
  /** When it tries again, for a guard that waits. */
  retry?: string;
}

export interface DashboardView {
  managementUrl: string;
  role: string;
  nodeState: string;
  clusterState: string;
  guards: GuardRow[];
  notes: string[];
}

/** https://<VIP>: the VIP this node created the cluster with, or the host of the cluster it joined. */
export function managementUrl(config: HarvesterConfig | undefined): string | undefined {
  const install = config?.install;
  if (install?.mode === 'create' && install.vip) return `https://${install.vip}`;
  if (config?.serverUrl) {
    try {
      return `https://${new URL(config.serverUrl).hostname}`;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

const DONE = new Set(['succeeded', 'watching', 'skipped']);

function phaseOf(status: StatusDocument | undefined, name: string): string | undefined {
  return status?.guards.find((g) => g.name === name)?.phase;
}

function rowText(g: GuardStatus): string {
  const t = g.phase === 'failed' || g.phase === 'waiting' ? g.lastError ?? g.detail : g.detail ?? g.lastError;
  return (t ?? '').replace(/\s*\n\s*/g, ' | ');
}

function relative(iso: string | undefined, now: number): string | undefined {
  if (!iso) return undefined;
  const s = Math.round((Date.parse(iso) - now) / 1000);
  return s >= 0 ? `in ${s} s` : `${-s} s ago`;
}

/** RKE2's certificates when they run out (the certificates guard's days left), else nothing: the guard's row has them. */
function certificatesNote(status: StatusDocument | undefined): string | undefined {
  const g = status?.guards.find((x) => x.name === 'certificates');
  const level = (g?.data as { level?: string } | undefined)?.level;
  if (!g || (level !== 'expired' && level !== 'expiring')) return undefined;
  return `RKE2 certificates: ${rowText(g)} (hvagent status --json lists each)`;
}

export function dashboard(input: DashboardInput): DashboardView {
  const { config, status } = input;
  const notes: string[] = [];
  const url = managementUrl(config);
  const mode = config?.install?.mode;
  const role = config?.install?.role ?? 'default';
  const roleText = !config ? 'unknown (no node config)' : mode === 'create' ? `${role} (this node created the cluster)` : mode === 'join' ? `${role} (joined ${config.serverUrl ?? 'a cluster'})` : `${mode ?? 'unknown'} mode`;
  if (input.configProblem) notes.push(`node config: ${input.configProblem}`);
  if (input.assessment) notes.push(input.assessment);

  let nodeState: string;
  let clusterState: string;
  if (!status) {
    nodeState = `Setting up node: hvagent has not reported yet${input.statusProblem ? ` (${input.statusProblem})` : ''}`;
    clusterState = 'unknown';
  } else {
    const failed = status.guards.filter((g) => g.phase === 'failed');
    const pending = status.guards.filter((g) => !DONE.has(g.phase));
    const rke2 = phaseOf(status, 'rke2');
    const vip = phaseOf(status, 'vip');
    if (status.state === 'running' && !input.alive) notes.push(`hvagent is not running (pid ${status.pid} is gone): systemctl status hvagent`);
    if (status.state === 'stopped') notes.push(`hvagent was stopped at ${status.stoppedAt ?? status.updatedAt}`);
    if (failed.length) nodeState = `NotReady: ${failed.map((g) => g.name).join(', ')} failed`;
    else if (rke2 && DONE.has(rke2) && pending.length === 0) nodeState = 'Ready';
    else if (rke2 && DONE.has(rke2)) nodeState = `Setting up Harvester (${pending.map((g) => `${g.name} ${g.phase}`).join(', ')})`;
    else nodeState = `Setting up node (${pending.map((g) => `${g.name} ${g.phase}`).join(', ') || 'starting'})`;
    clusterState = vip && DONE.has(vip) ? `Ready: the management address answers${url ? ` at ${url.replace(/^https:\/\//, '')}` : ''}` : vip === 'failed' ? 'NotReady: the VIP does not answer (see the vip guard)' : 'Setting up: waiting for the management address';
  }
  const certs = certificatesNote(status);
  if (certs) notes.push(certs);
  const guards: GuardRow[] = (status?.guards ?? []).map((g) => ({
    name: g.name,
    phase: g.phase,
    text: rowText(g),
    hint: g.phase === 'failed' ? g.hint : undefined,
    retry: g.phase === 'waiting' ? relative(g.nextRetryAt, input.now) : undefined,
  }));
  return { managementUrl: url ?? '(not known yet)', role: roleText, nodeState, clusterState, guards, notes };
}
