/**
 * The Node Event that tells the cluster (kubectl describe node, the dashboards, alerting on Events)
 * that this node's RKE2 certificates run out. Best effort: the node's own kubeconfig (rke2.yaml on a
 * server, the kubelet's elsewhere); an API that does not answer is a fact for the status, not an error.
 */
import { access } from 'node:fs/promises';
import { KubeClient } from '../kube/client.js';
import { loadKubeCredentials } from '../kube/kubeconfig.js';
import type { CertificatePlan } from './plan.js';

/** Kubernetes keeps an Event's message to 1 KiB. */
const MESSAGE_MAX = 1024;

/** The core/v1 Event for a plan's event. Pure. */
export function certificateEvent(nodeName: string, e: NonNullable<CertificatePlan['event']>, now: string): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { generateName: `${nodeName}.rke2-certificates.`, namespace: 'default' },
    involvedObject: { apiVersion: 'v1', kind: 'Node', name: nodeName, uid: nodeName },
    reason: e.reason,
    message: e.message.length > MESSAGE_MAX ? `${e.message.slice(0, MESSAGE_MAX - 1)}…` : e.message,
    type: 'Warning',
    source: { component: 'hvagent', host: nodeName },
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
  };
}

/** Sends it with the first kubeconfig that exists; the problem when none answered. The signal (the agent stopping) abandons it. */
export async function sendCertificateEvent(root: (p: string) => string, kubeconfigs: string[], event: Record<string, unknown>, signal?: AbortSignal): Promise<{ sent: boolean; problem?: string }> {
  const present: string[] = [];
  for (const k of kubeconfigs) if (await access(root(k)).then(() => true, () => false)) present.push(k);
  if (!present.length) return { sent: false, problem: `no kubeconfig yet (${kubeconfigs.join(', ')})` };
  let client: KubeClient | undefined;
  try {
    client = new KubeClient(await loadKubeCredentials(present[0]!, root), { timeoutMs: 5_000, signal });
    await client.createEvent('default', event);
    return { sent: true };
  } catch (err) {
    return { sent: false, problem: (err as Error).message };
  } finally {
    await client?.close();
  }
}
