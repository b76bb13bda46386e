/**
 * Switching a join node from RKE2 agent to server: write the server drop-in, stop the agent, start
 * the server, wait for it to be ready (bounded), then record the result on the Node object the way
 * Harvester's promote controller reads it (promote-status complete / failed). A failed promotion
 * rolls the node back to a working agent instead of leaving it with neither.
 */
import { rm, access, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import type { GuardContext } from '../guard.js';
import type { HarvesterConfig } from '../../config/types.js';
import type { Rke2Settings } from '../rke2/settings.js';
import { bringUp } from '../rke2/bringup.js';
import { isWitness, PROMOTED_MARKER } from '../rke2/role.js';
import { loadKubeCredentials } from '../kube/kubeconfig.js';
import { KubeClient } from '../kube/client.js';
import { renderPromotionServerDropIn, PROMOTE_STATUS, vipFromServerUrl } from './server-dropin.js';
import { AUDIT_POLICY_PATH, SERVER_DROPIN_PATH } from '../../node/paths.js';
import { renderKubeVipManifest, KUBE_VIP_MANIFEST_PATH } from '../../node/index.js';

export interface PromotionResult {
  ok: boolean;
  detail: string;
}

export async function promoteNode(ctx: GuardContext, config: HarvesterConfig, s: Rke2Settings, nodeName: string, timeoutMs: number): Promise<PromotionResult> {
  const witness = isWitness(config);
  const dropIn = path.join(ctx.root(s.configDir), path.basename(SERVER_DROPIN_PATH));
  const auditPolicyPresent = await access(ctx.root(AUDIT_POLICY_PATH)).then(() => true, () => false);
  ctx.log.info('promotion requested', { node: nodeName, witness });
  ctx.progress(`promoting ${nodeName} to ${witness ? 'etcd' : 'control-plane'}`);
  await writeFileAtomic(dropIn, renderPromotionServerDropIn(config, { witness, auditPolicyPresent }), { mode: 0o600 });

  const until = ctx.now() + timeoutMs;
  let reason = 'not started';
  let ready = false;
  while (ctx.now() < until && !ctx.signal.aborted) {
    const out = await bringUp(ctx, config, 'server', s, true);
    if (out.ready) {
      ready = true;
      break;
    }
    reason = out.reason ?? reason;
    if (out.fatal) break;
  }

  if (ready) {
    if (!witness) await ensureKubeVip(ctx, config);
    await mkdir(path.dirname(ctx.root(PROMOTED_MARKER)), { recursive: true });
    await writeFileAtomic(ctx.root(PROMOTED_MARKER), `${new Date(ctx.now()).toISOString()}\n`);
    await recordStatus(ctx, s.adminKubeconfig, nodeName, 'complete');
    return { ok: true, detail: `promoted to ${witness ? 'etcd (witness)' : 'control-plane'}: rke2-server ready` };
  }

  // Roll back so the node keeps serving as a worker; Harvester marks the promotion failed.
  ctx.log.error('promotion failed; rolling back to rke2-agent', { node: nodeName, reason });
  await rm(dropIn, { force: true });
  const back = await bringUp(ctx, config, 'agent', s, true);
  await recordStatus(ctx, s.kubeletKubeconfig, nodeName, 'failed');
  return {
    ok: false,
    detail: `promotion of ${nodeName} failed: ${reason}${back.ready ? '\nrolled back: rke2-agent is running again' : `\nrollback to rke2-agent also failed: ${back.reason ?? ''}`}`,
  };
}

async function recordStatus(ctx: GuardContext, kubeconfig: string, nodeName: string, status: 'complete' | 'failed'): Promise<void> {
  try {
    const client = new KubeClient(await loadKubeCredentials(kubeconfig, ctx.root));
    try {
      await client.patchNode(nodeName, { metadata: { annotations: { [PROMOTE_STATUS]: status } } });
    } finally {
      await client.close();
    }
  } catch (err) {
    ctx.log.warn('cannot record promotion status on the Node', { node: nodeName, status, error: (err as Error).message });
  }
}

/**
 * A promoted control-plane node runs kube-vip too, so the VIP survives the loss of the first node.
 * Same manifest the installer renders for create nodes, with the VIP from server_url.
 */
async function ensureKubeVip(ctx: GuardContext, config: HarvesterConfig): Promise<void> {
  const target = ctx.root(KUBE_VIP_MANIFEST_PATH);
  if (await access(target).then(() => true, () => false)) return;
  const vip = config.install?.vip || vipFromServerUrl(config.serverUrl);
  if (!vip || !/^\d{1,3}(\.\d{1,3}){3}$/.test(vip)) {
    ctx.log.warn('no IPv4 VIP known on this node: kube-vip not added', { serverUrl: config.serverUrl });
    return;
  }
  try {
    const manifest = renderKubeVipManifest(config, { vip });
    if (manifest) await writeFileAtomic(target, manifest, { mode: 0o644 });
  } catch (err) {
    ctx.log.warn('cannot render the kube-vip manifest', { error: (err as Error).message });
  }
}
