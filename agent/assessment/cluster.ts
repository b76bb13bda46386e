/**
 * Tells the cluster a node fell back (when its API answers): the Node stays cordoned (as
 * rancher/elemental#1304 asks: the controller that drained it must not schedule onto an image it
 * did not plan for), an annotation carries the reason, and an Event shows it in `kubectl describe
 * node`. Harvester's upgrade controller otherwise waits forever for the new OS image
 * (harvester/harvester#7584). Best effort: an unreachable API is logged, the node goes on.
 */
import os from 'node:os';
import type { Logger } from '../../lib/logger.js';
import type { HarvesterConfig } from '../../config/types.js';
import { KubeClient } from '../kube/client.js';
import { loadKubeCredentials } from '../kube/kubeconfig.js';
import { nodeNameOf } from '../rke2/role.js';
import type { AssessmentRecord } from './record.js';

export const FALLBACK_ANNOTATION = 'hvinstall.io/upgrade-fallback';
const KUBECONFIG = '/etc/rancher/rke2/rke2.yaml';

/** The Node patch and the Event for a committed fallback. Pure. */
export function fallbackClusterObjects(nodeName: string, record: AssessmentRecord, now: string): { patch: unknown; event: unknown } {
  return {
    patch: { spec: { unschedulable: true }, metadata: { annotations: { [FALLBACK_ANNOTATION]: record.message } } },
    event: {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { generateName: `${nodeName}.upgrade-fallback.`, namespace: 'default' },
      involvedObject: { apiVersion: 'v1', kind: 'Node', name: nodeName, uid: nodeName },
      reason: 'UpgradeFellBack',
      message: record.message,
      type: 'Warning',
      source: { component: 'hvagent', host: nodeName },
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    },
  };
}

export async function tellCluster(root: (p: string) => string, record: AssessmentRecord, log: Logger, config?: HarvesterConfig): Promise<void> {
  const nodeName = nodeNameOf(config, os.hostname());
  const client = new KubeClient(await loadKubeCredentials(KUBECONFIG, root));
  try {
    const { patch, event } = fallbackClusterObjects(nodeName, record, new Date().toISOString());
    await client.patchNode(nodeName, patch);
    await client.createEvent('default', event);
    log.info('boot assessment: the Node is cordoned, annotated and has an Event', { node: nodeName, annotation: FALLBACK_ANNOTATION });
  } finally {
    await client.close();
  }
}
