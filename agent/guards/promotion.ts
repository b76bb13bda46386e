/**
 * promotion guard (join nodes): watch this node's Node object for Harvester's promotion request
 * (annotation harvesterhci.io/promote-status=running, set by the promote controller), then switch
 * RKE2 from agent to server and record the outcome on the Node.
 */
import os from 'node:os';
import { NO_NODE_CONFIG, type Guard, type GuardContext, type GuardResult } from '../guard.js';
import { rke2Settings, type Rke2Settings } from '../rke2/settings.js';
import { nodeNameOf } from '../rke2/role.js';
import { isPromoted } from '../rke2/bringup.js';
import { loadKubeCredentials } from '../kube/kubeconfig.js';
import { KubeClient } from '../kube/client.js';
import { PROMOTE_STATUS, promotionRequested } from '../promote/server-dropin.js';
import { promoteNode } from '../promote/promote.js';
import { sleep } from '../../lib/wait.js';
import type { HarvesterConfig } from '../../config/types.js';

const PROMOTION_TIMEOUT_MS = 15 * 60_000;

/** One look at the Node: promote when asked. */
async function checkOnce(ctx: GuardContext, config: HarvesterConfig, s: Rke2Settings): Promise<GuardResult> {
  const nodeName = nodeNameOf(config, os.hostname(), s.nodeName);
  let annotations: Record<string, string> | undefined;
  try {
    const client = new KubeClient(await loadKubeCredentials(s.kubeletKubeconfig, ctx.root), { signal: ctx.stopping });
    try {
      annotations = (await client.getNode(nodeName)).metadata.annotations;
    } finally {
      await client.close();
    }
  } catch (err) {
    return { status: 'retry', reason: `cannot read Node ${nodeName}: ${(err as Error).message}` };
  }
  if (ctx.bootstrapper === 'rancherd') return judgePromotionUnderRancherd(nodeName, annotations);
  if (!promotionRequested(annotations)) return { status: 'ok', detail: `worker; watching Node ${nodeName} for a promotion request` };
  const timeout = typeof ctx.settings.promotionTimeoutMs === 'number' ? ctx.settings.promotionTimeoutMs : PROMOTION_TIMEOUT_MS;
  const r = await promoteNode(ctx, config, s, nodeName, timeout);
  return r.ok ? { status: 'ok', detail: r.detail } : { status: 'fail', diagnosis: r.detail, hint: 'see the rke2-server log lines above; the node was kept as a worker' };
}

/**
 * Under rancherd, Harvester's promote controller promotes the node through Rancher (the machine
 * plan that rancher-system-agent applies switches RKE2 to server): hvagent reports the Node's
 * promote-status and never switches RKE2 itself. Pure.
 */
export function judgePromotionUnderRancherd(nodeName: string, annotations: Record<string, string> | undefined): GuardResult {
  const st = annotations?.[PROMOTE_STATUS];
  const who = "Harvester's promote controller promotes through rancher-system-agent; hvagent watches only";
  if (st === 'running') return { status: 'ok', detail: `Node ${nodeName} is being promoted (${PROMOTE_STATUS}=running; ${who})` };
  if (st === 'complete') return { status: 'ok', detail: `Node ${nodeName} was promoted to control-plane (${PROMOTE_STATUS}=complete)` };
  if (st === 'failed') {
    return { status: 'fail', diagnosis: `Harvester's promotion of Node ${nodeName} failed (${PROMOTE_STATUS}=failed)`, hint: 'read the promote job in the harvester-system namespace (kubectl -n harvester-system get jobs); Harvester retries it' };
  }
  return { status: 'ok', detail: `worker; ${who}` };
}

const guard: Guard = {
  name: 'promotion',
  dependsOn: ['rke2'],
  deadlineMs: 5 * 60_000,
  async reconcile(ctx) {
    const config = ctx.config;
    if (!config) return NO_NODE_CONFIG;
    if ((config.install?.mode ?? '').toLowerCase() !== 'join') {
      return { status: 'skip', reason: 'only join nodes are promoted (a create node is control-plane from the start)' };
    }
    if (await isPromoted(ctx)) return { status: 'ok', detail: 'already promoted to control-plane' };
    return checkOnce(ctx, config, rke2Settings(ctx.settings));
  },
  async watch(ctx) {
    const config = ctx.config;
    if (!config || (config.install?.mode ?? '').toLowerCase() !== 'join') return;
    const s = rke2Settings(ctx.settings);
    while (!ctx.signal.aborted && !(await isPromoted(ctx))) {
      try {
        await sleep(s.pollIntervalMs, ctx.signal);
      } catch {
        return; // aborted
      }
      const r = await checkOnce(ctx, config, s);
      if (r.status === 'ok') ctx.progress(r.detail ?? 'ok');
      else if (r.status === 'fail') {
        ctx.log.error('promotion failed', { diagnosis: r.diagnosis });
        ctx.progress(`promotion failed: ${r.diagnosis.split('\n')[0]}`);
      } else if (r.status === 'retry') ctx.log.warn('promotion watch', { reason: r.reason });
    }
  },
};

export default guard;
